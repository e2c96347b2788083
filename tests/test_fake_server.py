"""The fake OpenAI-compatible server's fault injection, driven by the real openai client through
the router (retries, Retry-After, timeouts), and its command line."""
import json
import subprocess
import sys
import time
import urllib.request

import pytest

from mstar.config import RoleConfig
from mstar.testing.fake_server import FAULT_KINDS, FakeOpenAIServer, Faults, scripted_responder
from mstar.llm.openai_backend import OpenAIBackend
from mstar.llm.retry import RetryPolicy
from mstar.llm.router import LLMRouter, RolePolicy
from mstar.llm.types import LLMError
from mstar.llm.offline_backend import OfflineBackend
from latency import hang_timeout

MSG = [{"role": "user", "content": "what is the capital of France?"}]


def serve(faults, replies=("Paris is the capital.",) * 4, timeout_s=5.0, **kw):
    srv = FakeOpenAIServer(scripted_responder(list(replies)), faults=faults, **kw).__enter__()
    backend = OpenAIBackend("task", RoleConfig(backend="openai", model="m", base_url=srv.base_url,
                                               timeout_s=timeout_s), env={})
    others = {r: OfflineBackend(r) for r in ("reflector", "toolkit", "judge")}
    router = LLMRouter({"task": backend, **others},
                       policies={"task": RolePolicy(retry=RetryPolicy(max_retries=3, backoff_s=0.01))})
    return srv, router


@pytest.mark.parametrize("kind,error_text", [("rate_limit", "HTTP 429"), ("server_error", "HTTP 500"),
                                             ("malformed", "unreadable response")])
def test_transient_faults_are_retried_and_recorded(kind, error_text):
    srv, router = serve(Faults(script=[kind], retry_after_s=0.05))
    try:
        assert router.text("task", MSG) == "Paris is the capital."
    finally:
        srv.__exit__(None, None, None)
    rec = router.records[-1]
    if kind == "rate_limit":   # a 429 is a wait on the endpoint's limiter, not a retry (issue 28)
        assert rec.retries == 0 and rec.rate_limited == 1 and rec.error is None and rec.attempt_errors == []
    else:
        assert rec.retries == 1 and rec.error is None and error_text in rec.attempt_errors[0]
    stats = srv.stats()
    assert len(srv.requests) == 2 and (stats["requests"], stats["faults"], stats["served"]) == (2, {kind: 1}, 1)


def test_retry_after_is_honoured():
    srv, router = serve(Faults(script=["rate_limit"], retry_after_s=0.4))
    try:
        t0 = time.perf_counter()
        router.text("task", MSG)
        waited = time.perf_counter() - t0
    finally:
        srv.__exit__(None, None, None)
    assert waited >= 0.4
    assert router.records[-1].rate_limited == 1 and router.records[-1].held_s >= 0.4


def test_a_hang_past_the_timeout_is_cut_and_retried():
    # The timeout is far above a normal reply's time measured now (tests/latency.py): the retry
    # beats it on a busy machine too, and the hang (twice the timeout) does not.
    timeout_s, hang_s = hang_timeout(floor=0.4)
    srv, router = serve(Faults(script=["hang"], hang_s=hang_s), timeout_s=timeout_s)
    try:
        t0 = time.perf_counter()
        assert router.text("task", MSG) == "Paris is the capital."
        took = time.perf_counter() - t0
    finally:
        srv.__exit__(None, None, None)
    assert took < hang_s                    # the client did not wait out the hang
    errors = router.records[-1].attempt_errors
    assert len(errors) == 1 and f"timed out after {timeout_s:g}s" in errors[0]   # the hang; the retry was answered


def test_empty_and_cut_short_completions_are_retried_and_each_attempt_is_recorded():
    srv, router = serve(Faults(script=["empty", "truncated"]))
    try:
        assert router.text("task", MSG) == "Paris is the capital."   # empty, then cut short, then served
    finally:
        srv.__exit__(None, None, None)
    assert len(srv.requests) == 3
    rec = router.records[-1]
    assert rec.error is None and rec.retries == 2
    assert "empty completion" in rec.attempt_errors[0] and "cut short" in rec.attempt_errors[1]


def test_an_empty_completion_every_time_gives_up_after_the_retries():
    srv, router = serve(Faults(rate=1.0, kinds=("empty",)))
    try:
        with pytest.raises(LLMError, match="gave up after 4 attempt.*empty completion"):
            router.text("task", MSG)
    finally:
        srv.__exit__(None, None, None)
    assert len(srv.requests) == 4


def test_persistent_faults_give_up_after_three_retries():
    srv, router = serve(Faults(rate=1.0, kinds=("server_error",)))
    try:
        with pytest.raises(LLMError, match="gave up after 4 attempt"):
            router.text("task", MSG)
    finally:
        srv.__exit__(None, None, None)
    assert len(srv.requests) == 4 and router.records[-1].retries == 3


def test_latency_is_simulated_and_faults_draw_deterministically():
    srv = FakeOpenAIServer(scripted_responder(["a reply of some length"]), latency_s=0.25).__enter__()
    try:
        backend = OpenAIBackend("task", RoleConfig(backend="openai", model="m", base_url=srv.base_url), env={})
        t0 = time.perf_counter()
        backend.complete(MSG)
        assert time.perf_counter() - t0 >= 0.25
    finally:
        srv.__exit__(None, None, None)
    f = Faults(rate=0.2, seed=3)
    picks = [f.pick(n) for n in range(2000)]
    assert picks == [Faults(rate=0.2, seed=3).pick(n) for n in range(2000)]
    share = sum(p is not None for p in picks) / len(picks)
    assert 0.17 < share < 0.23 and set(p for p in picks if p) == set(FAULT_KINDS)


def test_bad_fault_settings_are_named():
    with pytest.raises(ValueError, match="unknown fault kind"):
        Faults(kinds=("lag",))
    with pytest.raises(ValueError, match="between 0 and 1"):
        Faults(rate=2)


def test_command_line_server_serves_the_offline_models_and_stats():
    proc = subprocess.Popen([sys.executable, "-m", "mstar.testing.fake_server", "--latency", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        backend = OpenAIBackend("judge", RoleConfig(backend="openai", model="offline-task", base_url=url), env={})
        prompt = ("<task>answer</task>\n<retrieved_memory>\nAnna moved to Lisbon in May.\n</retrieved_memory>\n"
                  "<question>\nWhere did Anna move?\n</question>\n<instruction>\nBe short.\n</instruction>")
        reply = backend.complete([{"role": "user", "content": prompt}])
        assert "Lisbon" in reply.text
        with urllib.request.urlopen(f"{url}/stats", timeout=5) as resp:
            assert json.load(resp) == {"requests": 1, "faults": {}, "served": 1, "max_in_flight": 1,
                                       "served_span_s": 0.0}
    finally:
        proc.terminate()
        proc.wait(timeout=10)

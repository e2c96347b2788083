"""LLM layer: routing, retries, per-role concurrency, truncation, the ledger -- with the real
openai client against the local fake server where a server is involved."""
import threading
import time

import pytest

from mstar.config import LLMConfig, RoleConfig
from mstar.testing.fake_server import FakeOpenAIServer, HTTPErrorReply, scripted_responder
from mstar.llm.ledger import call_kind
from mstar.llm.openai_backend import OpenAIBackend
from mstar.llm.retry import RetryPolicy, parse_retry_after, retry_delay
from mstar.llm.router import LLMRouter, RolePolicy
from mstar.llm.types import ChatResponse, LLMError, TransientLLMError, TruncatedCompletionError

MSG = [{"role": "user", "content": "hello there"}]


class Echo:
    name, model = "test", "echo"

    def complete(self, messages):
        return ChatResponse(text=messages[-1]["content"].upper(), model="echo", backend="test",
                            prompt_tokens=3, completion_tokens=2)


class Broken:
    name, model = "test", "broken"

    def complete(self, messages):
        raise RuntimeError("boom")


class Flaky:
    """Fails transiently `failures` times, then answers."""
    name, model = "test", "flaky"

    def __init__(self, failures, retry_after=None):
        self.failures, self.retry_after, self.calls = failures, retry_after, 0

    def complete(self, messages):
        self.calls += 1
        if self.calls <= self.failures:
            raise TransientLLMError(f"HTTP 429 (attempt {self.calls})", retry_after=self.retry_after)
        return ChatResponse(text="ok", model="flaky", backend="test", prompt_tokens=5, completion_tokens=1)


def router_with(backend, role="task", policy=None, sleeps=None, **kw):
    backends = {r: Echo() for r in ("task", "reflector", "toolkit", "judge")}
    backends[role] = backend
    return LLMRouter(backends, policies={role: policy or RolePolicy(retry=RetryPolicy(3, 0.0))},
                     sleep=(sleeps.append if sleeps is not None else (lambda s: None)), **kw)


def test_router_records_every_call_per_role():
    router = LLMRouter({"task": Echo(), "reflector": Echo(), "toolkit": Echo(), "judge": Broken()})
    assert router.text("task", MSG) == "HELLO THERE"
    router.text("task", MSG)
    with pytest.raises(LLMError, match="boom"):
        router.text("judge", MSG)
    totals = router.totals()
    assert {k: totals["task"][k] for k in ("calls", "prompt_tokens", "completion_tokens", "errors")} == \
        {"calls": 2, "prompt_tokens": 6, "completion_tokens": 4, "errors": 0}
    assert totals["judge"]["errors"] == 1
    assert router.since(1)["calls"] == 2


def test_router_requires_every_role():
    with pytest.raises(ValueError, match="reflector"):
        LLMRouter({"task": Echo(), "toolkit": Echo(), "judge": Echo()})


def test_transient_errors_are_retried_and_every_attempt_is_in_the_ledger():
    sleeps = []
    flaky = Flaky(2, retry_after=4.0)
    router = router_with(flaky, sleeps=sleeps)
    assert router.text("task", MSG) == "ok"
    rec = router.records[-1]
    assert rec.retries == 2 and rec.error is None
    assert [e.split(" (")[0] for e in rec.attempt_errors] == ["HTTP 429", "HTTP 429"]
    assert len(sleeps) == 2 and all(s >= 4.0 for s in sleeps)   # Retry-After is a floor
    assert router.totals()["task"]["api_calls"] == 3


def test_retries_give_up_after_max_with_the_last_error():
    flaky = Flaky(10)
    router = router_with(flaky, policy=RolePolicy(retry=RetryPolicy(max_retries=3, backoff_s=0.0)))
    with pytest.raises(LLMError, match=r"gave up after 4 attempt\(s\).*attempt 4"):
        router.text("task", MSG)
    assert flaky.calls == 4
    rec = router.records[-1]
    assert rec.retries == 3 and len(rec.attempt_errors) == 4 and "gave up" in rec.error


def test_non_transient_errors_are_not_retried():
    broken = Broken()
    router = router_with(broken)
    with pytest.raises(LLMError, match="RuntimeError: boom"):
        router.text("task", MSG)
    assert router.records[-1].retries == 0


def test_backoff_doubles_with_jitter_and_is_capped():
    import random
    pol = RetryPolicy(max_retries=5, backoff_s=1.0, max_delay_s=5.0)
    rng = random.Random(0)
    delays = [retry_delay(pol, n, None, rng) for n in (1, 2, 3)]
    assert 0.5 <= delays[0] <= 1.5 and 1.0 <= delays[1] <= 3.0 and 2.0 <= delays[2] <= 5.0
    assert retry_delay(pol, 1, 100.0, rng) == 5.0          # never longer than max_delay_s
    assert retry_delay(RetryPolicy(backoff_s=0.0), 1, 2.0, rng) >= 2.0


def test_parse_retry_after_forms():
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # in the past
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_concurrency_limit_per_role():
    state = {"now": 0, "peak": 0}
    lock = threading.Lock()

    class Slow:
        name, model = "test", "slow"

        def complete(self, messages):
            with lock:
                state["now"] += 1
                state["peak"] = max(state["peak"], state["now"])
            time.sleep(0.05)
            with lock:
                state["now"] -= 1
            return ChatResponse(text="x", model="slow", backend="test")

    router = router_with(Slow(), policy=RolePolicy(concurrency=3))
    threads = [threading.Thread(target=router.text, args=("task", MSG)) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert state["peak"] == 3


def test_a_reply_at_the_roles_token_limit_is_an_error_for_text_and_flagged_for_call():
    long_reply = " ".join(["word"] * 40)   # the fake server counts ~1 token per 4 characters
    with FakeOpenAIServer(scripted_responder([(long_reply, "length")] * 2)) as srv:
        cfg = RoleConfig(backend="openai", model="m", base_url=srv.base_url, max_tokens=20)
        router = router_with(OpenAIBackend("task", cfg, env={}))
        with pytest.raises(TruncatedCompletionError, match="raise max_tokens"):
            router.text("task", MSG)
        assert router.records[-1].error and router.records[-1].finish_reason == "length"
        assert len(srv.requests) == 1            # hitting the real limit again would not help
        resp = router.call("task", MSG)          # callers that handle it (the reflector) get it flagged
        assert resp.finish_reason == "length" and resp.text == long_reply


def test_a_reply_cut_short_below_the_limit_is_retried_without_the_max_tokens_hint():
    with FakeOpenAIServer(scripted_responder([("cut off rep", "length"), ("whole reply", "stop")])) as srv:
        cfg = RoleConfig(backend="openai", model="m", base_url=srv.base_url, max_tokens=500)
        router = router_with(OpenAIBackend("task", cfg, env={}))
        assert router.text("task", MSG) == "whole reply"
    rec = router.records[-1]
    assert rec.retries == 1 and "cut short" in rec.attempt_errors[0] and "max_tokens" in rec.attempt_errors[0]
    assert "raise max_tokens" not in rec.attempt_errors[0]


def test_openai_backend_against_fake_server_reports_usage():
    with FakeOpenAIServer(scripted_responder(["first reply", "second reply"])) as srv:
        cfg = RoleConfig(backend="openai", model="m-test", base_url=srv.base_url, temperature=0.2, max_tokens=50)
        backend = OpenAIBackend("task", cfg, env={})
        r1 = backend.complete(MSG)
        r2 = backend.complete(MSG)
    assert (r1.text, r2.text) == ("first reply", "second reply")
    assert r1.prompt_tokens > 0 and r1.completion_tokens > 0
    assert srv.requests[0]["model"] == "m-test"
    assert srv.requests[0]["messages"] == MSG
    assert srv.requests[0]["temperature"] == 0.2 and srv.requests[0]["max_tokens"] == 50


def test_reasoning_effort_sends_max_completion_tokens():
    with FakeOpenAIServer(scripted_responder(["ok"])) as srv:
        cfg = RoleConfig(backend="openai", model="o4-mini", base_url=srv.base_url, reasoning_effort="low",
                         max_tokens=900)
        OpenAIBackend("reflector", cfg, env={}).complete(MSG)
    body = srv.requests[0]
    assert body["reasoning_effort"] == "low" and body["max_completion_tokens"] == 900 and "max_tokens" not in body


def test_openai_backend_empty_completion_is_an_error():
    with FakeOpenAIServer(scripted_responder(["   "])) as srv:
        backend = OpenAIBackend("task", RoleConfig(backend="openai", model="m", base_url=srv.base_url), env={})
        with pytest.raises(LLMError, match="empty completion"):
            backend.complete(MSG)


def test_server_error_surfaces_after_retries_through_the_router():
    with FakeOpenAIServer(scripted_responder([])) as srv:  # script exhausted -> HTTP 500
        backend = OpenAIBackend("task", RoleConfig(backend="openai", model="m", base_url=srv.base_url,
                                                   timeout_s=5), env={})
        router = router_with(backend, policy=RolePolicy(retry=RetryPolicy(max_retries=1, backoff_s=0.0)))
        with pytest.raises(LLMError, match="gave up after 2 attempt.*HTTP 500"):
            router.text("task", MSG)
        assert len(srv.requests) == 2  # first try + one retry; the client itself never retries


def test_auth_and_bad_request_fail_fast_with_a_clear_message():
    for status, expect in ((401, "authentication failed -- check the key in \\$MY_KEY"),
                           (400, "request rejected by the server"), (404, "check the model name")):
        def respond(model, messages, status=status):
            raise HTTPErrorReply(status, f"no ({status})")
        with FakeOpenAIServer(respond) as srv:
            backend = OpenAIBackend("task", RoleConfig(backend="openai", model="m", base_url=srv.base_url,
                                                       api_key_env="MY_KEY"), env={"MY_KEY": "k"})
            router = router_with(backend)
            with pytest.raises(LLMError, match=expect):
                router.text("task", MSG)
            assert len(srv.requests) == 1, status      # no retry
            assert router.records[-1].retries == 0 and router.records[-1].error


def test_missing_key_without_base_url_is_a_clear_error():
    with pytest.raises(LLMError, match="MY_KEY"):
        OpenAIBackend("reflector", RoleConfig(backend="openai", model="m", api_key_env="MY_KEY"), env={})


def test_router_from_config_offline_by_default():
    router = LLMRouter.from_config(LLMConfig())
    assert set(router.describe()) == {"task", "reflector", "toolkit", "judge"}
    assert all(v.startswith("offline:") for v in router.describe().values())
    assert router.cache is None            # the offline backend is never cached


def test_call_kind_reads_the_prompt_tag():
    assert call_kind("task", [{"role": "user", "content": "<task>extract_knowledge_item</task>\n..."}]) == \
        "extract_knowledge_item"
    assert call_kind("task", [{"role": "user", "content": "<task>answer</task>"}]) == "answer"
    assert call_kind("reflector", [{"role": "user", "content": "<task>compile_fix</task>"}]) == "compile_fix"
    assert call_kind("reflector", [{"role": "user", "content": "improve this"}]) == "reflect"
    assert call_kind("toolkit", MSG) == "toolkit"

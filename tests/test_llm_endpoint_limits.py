"""Issue 28: the router against an endpoint as it really is -- the real `openai` client and the
project's fake server on loopback. A rate limit slows the run down instead of failing calls; one
cap holds over every role; identical requests in flight are sent once; a quota that is used up
fails at once; a run whose endpoint refuses everything stops, resumable, saying "rate limited"."""
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from failure_helpers import SMALL, endpoint, events, usage
from mstar.cli import main
from mstar.config import LLMConfig, RoleConfig
from mstar.llm.router import LLMRouter
from mstar.llm.types import FatalLLMError
from mstar.run.views import open_run
from mstar.testing.fake_server import FakeOpenAIServer, Faults, HTTPErrorReply, offline_responder
from mstar.testing.rate_limit import RateLimit


def _echo(model, messages):
    return "ok " + str(messages[-1]["content"])[:40]


def _router(srv, *, retries=0, concurrency=64, max_in_flight=64, cache_dir=None, **llm) -> LLMRouter:
    rc = RoleConfig(backend="openai", base_url=srv.base_url, model="m", max_retries=retries, backoff_s=0.01,
                    concurrency=concurrency)
    cfg = LLMConfig(task=rc, reflector=rc, toolkit=rc, judge=rc, cache_dir=cache_dir, max_in_flight=max_in_flight,
                    **llm)
    return LLMRouter.from_config(cfg, env={})


def _ask_all(router, prompts, role="task", threads=32):
    with ThreadPoolExecutor(threads) as ex:
        return list(ex.map(lambda p: router.call(role, [{"role": "user", "content": p}]).text, prompts))


def test_a_rate_limit_slows_the_calls_down_and_none_fails_even_with_no_retries():
    # 1,200 requests a minute with one second of burst; 120 calls from 32 threads at once
    with FakeOpenAIServer(_echo, latency_s=0.05, rate_limit=RateLimit(rpm=1200, burst_s=1.0)) as srv:
        router = _router(srv, retries=0)
        replies = _ask_all(router, [f"q{i}" for i in range(120)])
        stats = srv.stats()
    assert replies == [f"ok q{i}" for i in range(120)]
    assert stats["rate_limited"] > 0                 # the endpoint did say "too many" ...
    recs = router.records
    assert not any(r.error for r in recs)            # ... and no call failed, though none may retry
    assert sum(r.rate_limited for r in recs) == stats["rate_limited"]   # every 429 is in the ledger
    assert all(r.retries == 0 for r in recs)         # a 429 is a wait, not a retry
    st = router.throttling()[0]
    assert st["rate_limited"] == stats["rate_limited"] and st["pace_rpm"] is not None and st["held_s"] > 0
    assert router.report()["total"]["rate_limited"] == stats["rate_limited"]


def test_ratelimit_headers_pace_the_endpoint_before_it_refuses():
    limit = RateLimit(rpm=1200, burst_s=1.0, headers=True)
    with FakeOpenAIServer(_echo, latency_s=0.02, rate_limit=limit) as srv:
        router = _router(srv)
        _ask_all(router, [f"q{i}" for i in range(15)], threads=1)   # within the burst: no 429 yet
        assert srv.stats()["rate_limited"] == 0
        assert router.throttling()[0]["pace_rpm"] == 1200.0       # the pace comes from the headers
        _ask_all(router, [f"r{i}" for i in range(80)])
        stats = srv.stats()
    assert not any(r.error for r in router.records)
    assert stats["rate_limited"] <= 20               # paced from the headers, not found by refusals


def test_one_cap_holds_over_every_role():
    # Each role may send 64 at once, the run 5: four roles asking at the same time never have more out.
    with FakeOpenAIServer(_echo, latency_s=0.05) as srv:
        router = _router(srv, max_in_flight=5)
        prompts = [f"q{i}" for i in range(30)]
        with ThreadPoolExecutor(4) as ex:
            list(ex.map(lambda role: _ask_all(router, [f"{role}{p}" for p in prompts], role=role),
                        ("task", "toolkit", "judge", "reflector")))
        peak = srv.stats()["max_in_flight"]
    assert peak == 5
    assert router.report()["max_in_flight"] == 5


def test_an_identical_request_in_flight_is_sent_once(tmp_path):
    with FakeOpenAIServer(_echo, latency_s=0.3) as srv:
        router = _router(srv, cache_dir=str(tmp_path / "cache"))
        replies = _ask_all(router, ["the same prompt"] * 20 + ["another one"] * 5)
        sent = srv.stats()["requests"]
    assert replies == ["ok the same prompt"] * 20 + ["ok another one"] * 5
    assert sent == 2
    recs = router.records
    assert sum(not r.cache_hit for r in recs) == 2 and sum(r.cache_hit for r in recs) == 23
    assert router.report()["total"]["api_calls"] == 2


def test_a_failed_leader_does_not_fail_the_requests_that_waited_on_it(tmp_path):
    faults = Faults(script=["server_error"])          # the first request fails, the rest are fine
    with FakeOpenAIServer(_echo, latency_s=0.2, faults=faults) as srv:
        router = _router(srv, retries=0, cache_dir=str(tmp_path / "cache"))
        results = []

        def ask():
            try:
                results.append(router.call("task", [{"role": "user", "content": "same"}]).text)
            except Exception as exc:  # noqa: BLE001
                results.append(f"error: {exc}")

        threads = [threading.Thread(target=ask) for _ in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(10)
    assert results.count("ok same") == 5 and sum(r.startswith("error") for r in results) == 1


def test_a_quota_that_is_used_up_fails_at_once_instead_of_waiting():
    def no_credit(model, messages):
        raise HTTPErrorReply(429, "You exceeded your current quota")

    class QuotaServer(FakeOpenAIServer):
        def serve(self, h, n, body, fault, t0):
            return h._send(429, {"error": {"message": "You exceeded your current quota, please check your plan",
                                           "type": "insufficient_quota", "code": "insufficient_quota"}})

    with QuotaServer(no_credit) as srv:
        router = _router(srv, retries=3)
        with pytest.raises(FatalLLMError, match="quota is used up"):
            router.call("task", [{"role": "user", "content": "hi"}])
        assert srv.stats()["requests"] == 1


@pytest.mark.parametrize("flags,message", [
    (["--max-in-flight", "0"], "--max-in-flight 0: give 1 or more"),
    (["--rpm", "-5"], "--rpm -5.0: give a number of requests per minute above 0"),
    (["--tpm", "0"], "--tpm 0.0: give a number of tokens per minute above 0"),
    (["--rate-limit-patience", "0"], "--rate-limit-patience 0.0: give a number of seconds above 0"),
    (["--llm", "task.rpm=-1"], "rpm = -1: must be a positive number per minute"),
])
def test_bad_pacing_flags_are_one_line_and_exit_2(tmp_path, capsys, flags, message):
    rc = main(["evolve", *SMALL, "--out", str(tmp_path / "run"), *flags])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_run_behind_a_rate_limit_finishes_with_no_failed_call(tmp_path, capsys):
    limit = RateLimit(rpm=3000, burst_s=1.0)
    with FakeOpenAIServer(offline_responder(), latency_s=0.02, rate_limit=limit) as srv:
        run = tmp_path / "run"
        rc = main(["evolve", *SMALL, "--iterations", "1", "--out", str(run),
                   *endpoint(srv.base_url, None, retries=0, concurrency=64)])
        stats = srv.stats()
    out = capsys.readouterr().out
    assert rc == 0 and stats["rate_limited"] > 0
    recs = usage(run)
    assert not any(r["error"] for r in recs)
    assert sum(r["rate_limited"] for r in recs) == stats["rate_limited"]
    assert "a 429 paces every caller of its endpoint together" in out
    assert f"{stats['rate_limited']} answered 429 (waited, not failed)" in out
    summary = json.loads((run / "summary.json").read_text())
    assert summary["llm"]["endpoints"][0]["rate_limited"] == stats["rate_limited"]


def test_an_endpoint_that_refuses_everything_stops_the_run_resumably_as_rate_limited(tmp_path, capsys):
    # The first 9 requests (the connection check's among them) are served; then only 429s. The
    # seed needs 14 (6 formulations, 6 answers, its 2 write examples' extractions): none is scored.
    faults = Faults(rate=1.0, kinds=("rate_limit",), script=[None] * 9, retry_after_s=0.2)
    with FakeOpenAIServer(offline_responder(), faults=faults) as srv:
        run = tmp_path / "run"
        rc = main(["evolve", *SMALL, "--iterations", "1", "--out", str(run), "--rate-limit-patience", "1.5",
                   *endpoint(srv.base_url, None, retries=0)])
    out, err = capsys.readouterr()
    assert rc == 3 and "Traceback" not in out + err
    view = open_run(run)
    assert view.status == "stopped" and view.stop.kind == "endpoint"
    assert "rate limited" in view.stop.reason and "answered 429" in view.stop.reason
    assert [e["event"] for e in events(run)] == ["stopped"]          # nothing was scored
    assert f"resume  mstar resume {run}" in out


def test_the_fake_servers_limit_can_refuse_without_retry_after():
    # Issue 41: some endpoints send 429 with no Retry-After (bench/bench_ratelimit.py --no-retry-after).
    from mstar.testing.rate_limit import Limiter
    for retry_after in (True, False):
        limiter = Limiter(RateLimit(rpm=60, burst_s=1.0, retry_after=retry_after), clock=lambda: 0.0)
        assert limiter.admit(10)[0] is None
        wait, headers, which = limiter.admit(10)
        assert wait == pytest.approx(1.0) and which == "requests"
        assert ("Retry-After" in headers) is retry_after

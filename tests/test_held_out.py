"""Tests started before the run's end (mstar/final/held_out.py) and the background work they run as
(mstar/llm/scope.py: Background): background calls hold at most half the cap, a cancelled piece
of work sends nothing more, a promoted one goes as any other; in a run, the best seed's test runs
during the iterations and gives the result it gives at the end."""
from __future__ import annotations

import contextlib
import threading
import time
from types import SimpleNamespace

import pytest
from failure_helpers import endpoint, events, usage
from gate_helpers import Gate, OneByOne, wait_until

from mstar.cli import main
from mstar.final.held_out import HeldOutTests
from mstar.llm import scope as llm_scope
from mstar.llm.cache import ResponseCache
from mstar.llm.router import LLMRouter, RolePolicy
from mstar.llm.slots import IDLE, LAST
from mstar.llm.types import CallCancelled, ChatResponse
from mstar.pool import PoolEntry
from mstar.testing.fake_server import FakeOpenAIServer, offline_responder

ROLES = ("task", "reflector", "toolkit", "judge")


def _ask(router, text, work=None, errors=None):
    def run():
        try:
            if work is None:
                router.call("task", [{"role": "user", "content": text}])
            else:
                with llm_scope.background(work):
                    router.call("task", [{"role": "user", "content": text}])
        except CallCancelled as exc:
            errors.append(str(exc))
    t = threading.Thread(target=run)
    t.start()
    return t


def test_background_calls_hold_half_the_cap_a_guess_goes_before_a_test_and_the_run_s_own_calls_go_past_them():
    gate = OneByOne()
    router = LLMRouter({r: gate for r in ROLES}, max_in_flight=8)
    threads = [_ask(router, f"test{i}", llm_scope.Background(IDLE)) for i in range(6)]
    # A test started early takes the whole background half (4 of 8), not a quarter of it: the
    # iterations leave it free most of the time.
    wait_until(lambda: len(gate.asked) == 4 and router.background.any.waiting() == 2)
    threads += [_ask(router, f"guess{i}", llm_scope.Background(LAST)) for i in range(2)]
    wait_until(lambda: router.background.any.waiting() == 4)
    threads.append(_ask(router, "needed now"))
    wait_until(lambda: "needed now" in gate.asked)      # sent while eight background calls are out or waiting
    time.sleep(0.05)
    assert len(gate.asked) == 5
    # Each background slot freed goes to a guess first, though the test's calls asked before them.
    gate.let_one(6)
    gate.let_one(7)
    assert gate.asked[5:] == ["guess0", "guess1"]
    gate.let_all(threads)
    assert sorted(gate.asked[7:]) == ["test4", "test5"]


def test_beside_the_race_the_tests_take_the_whole_cap_and_the_race_s_calls_still_go_first():
    gate = OneByOne()
    router = LLMRouter({r: gate for r in ROLES}, max_in_flight=8)
    threads = [_ask(router, f"test{i}", llm_scope.Background(IDLE)) for i in range(10)]
    wait_until(lambda: len(gate.asked) == 4 and router.background.any.waiting() == 6)   # during the iterations: half
    held = HeldOutTests(SimpleNamespace(), early=True)
    held.beside_the_race([], share=router.background)
    # The calls already waiting for the background's half go at once: the race leaves the rest free.
    wait_until(lambda: len(gate.asked) == 8)
    time.sleep(0.05)
    assert len(gate.asked) == 8 and router.background.any.waiting() == 2
    threads.append(_ask(router, "race batch"))
    wait_until(lambda: router._cap.waiting() == 1)
    gate.turns.release()                                  # one test call ends: its slot goes to the race
    wait_until(lambda: "race batch" in gate.asked)
    assert gate.asked[8] == "race batch"
    gate.let_all(threads)
    assert sorted(gate.asked[9:]) == ["test8", "test9"]
    held.close()


def test_cancelled_work_sends_nothing_more_and_records_nothing():
    gate = Gate()
    router = LLMRouter({r: gate for r in ROLES}, max_in_flight=2)      # background share: 1
    work, errors = llm_scope.Background(IDLE), []
    threads = [_ask(router, f"bg{i}", work, errors) for i in range(3)]
    wait_until(lambda: gate.asked == ["bg0"] and router.background.any.waiting() == 2)
    work.cancel()
    gate.open.set()
    for t in threads:
        t.join(10)
    assert gate.asked == ["bg0"]                          # the one already out finished; nothing else went
    assert len(errors) == 2 and all("cancelled" in e for e in errors)
    with llm_scope.background(work), pytest.raises(CallCancelled):
        router.call("task", [{"role": "user", "content": "later"}])
    assert [r.kind for r in router.ledger.snapshot()] == [router.ledger.snapshot()[0].kind]   # one record: bg0's


def test_promoted_work_goes_as_any_other():
    gate = Gate()
    router = LLMRouter({r: gate for r in ROLES}, max_in_flight=2)
    work = llm_scope.Background(IDLE)
    work.promote()
    with llm_scope.background(work):
        assert llm_scope.background_priority() is None and not llm_scope.in_background()
    threads = [_ask(router, f"p{i}", work) for i in range(2)]
    wait_until(lambda: len(gate.asked) == 2)             # both out: the background share (1) no longer applies
    gate.open.set()
    for t in threads:
        t.join(10)


def test_a_call_the_run_waits_on_takes_over_an_identical_background_request_not_yet_sent(tmp_path):
    """A test started early asks the formulations an iteration asks too: the iteration's own call
    is sent at once instead of waiting behind the background queue, and the background caller then
    takes its reply: one request."""
    gate = Gate()
    router = LLMRouter({r: gate for r in ROLES}, max_in_flight=2, cache=ResponseCache(tmp_path / "c"),
                       policies={"task": RolePolicy(cache="reuse")})
    first, queued = llm_scope.Background(IDLE), llm_scope.Background(IDLE)
    replies = []

    def ask(text, work):
        with (llm_scope.background(work) if work else contextlib.nullcontext()):
            replies.append((text, router.call("task", [{"role": "user", "content": text}]).cache_hit))
    threads = [threading.Thread(target=ask, args=("busy", first))]
    threads[0].start()
    wait_until(lambda: gate.asked == ["busy"])
    threads.append(threading.Thread(target=ask, args=("same", queued)))
    threads[1].start()
    wait_until(lambda: router.background.any.waiting() == 1)      # queued behind "busy" (share: 1)
    threads.append(threading.Thread(target=ask, args=("same", None)))
    threads[2].start()
    wait_until(lambda: gate.asked == ["busy", "same"])         # sent now, while the background one waits
    gate.open.set()
    for t in threads:
        t.join(10)
    assert gate.asked == ["busy", "same"]                       # the background caller sent nothing
    assert sorted(replies) == [("busy", False), ("same", False), ("same", True)]


class _CallingExecutor:
    """An executor whose evaluation is `calls` requests in a row; it notes each call's priority."""

    def __init__(self, router, calls=200):
        self.router, self.calls, self.priorities, self.sent = router, calls, [], 0

    def run(self, job):
        for i in range(self.calls):
            self.priorities.append(llm_scope.background_priority())
            self.router.call("task", [{"role": "user", "content": f"{job.source} {i}"}])
            self.sent += 1
        return SimpleNamespace(mean_score=1.0)


class _Slow:
    name, model = "test", "slow"

    def complete(self, messages):
        time.sleep(0.01)
        return ChatResponse(text="ok", model="slow", backend="test")


def test_a_test_no_longer_needed_stops_and_a_needed_one_is_promoted():
    router = LLMRouter({r: _Slow() for r in ROLES})
    ex = _CallingExecutor(router)
    held = HeldOutTests(ex, early=True)
    wrong, right = PoolEntry("static_best", None, 0, "# a", 0.5), PoolEntry("seed", None, 0, "# b", 0.4)
    assert held.start(wrong, background=True) and held.start_early(right) and not held.start(right)
    wait_until(lambda: ex.sent >= 10)
    held.cancel("static_best")                 # the race confirmed another program
    res = held.results([right])                # the run now waits on this one
    assert set(res) == {"seed"} and res["seed"].mean_score == 1.0
    t0 = time.monotonic()
    held.close()
    assert time.monotonic() - t0 < 2
    # The cancelled test stopped within a call or two; the needed one ran to its end, promoted.
    assert ex.sent < 2 * 200 - 50, ex.sent
    assert IDLE in ex.priorities and ex.priorities[-1] is None
    assert not HeldOutTests(ex, early=False).start_early(right)


RUN = ["evolve", "--task", "sample", "--size", "0.3", "--static-size", "6", "--iterations", "4", "--seed", "3",
       "--quiet"]


def _run(tmp_path, name: str, *extra: str):
    with FakeOpenAIServer(offline_responder(), latency_s=0.1) as srv:
        run = tmp_path / name
        assert main([*RUN, "--out", str(run), *extra,
                     *endpoint(srv.base_url, tmp_path / f"cache-{name}", concurrency=64)]) == 0
        return run


def _test_before_last_iteration(run) -> bool:
    scopes = [r["scope"] for r in usage(run)]
    last_iteration = max(i for i, s in enumerate(scopes) if (s or "").startswith("iter_"))
    return "test" in scopes[:last_iteration]


def test_the_best_seed_is_tested_during_the_iterations_with_the_result_it_has_at_the_end(tmp_path):
    early = _run(tmp_path, "early")
    # A spend cap: nothing is tested before the run's end (a capped run must spend on its iterations).
    late = _run(tmp_path, "late", "--max-tokens", "1000000000")
    assert _test_before_last_iteration(early) and not _test_before_last_iteration(late)
    test = lambda run: next(e for e in events(run) if e["event"] == "test")   # noqa: E731
    a, b = test(early), test(late)
    assert (a["program_id"], a["test_score"], a["best_seed_id"], a["best_seed_test_score"]) == \
        (b["program_id"], b["test_score"], b["best_seed_id"], b["best_seed_test_score"])


def test_tests_start_early_only_with_the_cache_in_this_process_and_no_spend_cap(tmp_path):
    from mstar.final.held_out import may_start_early
    from mstar.llm.budget import Budget
    task = SimpleNamespace(test=[object()])
    reuse = {r: RolePolicy(cache="reuse") for r in ("task", "toolkit")}
    router = LLMRouter({r: Gate() for r in ROLES}, cache=ResponseCache(tmp_path / "c"), policies=reuse)
    local, ray = SimpleNamespace(in_process=True), SimpleNamespace()
    assert may_start_early(None, task, router, local)
    assert not may_start_early(None, task, router, ray)                  # a Ray worker's calls: out of reach
    assert not may_start_early(None, SimpleNamespace(test=[]), router, local)
    assert not may_start_early(None, task, LLMRouter({r: Gate() for r in ROLES}), local)   # no cache
    router.ledger.budget = Budget(max_tokens=10 ** 9)
    assert not may_start_early(None, task, router, local)                # a spend cap

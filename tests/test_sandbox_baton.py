"""Concurrent reads take turns on the CPU between their waits (sandbox/worker/baton.py).

The Baton's rules on their own, then a real worker: reads that compute and then wait on a
toolkit LLM call come back one by one, not all together at the end.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from test_sandbox_host import kb
from sandbox.engine.session import ProgramSession
from sandbox.worker import baton as baton_mod
from sandbox.worker.baton import RESUMING, STARTING, Baton


def _hold_in_thread(b: Baton, release: threading.Event) -> threading.Thread:
    took = threading.Event()

    def run():
        assert b.take()
        took.set()
        release.wait(5)
        b.give()
    t = threading.Thread(target=run)
    t.start()
    assert took.wait(5)
    return t


def test_a_read_back_from_its_wait_goes_before_reads_that_have_not_started():
    b, release, order = Baton(), threading.Event(), []
    holder = _hold_in_thread(b, release)

    def waiter(name, rank):
        assert b.take(rank)
        order.append(name)
        b.give()
    threads = []
    for name, rank in (("start-1", STARTING), ("start-2", STARTING), ("resume-1", RESUMING), ("start-3", STARTING)):
        threads.append(threading.Thread(target=waiter, args=(name, rank)))
        threads[-1].start()
        time.sleep(0.02)   # queue in this order
    release.set()
    for t in [holder, *threads]:
        t.join(5)
    assert order == ["resume-1", "start-1", "start-2", "start-3"]


def test_a_thread_that_never_gets_its_turn_runs_after_the_patience_and_the_holder_keeps_the_baton(monkeypatch):
    monkeypatch.setattr(baton_mod, "PATIENCE_S", 0.05)
    b, release = Baton(), threading.Event()
    holder = _hold_in_thread(b, release)
    t0 = time.monotonic()
    assert b.take() is False            # waited, then went on without it
    waited = time.monotonic() - t0
    assert 0.04 <= waited < 1.0
    assert b.give() is False            # a thread without the baton hands nothing on
    release.set()
    holder.join(5)
    assert b.take() is True and b.take() is True   # free again; taking twice is a no-op
    assert b.give() is True and b.give() is False


PROGRAM = kb('''    def __init__(self, toolkit):
        self.toolkit = toolkit

    def write(self, item, raw_text):
        pass

    def read(self, query):
        score = 0
        for i in range(80000):       # a few ms of scoring, then one toolkit call
            score += i % 7
        reply = self.toolkit.llm_completion([{"role": "user", "content": query.text}])
        return reply + " " + str(score)
''')


def test_reads_that_compute_then_wait_come_back_one_by_one():
    def llm(messages):
        return "summary"
    with ProgramSession(PROGRAM, llm=llm) as s:
        s.start()
        s.read({"text": "warm-up"})
        spreads = []
        for _ in range(3):
            t0, ends = time.perf_counter(), []

            def one(i):
                out = s.read({"text": f"q{i}"}).output
                ends.append(time.perf_counter() - t0)
                return out
            with ThreadPoolExecutor(24) as pool:
                outs = list(pool.map(one, range(24)))
            assert all(o.startswith("summary ") for o in outs)
            ends.sort()
            spreads.append(ends[len(ends) // 2] / ends[-1])
    # One by one, the median read is back about half-way; all together at the end, it is back
    # with the last (measured without the baton: 0.95-0.99).
    assert min(spreads) < 0.8, spreads

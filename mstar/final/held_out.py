"""The run's held-out test evaluations: each started once, some before the run's end (issue 28).

The paper tests the champion at the end, and mstar tests the best seed beside it. At a real
endpoint that end is a phase of its own: on the 30-session LoCoMo workload at 2,000 ms the two
tests were ~420 requests through 64 calls in flight, 14 s, after every iteration. Yet one of them
is known much earlier, and the iterations leave most of the calls in flight unused (each is two to
four replies in a row):

- The best seed is known once the seeds are scored, and it is tested whatever the run does
  next. Its test starts then, in the background at the lowest priority (slots.IDLE: behind the
  iterations' calls and the prefetch's guesses, within the background's half of the calls in
  flight: slots.BackgroundShare).
- When the champion is chosen, the program the race starts from (its leader on the evidence
  before it buys anything, mstar/final/race_entry.py; with `--pick static` the best static
  score) is most often the one it confirms. Its test starts with the race, in the
  background (slots.LAST: only the race's calls go first); if the race confirms another, it is
  cancelled: its calls not yet sent fail at once (llm.scope.Background.cancel), so a wrong start
  costs what it sent while the race ran.
- A test the run waits on is promoted: its remaining calls go as any other.

Started early only where it pays and cannot cost a budget: the task's replies come from an
endpoint with the response cache on (the offline backend spends no time waiting), evaluations run
in this process (not on a Ray cluster), and no spend cap is set (a test started early would spend
what a capped run needs for its iterations, and a run stopped by its cap is never tested).
Elsewhere every test starts when the run ends, as before.
A test's result does not depend on when it ran: the same requests, the same replies.
"""
from __future__ import annotations

import contextlib
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from mstar.evaluation import EvalResult
from mstar.execution import EvalJob
from mstar.llm import scope as llm_scope
from mstar.llm.slots import IDLE, LAST, BackgroundShare
from mstar.pool import PoolEntry

SCOPE = "test"      # the ledger's scope of every test evaluation's calls


def held_out_job(entry: PoolEntry, read_kept: bool = False) -> EvalJob:
    """One program's test: every test question, after writing every episode of the task (test
    questions need not be covered by the episodes chosen for validation). `read_kept`: when those
    are the training episodes, it may read the knowledge base the program's validation kept -- not
    for a test started early: a child whose read() runs in its parent's worker needs the worker to
    itself the first time (mstar/evaluation/sessions.py, fit), and a test beside the iterations
    would hold its lease through most of them."""
    return EvalJob(entry.source, "test", None, all_episodes=True, keep=False, read_kept=read_kept)


def may_start_early(cfg, task, router, executor) -> bool:
    """Whether tests may start before the run's end (see the module docstring)."""
    cached = router.cache is not None and all(router.policy(r).cache == "reuse" for r in ("task", "toolkit"))
    budget = getattr(getattr(router, "ledger", None), "budget", None)
    # On a Ray cluster an evaluation's calls are made in its worker, where this process's
    # background priority and cancellation do not reach: a test there would compete as an equal.
    return bool(task.test) and cached and getattr(executor, "in_process", False) \
        and not (budget is not None and budget.active)


class HeldOutTests:
    """`start` a program's test (once), `results` waits for tests, `cancel` drops one; `close` at the end."""

    def __init__(self, executor, *, early: bool) -> None:
        self.executor, self.early = executor, early
        self._pool = ThreadPoolExecutor(4, thread_name_prefix="test")
        self._runs: dict[str, tuple[Future, llm_scope.Background | None]] = {}
        self._lock = threading.Lock()

    def start_early(self, entry: PoolEntry | None) -> bool:
        """Start `entry`'s test now, in the background, if this run starts tests early."""
        return self.early and entry is not None and self.start(entry, background=True, read_kept=False)

    def start(self, entry: PoolEntry, *, background: bool = False, read_kept: bool = True) -> bool:
        """Start `entry`'s test unless it is running already; True when this call started it."""
        with self._lock:
            if entry.program_id in self._runs:
                return False
            work = llm_scope.Background(IDLE) if background else None
            with llm_scope.scoped(SCOPE), (llm_scope.background(work) if work else contextlib.nullcontext()):
                future = llm_scope.submit(self._pool, self.executor.run, held_out_job(entry, read_kept))
            self._runs[entry.program_id] = (future, work)
            return True

    def beside_the_race(self, entries: list[PoolEntry], share: BackgroundShare) -> None:
        """The iterations are over: `entries`' tests start (where not yet), and every test running
        in the background goes at LAST from now, before nothing but the race's own calls (no guess
        at a next iteration needs the slots any more). The router's `share` is widened: the tests may
        take any slot the race leaves free, not only the background's half: the race asks a batch
        of a few dozen calls at a time, so the other half stood idle while the tests queued
        (bench/bench_lead.py at 2,000 ms: 0.9-3.3 s off a run whose final phase waits on a test,
        docs/guesses.md)."""
        share.widen()
        for e in entries:
            self.start(e, background=True)
        with self._lock:
            for _, work in self._runs.values():
                if work is not None:
                    work.priority = LAST

    def started(self) -> list[str]:
        with self._lock:
            return list(self._runs)

    def results(self, entries: list[PoolEntry]) -> dict[str, EvalResult]:
        """The tests of `entries` (started now where they were not before), by program id, once
        all are done; the run waits on them, so their remaining calls go as any other's."""
        for e in entries:
            self.start(e)
        with self._lock:
            runs = {e.program_id: self._runs[e.program_id] for e in entries}
        for _, work in runs.values():
            if work is not None:
                work.promote()
        return {pid: future.result() for pid, (future, _) in runs.items()}

    def cancel(self, program_id: str) -> None:
        """The run needs this test no more: what it has not sent is not sent."""
        with self._lock:
            future, work = self._runs.pop(program_id, (None, None))
        if future is not None and not future.cancel() and work is not None:
            work.cancel()

    def close(self) -> None:
        """Cancel what no one took, and wait: no call outlives the run."""
        with self._lock:
            running = [pid for pid, (future, _) in self._runs.items() if not future.done()]
        for pid in running:
            self.cancel(pid)
        self._pool.shutdown(wait=True, cancel_futures=True)


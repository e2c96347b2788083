"""The next iteration's rotating evaluation, run ahead while this iteration works.

An iteration of the paper's loop (`--rotating fresh`) begins by scoring its parent on a new
rotating batch: for each question the task agent formulates a query, the program reads (a read
may ask the toolkit LLM), the agent answers -- two or three requests one after another before
the reflector can be asked. The batch depends only on the seed and the iteration number
(Split.batch, mstar/split/make.py). The parent is not known: it is drawn from the pool this
iteration's child may still join. So the draw is made ahead, with the next iteration's own
generator (a new instance: the real draw is not disturbed), under the outcomes that decide it:
the child does not join (its gates or evaluation fail, or it answers as its parent did), it joins
at its parent's score, it joins as the best.

- The programs so drawn that are in the pool already are evaluated on the next batch as soon as
  this iteration has drawn its own parent: beside its rotating evaluation, the reflector and the
  child's evaluation, three or more replies in a row, in the background (mstar/llm/scope.py: its
  calls wait behind the iteration's own for the endpoint's slots).
- When the draw may pick the child itself, the child is evaluated on the next batch once it is
  proposed, beside its own static evaluation (the extraction prompts are the same requests:
  single flight sends them once).
- The next iteration waits for the guess of its parent, if one was made, then evaluates as
  always: every request is answered by the response cache and the reads are the same, so the
  result is the one it would have had; its chain is shorter by every reply the guess got back.

A wrong guess costs the batch's requests (5 questions) for nothing. A program whose read() may
change its own knowledge base (mstar/evaluation/read_state.py) is never evaluated ahead (its next
evaluation would see the changes); only its query formulations are asked.

Only where it pays and cannot change a lineage: the task agent's and the toolkit's replies are
cached ("reuse": the offline backend has none), iterations run one at a time (`--parallel 1`:
with more, the pool the next iteration sees is not this one plus this child), and evaluations run
in this process (a kept knowledge base serves the next evaluation; the programs' loaded constants
are in LOAD_INFO). Against a deterministic endpoint (the fake server) the run's lineage is the one
it makes with `--no-prefetch` (tests/test_rotating_prefetch.py); against a sampling one each reply
is one sample either way.

Measured on the 30-session LoCoMo workload at 2,000 ms (bench/bench_confirm.py): see
docs/confirmation.md.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for
from dataclasses import replace

from mstar.agent import formulation_messages
from mstar.evaluation.read_state import read_changes_state
from mstar.evaluation.sessions import LOAD_INFO
from mstar.execution import EvalJob
from mstar.llm import scope as llm_scope
from mstar.llm.slots import LAST
from mstar.pool import PoolEntry

# The ledger's scope of these requests: the run's spend counts them, no iteration's does (a guess
# for iteration n is made during n - 1 and may be for nothing), so what the guesses cost is one line.
SCOPE = llm_scope.PREFETCH
GAIN = 0.05            # "joins as the best": this far above the pool's best static score
OUTCOMES = 3           # the draws made ahead: at most this many programs per iteration, and the child


def next_parents(select, seen: list[PoolEntry], parent: PoolEntry, child: PoolEntry, rng_for) -> list[PoolEntry]:
    """The programs the next iteration's draw picks under the outcomes that decide it most often,
    without repeats. `select(candidates, rng)`: the run's parent selection; `rng_for()`: a new
    instance of the next iteration's generator; `child`: the child being evaluated (its score is
    replaced by each outcome's)."""
    base = [e for e in seen if not e.no_change] or list(seen)   # as the loop filters them
    best = max(e.static_score for e in seen)
    outcomes = [base, base + [replace(child, static_score=parent.static_score)],
                base + [replace(child, static_score=best + GAIN)]]
    picked: dict[str, PoolEntry] = {}
    for candidates in outcomes:
        entry = select(candidates, rng_for())
        picked.setdefault(entry.program_id, entry)
    return list(picked.values())


class RotatingPrefetch:
    """Runs the next iteration's rotating evaluation ahead for its likely parents (see above)."""

    def __init__(self, router, task, split, cfg, executor) -> None:
        self.router, self.task, self.split, self.ev, self.executor = router, task, split, cfg.evolution, executor
        self._calls = ThreadPoolExecutor(max(1, self.ev.rotating_size), thread_name_prefix="prefetch")
        self._evals = ThreadPoolExecutor(OUTCOMES + 1, thread_name_prefix="prefetch-eval")
        # (iteration, program text) -> its evaluation and the handle that promotes it (None: formulations only)
        self._ahead: dict[tuple[int, str], tuple[Future, llm_scope.Background] | None] = {}
        self._lock = threading.Lock()

    @classmethod
    def for_run(cls, cfg, task, split, router, executor) -> "RotatingPrefetch | NoPrefetch":
        """A prefetcher when it can pay and cannot change the lineage, else one that does nothing."""
        ev = cfg.evolution
        cached = router.cache is not None and all(router.policy(r).cache == "reuse" for r in ("task", "toolkit"))
        if not (ev.prefetch and ev.rotating == "fresh" and ev.parallel == 1 and cached
                and getattr(executor, "in_process", False) and ev.rotating_size > 0 and ev.iterations >= 1):
            return NoPrefetch()
        return cls(router, task, split, cfg, executor)

    def ahead(self, iteration: int, seen: list[PoolEntry], parent: PoolEntry, select, rng_for) -> int:
        """Called once iteration `iteration` has drawn `parent` from `seen`: evaluates iteration + 1's
        batch for the programs of the pool its draw would pick. `select(candidates, rng)`: the run's
        parent selection; `rng_for()`: a new instance of the next iteration's generator."""
        if iteration >= self.ev.iterations:
            return 0
        child = self._child(iteration, parent, "")
        picks = [e for e in next_parents(select, seen, parent, child, rng_for) if e.program_id != child.program_id]
        return sum(self._launch(iteration + 1, e.source, take_prestart=True) for e in picks)

    def ask_next(self, iteration: int, seen: list[PoolEntry], parent: PoolEntry, child_source: str,
                 select, rng_for) -> int:
        """Called once iteration `iteration`'s child (`child_source`) is proposed and before it is
        evaluated: when the next draw may pick the child, its next batch is evaluated too (the
        worker started for its static evaluation is left to that one)."""
        if iteration >= self.ev.iterations:
            return 0
        child = self._child(iteration, parent, child_source)
        return sum(self._launch(iteration + 1, e.source, take_prestart=e.program_id != child.program_id)
                   for e in next_parents(select, seen, parent, child, rng_for))

    def settle(self, iteration: int, source: str) -> float | None:
        """Before iteration `iteration` evaluates its parent (`source`) on its batch: waits for the
        guess that evaluated it ahead, if one did, and drops the guesses not started. The seconds
        waited, or None when the parent was not guessed."""
        with self._lock:
            mine = self._ahead.pop((iteration, source), None)
            for key in [k for k in self._ahead if k[0] <= iteration]:
                other = self._ahead.pop(key)
                if other is not None:
                    other[0].cancel()    # a wrong guess not yet started; one running finishes on its own
        if mine is None:
            return None
        future, work = mine
        work.promote()   # the iteration waits on it now: its calls left go as the iteration's own
        t0 = time.perf_counter()
        wait_for([future])
        return time.perf_counter() - t0

    def ask(self, iteration: int, sources: list[str]) -> int:
        """Ask iteration `iteration`'s rotating formulations for each program text in `sources`
        (those whose loaded constants are known); returns the number of distinct prompts asked."""
        prompts: dict[str, list[dict]] = {}
        for source in sources:
            info = LOAD_INFO.get(source)
            if info is None:
                continue
            for messages in formulation_messages(info, self._queries(iteration)):
                prompts.setdefault(repr(messages), messages)
        with llm_scope.scoped(SCOPE), llm_scope.background():
            for messages in prompts.values():
                llm_scope.submit(self._calls, self._one, messages)
        return len(prompts)

    def close(self) -> None:
        """Drop what has not started; wait for what has (no call outlives the run)."""
        self._evals.shutdown(wait=True, cancel_futures=True)
        self._calls.shutdown(wait=True, cancel_futures=True)

    def _launch(self, iteration: int, source: str, *, take_prestart: bool) -> int:
        with self._lock:
            if (iteration, source) in self._ahead:
                return 0
            # A read that changes its knowledge base would leave the next evaluation another one.
            formulations_only = read_changes_state(source)
            if formulations_only:
                self._ahead[(iteration, source)] = None
            else:
                job = EvalJob(source, "validation", tuple(self._batch(iteration)), take_prestart=take_prestart)
                work = llm_scope.Background()
                with llm_scope.scoped(SCOPE), llm_scope.background(work):
                    self._ahead[(iteration, source)] = (llm_scope.submit(self._evals, self._evaluate, job), work)
        return int(self.ask(iteration, [source]) > 0) if formulations_only else 1

    def _evaluate(self, job: EvalJob) -> None:
        try:
            self.executor.run(job)
        except Exception:  # noqa: BLE001 -- a failed guess is no evaluation's error: the evaluation runs again
            pass

    def _one(self, messages: list[dict]) -> None:
        try:
            self.router.call("task", messages, allow_truncated=False, priority=LAST)
        except Exception:  # noqa: BLE001 -- as above: the evaluation asks again
            pass

    def _batch(self, iteration: int) -> list[int]:
        return self.split.batch(self.ev.rotating_size, iteration, self.ev.seed)

    def _queries(self, iteration: int) -> list:
        return [self.task.validation[i] for i in self._batch(iteration)]

    @staticmethod
    def _child(iteration: int, parent: PoolEntry, source: str) -> PoolEntry:
        return PoolEntry(f"iter_{iteration:03d}", parent.program_id, iteration, source, parent.static_score)


class NoPrefetch:
    """What a run without the prefetch calls (the offline backend, --parallel > 1, Ray, ...)."""

    def ahead(self, *args) -> int:
        return 0

    def ask_next(self, *args) -> int:
        return 0

    def settle(self, *args) -> None:
        return None

    def close(self) -> None:
        pass

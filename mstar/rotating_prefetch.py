"""The next iteration's query formulations, asked while this iteration's child is evaluated.

An iteration of the paper's loop (`--rotating fresh`) begins by scoring its parent on a new
rotating batch: for each question the task agent formulates a query, the program reads, the agent
answers -- two or three requests one after another before the reflector can be asked. Two of the
three inputs of the first request are known before the iteration begins: the batch depends only
on the seed and the iteration number (Split.batch, mstar/split/make.py), and a formulation prompt only on
the question and the parent's INSTRUCTION_QUERY and query schema. The parent is not known: it is
drawn from the pool the current child may still join. So the draw is made ahead, with the next
iteration's own generator (a new instance: the real draw is not disturbed), under the outcomes
that decide it: the child does not join (its gates or evaluation fail, or it answers as its parent
did), it joins at its parent's score, it joins as the best. The formulations of each program so
drawn are asked now, at the lowest priority (they never delay the child's own calls), and land in
the response cache. When the next parent is among them, its rotating evaluation finds its
formulations answered and is one latency shorter; when it is not, the requests were spent for
nothing -- at most the batch's size (5) of short prompts per distinct instruction drawn, and
programs that share their instruction and schema share the requests.

Only where it pays and cannot change a lineage: the task agent's replies are cached ("reuse": the
offline backend has none), iterations run one at a time (`--parallel 1`: with more, the pool the
next iteration sees is not this one plus this child), and evaluations run in this process (the
programs' loaded constants are in LOAD_INFO). The evaluation would have asked the same prompt and
cached its reply: against a deterministic endpoint (the fake server) the run's lineage is the one
it makes with `--no-prefetch` (tests/test_rotating_prefetch.py); against a sampling one the
formulation is one sample either way.

Measured on the 30-session LoCoMo workload at 2,000 ms (bench/bench_confirm.py): every guess of
iterations 2-5 was right, each iteration was 2.0 s shorter, the whole run 79.1 s -> 71.1 s, with
the same 891 requests (the guessed prompts were the ones the next parent asked).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from mstar.agent import formulation_messages
from mstar.evaluation.sessions import LOAD_INFO
from mstar.llm import scope as llm_scope
from mstar.llm.slots import LAST
from mstar.pool import PoolEntry

# The ledger's scope of these requests: the run's spend counts them, no iteration's does (a guess
# for iteration n is made during n - 1 and may be for nothing), so what the guesses cost is one line.
SCOPE = llm_scope.PREFETCH
GAIN = 0.05            # "joins as the best": this far above the pool's best static score


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
    """Asks the next rotating batch's formulations for the likely next parents (see above)."""

    def __init__(self, router, task, split, cfg) -> None:
        self.router, self.task, self.split, self.ev = router, task, split, cfg.evolution
        self._pool = ThreadPoolExecutor(max(1, self.ev.rotating_size), thread_name_prefix="prefetch")

    @classmethod
    def for_run(cls, cfg, task, split, router, executor) -> "RotatingPrefetch | NoPrefetch":
        """A prefetcher when it can pay and cannot change the lineage, else one that does nothing."""
        ev = cfg.evolution
        cached = router.cache is not None and router.policy("task").cache == "reuse"
        if not (ev.prefetch and ev.rotating == "fresh" and ev.parallel == 1 and cached
                and getattr(executor, "in_process", False) and ev.rotating_size > 0 and ev.iterations >= 1):
            return NoPrefetch()
        return cls(router, task, split, cfg)

    def ask_next(self, iteration: int, seen: list[PoolEntry], parent: PoolEntry, child_source: str,
                 select, rng_for) -> int:
        """Called once iteration `iteration`'s child (`child_source`) is proposed and before it is
        evaluated: asks iteration + 1's formulations for its likely parents (none after the last)."""
        if iteration >= self.ev.iterations:
            return 0
        child = PoolEntry(f"iter_{iteration:03d}", parent.program_id, iteration, child_source, parent.static_score)
        return self.ask(iteration + 1, [e.source for e in next_parents(select, seen, parent, child, rng_for)])

    def ask(self, iteration: int, sources: list[str]) -> int:
        """Ask iteration `iteration`'s rotating formulations for each program text in `sources`
        (those whose loaded constants are known); returns the number of distinct prompts asked."""
        queries = [self.task.validation[i] for i in self.split.batch(self.ev.rotating_size, iteration, self.ev.seed)]
        prompts: dict[str, list[dict]] = {}
        for source in sources:
            info = LOAD_INFO.get(source)
            if info is None:
                continue
            for messages in formulation_messages(info, queries):
                prompts.setdefault(repr(messages), messages)
        with llm_scope.scoped(SCOPE):
            for messages in prompts.values():
                llm_scope.submit(self._pool, self._one, messages)
        return len(prompts)

    def _one(self, messages: list[dict]) -> None:
        try:
            self.router.call("task", messages, allow_truncated=False, priority=LAST)
        except Exception:  # noqa: BLE001 -- a failed guess is no evaluation's error: the evaluation asks again
            pass

    def close(self) -> None:
        """Drop what has not been sent; wait for what has (no call outlives the run)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


class NoPrefetch:
    """What a run without the prefetch calls (the offline backend, --parallel > 1, Ray, ...)."""

    def ask_next(self, *args) -> int:
        return 0

    def close(self) -> None:
        pass

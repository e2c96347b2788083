"""The evolution loop (paper Algorithm 1a).

Evaluate the seeds on the static set -> for each iteration: pick a parent (strategies.selection),
evaluate it on a rotating minibatch, show the reflector failed cases (strategies.failures) and
reference programs (strategies.references), apply its patch and run the gates with up to k
compile-fix rounds (mstar.mutate), evaluate the child on the static set and add it to the pool
(strategies.acceptance) -> at the end score the best program on the held-out test set.

This module is the only one that changes the pool; the strategies only propose. Every step ends
in one typed lineage event (mstar.run.events), written before the next step starts.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable

from mstar.config import RunConfig
from mstar.evaluate import EvalResult, evaluate, sandbox_limits
from mstar.llm.router import LLMRouter
from mstar.mutate import MutationOutcome, propose_child
from mstar.pool import Pool, PoolEntry
from mstar.program.sources import load_program_source
from mstar.reflect import ReflectionInput, build_reflection_messages
from mstar.run import events
from mstar.run.store import FORMAT_VERSION, RunStore
from mstar.split import Split, make_split
from mstar.split.embed import make_embedder
from mstar.strategies import FailureMemory, Strategies
from mstar.tasks import Task

Progress = Callable[[events.Event], None]


def iteration_rng(seed: int, iteration: int) -> random.Random:
    """The random choices of one iteration (parent, failed cases) depend only on (seed, iteration),
    not on what earlier iterations drew, so a resumed run draws exactly what it drew before."""
    return random.Random(f"mstar-iteration:{seed}:{iteration}")


def train_ratio(cfg: RunConfig, task: Task) -> int:
    """Training budget ratio: the run's explicit setting, else the task's own default (LoCoMo: 0 =
    every session, as in the paper), else 5 (paper Table 7)."""
    if cfg.evolution.train_ratio is not None:
        return cfg.evolution.train_ratio
    return task.train_ratio if task.train_ratio is not None else 5


@dataclass
class RunSummary:
    best_id: str
    best_static: float
    best_seed_static: float
    test_score: float | None
    test_per_category: dict[str, float]
    iterations: int
    children_added: int
    failed_iterations: int
    seconds: float
    stop_reason: str | None = None      # why the run ended before its last iteration (a budget)


class Evolution:
    def __init__(self, cfg: RunConfig, task: Task, router: LLMRouter, store: RunStore,
                 progress: Progress | None = None, embedder=None, split: Split | None = None,
                 strategies: Strategies | None = None):
        self.cfg = cfg
        self.task = task
        self.router = router
        self.store = store
        self.progress = progress or (lambda event: None)
        self.strategies = strategies or Strategies.from_config(cfg.evolution)
        self.pool = Pool()
        self.failures = FailureMemory()
        # A resumed run passes the split it saved (mstar/run/resume.py).
        if split is None:
            ev = cfg.evolution
            embedder = embedder or make_embedder(ev.embed_model, ev.embed_cache_dir)
            split = make_split(task, embedder, static_size=ev.static_size, rotating_size=ev.rotating_size,
                               train_ratio=train_ratio(cfg, task), seed=ev.seed)
        self.split = split
        self.train = [task.episodes[i] for i in self.split.train_episodes]
        self.static = [task.validation[i] for i in self.split.static]

    # ------------------------------------------------------------ helpers
    def _eval(self, source: str, queries) -> EvalResult:
        return evaluate(source, self.train, queries, metric=self.task.score, router=self.router,
                        sandbox=self.cfg.sandbox, workers=self.cfg.evolution.workers)

    def _event(self, event: events.Event) -> None:
        self.store.append_jsonl("lineage.jsonl", events.to_dict(event))
        self.progress(event)

    def _add(self, entry: PoolEntry, res: EvalResult) -> None:
        self.store.write_program(entry.program_id, entry.source)
        self.store.write_cases(entry.program_id, "static", res.to_dict())
        self.pool.add(entry)

    def remember(self, ev: events.IterationEvent) -> None:
        """Failure memory from one iteration's event: the loop and resume use this one rule."""
        self.failures.remember(ev.parent_id, ev.iteration, ev.status, ev.title, ev.attempts, ev.delta)

    # ------------------------------------------------------------ phases
    def evaluate_seeds(self) -> None:
        for name in self.cfg.seeds:
            t0, mark = time.perf_counter(), self.router.mark()
            label, source = load_program_source(name)
            pid = f"seed_{label}"
            if pid in self.pool:  # evaluated before a crash (resumed run)
                continue
            res = self._eval(source, self.static)
            self._add(PoolEntry(pid, None, 0, source, res.mean_score, f"seed: {label}", res.per_category), res)
            self._event(events.SeedEvent(
                program_id=pid, title=f"seed: {label}", static_score=res.mean_score, per_category=res.per_category,
                error=res.error, llm=self.router.since(mark),
                timing={"eval_s": round(res.seconds, 3), "sandbox_s": round(res.sandbox_seconds, 3)},
                seconds=round(time.perf_counter() - t0, 3)))

    def iterate(self, iteration: int) -> None:
        ev = self.cfg.evolution
        t0, mark, replay_mark = time.perf_counter(), self.router.mark(), self.router.replay_mark()
        rng = iteration_rng(ev.seed, iteration)
        parent = self.strategies.selection.select(self.pool.entries, rng)
        batch = self.split.rotating(iteration)
        rot = self._eval(parent.source, [self.task.validation[i] for i in batch])
        timing = {"rotating_eval_s": round(rot.seconds, 3), "rotating_sandbox_s": round(rot.sandbox_seconds, 3)}
        cases = [c.__dict__ for c in rot.cases]
        picked = self.strategies.failures.sample(cases, ev.failures_per_iteration, rng)
        inp = ReflectionInput(
            source=parent.source, iteration=iteration, score=parent.static_score,
            failed_cases=picked, success_cases=[c for c in cases if c["score"] >= 0.5][:2],
            write_examples=[w.__dict__ for w in rot.writes[:2]],
            lineage=self.pool.lineage_lines(parent.program_id),
            already_tried=self.failures.notes(parent.program_id), mode=ev.mode,
            references=[(e.program_id, e.static_score, e.source)
                        for e in self.strategies.references.pick(parent, self.pool.entries)],
            debug_logs=[l for w in rot.writes[:3] for l in w.debug_logs] + [l for c in cases for l in c["debug_logs"]],
        )
        outcome: MutationOutcome = propose_child(
            parent.source, build_reflection_messages(inp, self.cfg.sandbox, ev.prompt_budget_tokens),
            router=self.router, sandbox=self.cfg.sandbox, limits=sandbox_limits(self.cfg.sandbox),
            attempts=ev.compile_fix_attempts, known_sources={e.source for e in self.pool.entries}, mode=ev.mode)
        record = events.IterationEvent(
            iteration=iteration, parent_id=parent.program_id, status=outcome.status, title=outcome.title,
            body=outcome.body, attempts=outcome.attempts, parent_static_score=parent.static_score,
            rotating_batch=batch, rotating_score=rot.mean_score,
            failed_case_ids=[c["query_id"] for c in picked] if any(c["score"] < 1.0 for c in cases) else [])
        if outcome.status == "ok":
            pid = f"iter_{iteration:03d}"
            res = self._eval(outcome.source, self.static)
            timing.update(child_eval_s=round(res.seconds, 3), child_sandbox_s=round(res.sandbox_seconds, 3))
            child = PoolEntry(pid, parent.program_id, iteration, outcome.source, res.mean_score,
                              outcome.title, res.per_category)
            self._add(child, res)
            record.program_id, record.static_score, record.per_category = pid, res.mean_score, res.per_category
            record.delta, record.eval_error = res.mean_score - parent.static_score, res.error
        elif outcome.source is not None:  # keep the failed child's text for inspection
            self.store.write_program(f"iter_{iteration:03d}_rejected", outcome.source)
        self.remember(record)
        record.best_static_score = self.pool.best().static_score
        record.llm = self.router.since(mark)
        record.replay_keys = self.router.replay_since(replay_mark)  # for resume (mstar.run.resume)
        timing["gates_s"] = round(outcome.gate_seconds, 3)
        record.timing = timing
        record.seconds = round(time.perf_counter() - t0, 3)
        self._event(record)

    def finish(self, t_start: float, stop_reason: str | None = None, iterations_done: int | None = None) -> RunSummary:
        best = self.pool.best()
        mark = self.router.mark()
        # Test questions need not be covered by the episodes chosen for validation,
        # so the held-out evaluation writes every episode of the task. A run stopped by its
        # budget skips it (it would spend past the limit) and stays resumable.
        test = evaluate(best.source, list(self.task.episodes), self.task.test, metric=self.task.score, router=self.router,
                        sandbox=self.cfg.sandbox, workers=self.cfg.evolution.workers) \
            if self.task.test and stop_reason is None else None
        iterations = self.cfg.evolution.iterations if iterations_done is None else iterations_done
        if test is not None:
            self.store.write_cases(best.program_id, "test", test.to_dict())
        self.store.write_text("best_program.py", best.source)
        seeds = [e for e in self.pool.entries if e.parent_id is None]
        children = sum(1 for e in self.pool.entries if e.parent_id is not None)
        summary = RunSummary(
            best_id=best.program_id, best_static=best.static_score,
            best_seed_static=max(e.static_score for e in seeds),
            test_score=test.mean_score if test else None,
            test_per_category=test.per_category if test else {},
            iterations=iterations, children_added=children, failed_iterations=iterations - children,
            seconds=round(time.perf_counter() - t_start, 3), stop_reason=stop_reason)
        self.store.write_json("summary.json", {"format_version": FORMAT_VERSION, **summary.__dict__,
                                               "llm_totals": self.router.totals(), "llm": self.router.report(),
                                               "pool": [{k: v for k, v in e.to_dict().items() if k != "source"}
                                                        for e in self.pool.entries]})
        if stop_reason is not None:  # no test event: the run is not finished, `mstar resume` continues it
            self._event(events.StoppedEvent(reason=stop_reason, iteration=iterations, llm=self.router.since(mark)))
            return summary
        # The test event is written last: a run is finished exactly when its lineage ends with it.
        self._event(events.TestEvent(program_id=best.program_id, test_score=summary.test_score,
                                     per_category=summary.test_per_category, llm=self.router.since(mark)))
        return summary

    def run(self, first_iteration: int = 1) -> RunSummary:
        """The whole run; a resumed run (mstar/run/resume.py) has rebuilt the pool and failure memory
        and starts at the first iteration without an event."""
        t0 = time.perf_counter()
        self.store.write_json("split.json", self.split.to_dict())
        self.evaluate_seeds()
        for it in range(first_iteration, self.cfg.evolution.iterations + 1):
            stop = self.router.stop_reason()  # budgets: checked only between iterations
            if stop:
                return self.finish(t0, stop_reason=stop, iterations_done=it - 1)
            self.iterate(it)
        return self.finish(t0)

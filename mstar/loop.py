"""The evolution loop (paper Algorithm 1a).

Evaluate the seeds on the static set -> for each iteration: pick a parent (strategies.selection),
look at its cases on a rotating minibatch, show the reflector failed cases (strategies.failures)
and reference programs (strategies.references), apply its patch and run the gates with up to k
compile-fix rounds (mstar.iteration.mutate), evaluate the child on the static set and add it to the pool
(strategies.acceptance) -> at the end score the best program on the held-out test set.

Up to `parallel` iterations are in flight at once (steady state): an iteration sees the pool as
it stands when it begins, and its child joins when its evaluation ends. With 1 this is the
paper's loop, draw for draw. Evaluations go to an executor (mstar.execution: this machine or a
Ray cluster). This module is the only one that changes the pool; the strategies only propose.
Every step ends in one typed lineage event (mstar.run.events), written before the step counts
as done. An endpoint that fails (mstar.evaluation.EndpointOutage, FatalLLMError) stops the run
resumably; it is never scored. The stop condition (strategies.stopping, `--patience`) may end the
run before its last iteration; the champion is then chosen and tested as usual.
"""
from __future__ import annotations

import gc
import random
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Callable

from mstar.config import RunConfig
from mstar.evaluation import EndpointOutage, EvalResult, sandbox_limits
from mstar.evaluation.records import WRITE_EXAMPLES, ScorerOutage, failed_result
from mstar.execution import EvalJob, Executor, make_executor
from mstar.final.finish import Stop as _Stop, finish_run
from mstar.final.held_out import HeldOutTests, may_start_early
from mstar.final.race_budget import with_shared_writes
from mstar.llm import scope as llm_scope
from mstar.llm.router import LLMRouter
from mstar.llm.types import FatalLLMError
from mstar.iteration.behaviour import same_answers
from mstar.final.champion import paired_gain
from mstar.iteration.lending import ReflectorLending
from mstar.iteration.mutate import fix_at_run_time, propose_child
from mstar.pool import Pool, PoolEntry
from mstar.program.sources import load_program_source
from mstar.iteration.reflect import ReflectionInput, build_reflection_messages
from mstar.iteration.rotating_prefetch import RotatingPrefetch
from mstar.run import events
from mstar.run.store import RunStore
from mstar.final.summary import RunSummary
from mstar.split import Split
# train_ratio moved to mstar.split.for_run; importable from here still, for scripts that used it.
from mstar.split.for_run import split_for, train_ratio  # noqa: F401
from mstar.strategies import FailureMemory, Strategies
from mstar.strategies.stopping import is_gain
from mstar.tasks import Task

Progress = Callable[[events.Event], None]
ENDPOINT_ERRORS = (EndpointOutage, FatalLLMError)


def iteration_rng(seed: int, iteration: int) -> random.Random:
    """The random choices of one iteration (parent, failed cases) depend only on (seed, iteration),
    not on what earlier iterations drew, so a resumed run draws exactly what it drew before."""
    return random.Random(f"mstar-iteration:{seed}:{iteration}")


class Evolution:
    def __init__(self, cfg: RunConfig, task: Task, router: LLMRouter, store: RunStore,
                 progress: Progress | None = None, embedder=None, split: Split | None = None,
                 strategies: Strategies | None = None, executor: Executor | None = None):
        self.cfg = cfg
        self.task = task
        self.router = router
        self.store = store
        self.progress = progress or (lambda event: None)
        self.strategies = strategies or Strategies.from_config(cfg.evolution)
        getattr(self.strategies.stopping, "bind", lambda evo: None)(self)   # patience reads the evidence
        self.pool = Pool()
        self.failures = FailureMemory()
        self.static_results: dict[str, EvalResult] = {}   # for `rotating reuse`
        self.rotating: dict[str, dict[str, float]] = {}   # program id -> its rotating cases' scores (champion.py)
        self.reference: str | None = None   # the best program as of the run's last significant gain
                                            # (None: the best seed), what a child must beat to count
        self._lock = threading.RLock()                    # pool, failure memory, lineage file
        # A resumed run passes the split it saved (mstar/run/resume.py); a new one, the split
        # computed while its preflight ran (mstar/library/launch.py).
        self.split = split if split is not None else split_for(cfg, task, embedder)
        self.train = [task.episodes[i] for i in self.split.train_episodes]
        self.static = [task.validation[i] for i in self.split.static]
        self.executor = executor or make_executor(cfg, task, self.split.train_episodes, router)
        self.prefetch = RotatingPrefetch.for_run(cfg, task, self.split, router, self.executor)
        # One iteration at a time: the reflector's call is then the run's only one during its reply.
        self.lending = ReflectorLending(router) if cfg.evolution.parallel == 1 else None
        self.held_out = HeldOutTests(self.executor, early=may_start_early(cfg, task, router, self.executor))

    # ------------------------------------------------------------ helpers
    def _static_job(self, source: str) -> EvalJob:
        return EvalJob(source, "validation", tuple(self.split.static))

    def _event(self, event: events.Event) -> None:
        with self._lock:
            self.store.append_jsonl("lineage.jsonl", events.to_dict(event))
        self.progress(event)

    def _write_entry(self, entry: PoolEntry, res: EvalResult) -> None:
        """The program's files (each synced to disk); no lock: every entry has files of its own."""
        self.store.write_program(entry.program_id, entry.source)
        self.store.write_cases(entry.program_id, "static", res.to_dict())

    def _join(self, entry: PoolEntry, res: EvalResult) -> None:
        with self._lock:
            self.pool.add(entry)
            self.static_results[entry.program_id] = res

    def remember(self, ev: events.IterationEvent) -> None:
        """What the run keeps from one iteration's event -- failure memory, the parent's rotating
        scores, the stop condition's count: the loop and resume use this one rule."""
        with self._lock:
            self.failures.remember(ev.parent_id, ev.iteration, ev.status, ev.title, ev.attempts, ev.delta,
                                   ev.no_change)
            if ev.rotating_scores:
                self.rotating.setdefault(ev.parent_id, {}).update(ev.rotating_scores)
            if is_gain(ev):     # the child joined already: the best program from now on
                self.reference = self.pool.best().program_id
            self.strategies.stopping.observe(ev)
            ev.patience = getattr(self.strategies.stopping, "state", lambda: None)()   # the progress line's

    def reference_id(self) -> str:
        """What the next child must significantly beat for the run to count a gain: the best
        program as of the last gain, the best seed before any (strategies/stopping.py)."""
        with self._lock:
            if self.reference is not None:
                return self.reference
            return self.pool.best_seed().program_id

    def rotating_scores(self, program_id: str) -> dict[str, float]:
        """The scores of every rotating case the program was evaluated on, by query id."""
        with self._lock:
            return dict(self.rotating.get(program_id, {}))

    def static_result(self, program_id: str) -> EvalResult | None:
        """A pool program's static-set evaluation (from memory, else from its cases file)."""
        with self._lock:
            res = self.static_results.get(program_id)
        if res is None:
            data = self.store.read_cases(program_id, "static")
            res = EvalResult.from_dict(data) if data else None
        return res

    def _run(self, job: EvalJob) -> EvalResult:
        """One evaluation. Whatever a program's evaluation raises costs that program -- a failed
        result whose error the reflector reads -- never the run. An endpoint error stops the run, and
        an OSError (a full disk, no file descriptors left) is the machine's, not the program's."""
        try:
            return self.executor.run(job)
        except (*ENDPOINT_ERRORS, OSError):
            raise
        except Exception as exc:  # noqa: BLE001 -- one program's quirk must not end the run (issue 30)
            items = self.task.test if job.split == "test" else self.task.validation
            queries = [items[i] for i in job.indices] if job.indices is not None else list(items)
            message = f"the evaluation raised {type(exc).__name__}: {exc}"[:2000]
            return failed_result(queries, {"ok": False, "stage": "evaluation", "gate": "engine",
                                           "rule": "exception", "message": message, "line": None},
                                 0.0, why="evaluation failed")

    # ------------------------------------------------------------ phases
    def evaluate_seeds(self) -> None:
        """Every seed on the static set, at once; events in the configured order."""
        todo = []
        for name in self.cfg.seeds:
            label, source = load_program_source(name)
            if f"seed_{label}" not in self.pool:  # else evaluated before a crash (resumed run)
                todo.append((f"seed_{label}", label, source))
        if not todo:
            return
        with ThreadPoolExecutor(len(todo), thread_name_prefix="seed") as pool:
            futures = [(pid, label, source, time.perf_counter(), pool.submit(self._seed_eval, pid, source))
                       for pid, label, source in todo]
            for pid, label, source, t0, fut in futures:
                res = fut.result()
                entry = PoolEntry(pid, None, 0, source, res.mean_score, f"seed: {label}", res.per_category)
                self._write_entry(entry, res)
                self._join(entry, res)
                self._event(events.SeedEvent(
                    program_id=pid, title=f"seed: {label}", static_score=res.mean_score,
                    per_category=res.per_category, error=res.error, case_errors=res.case_errors,
                    ingest_errors=res.ingest_errors, xray=res.xray, llm=with_shared_writes(self.router.spent_in(pid), res),
                    timing={"eval_s": round(res.seconds, 3), "sandbox_s": round(res.sandbox_seconds, 3),
                            "chain_calls": res.chain_calls, "write_s": res.write_seconds,
                            "read_cpu_s": res.read_cpu_seconds},
                    seconds=round(time.perf_counter() - t0, 3)))

    def _seed_eval(self, pid: str, source: str) -> EvalResult:
        with llm_scope.scoped(pid):
            return self._run(self._static_job(source))

    def iterate(self, iteration: int) -> None:
        with llm_scope.scoped(f"iter_{iteration:03d}"):
            self._iterate(iteration, f"iter_{iteration:03d}")

    def _iterate(self, iteration: int, scope: str) -> None:
        ev = self.cfg.evolution
        t0 = time.perf_counter()
        rng = iteration_rng(ev.seed, iteration)
        with self._lock:  # what this iteration sees: the pool as it stands now
            seen = list(self.pool.entries)
            # A child that answered every static item as its parent did adds nothing to choose.
            parent = self.strategies.selection.select([e for e in seen if not e.no_change] or seen, rng)
            lineage = self.pool.lineage_lines(parent.program_id)
            tried = self.failures.notes(parent.program_id)
            reference = self.reference_id()
        # Guesses at the next iteration's rotating evaluation; this one's guessed (mstar/iteration/rotating_prefetch.py).
        next_rng = lambda: iteration_rng(ev.seed, iteration + 1)   # noqa: E731
        self.prefetch.ahead(iteration, seen, parent, self.strategies.selection.select, next_rng)
        waited = self.prefetch.settle(iteration, parent.source)
        if ev.rotating == "reuse" and (rot := self.static_result(parent.program_id)) is not None:
            batch, timing = [], {"rotating_eval_s": 0.0, "rotating_sandbox_s": 0.0, "rotating_chain_calls": 0}
        else:
            # Drawn by the evolution's seed, from the split's pool: runs that differ only in --seed
            # share the static set and episodes (the split's seed) but not their batches.
            batch = self.split.batch(ev.rotating_size, iteration, ev.seed)
            rot = self._run(EvalJob(parent.source, "validation", tuple(batch)))
            timing = {"rotating_eval_s": round(rot.seconds, 3), "rotating_sandbox_s": round(rot.sandbox_seconds, 3),
                      "rotating_chain_calls": rot.chain_calls, "rotating_reused_kb": rot.reused_kb,
                      "rotating_ahead": waited is not None, "rotating_wait_s": round(waited or 0.0, 3)}
        cases = [c.__dict__ for c in rot.cases if c.scored]
        picked = self.strategies.failures.sample(cases, ev.failures_per_iteration, rng)
        inp = ReflectionInput(
            source=parent.source, iteration=iteration, score=parent.static_score,
            failed_cases=picked, success_cases=[c for c in cases if c["score"] >= 0.5][:2],
            write_examples=[w.__dict__ for w in rot.writes[:WRITE_EXAMPLES]], lineage=lineage, already_tried=tried,
            mode=ev.mode, references=[(e.program_id, e.static_score, e.source)
                                      for e in self.strategies.references.pick(parent, seen)],
            debug_logs=rot.load_warnings + [l for w in rot.writes[:3] for l in w.debug_logs]
            + [l for c in cases for l in c["debug_logs"]],
        )
        # Each candidate's evaluation worker starts while its gates run (closed after, if not taken).
        started: dict[str, object] = {}
        begin = getattr(self.executor, "prestart", None)
        outcome = propose_child(
            parent.source, build_reflection_messages(inp, self.cfg.sandbox, ev.prompt_budget_tokens),
            router=self.router, sandbox=self.cfg.sandbox, limits=sandbox_limits(self.cfg.sandbox),
            attempts=ev.compile_fix_attempts, known_sources={e.source for e in seen}, mode=ev.mode,
            on_candidate=(lambda src: started.setdefault(src, begin(src))) if begin else None, lending=self.lending)
        record = events.IterationEvent(
            iteration=iteration, parent_id=parent.program_id, status=outcome.status, title=outcome.title,
            body=outcome.body, attempts=outcome.attempts, parent_static_score=parent.static_score,
            rotating_batch=batch, rotating_score=rot.mean_score, rotating_mode=ev.rotating,
            rotating_scores={c.query_id: c.score for c in rot.cases if c.scored} if batch else {},
            failed_case_ids=[c["query_id"] for c in picked] if any(c["score"] < 1.0 for c in cases) else [],
            pool_seen=[e.program_id for e in seen])
        child = None
        if outcome.status == "ok":
            self.prefetch.ask_next(iteration, seen, parent, outcome.source, self.strategies.selection.select, next_rng)
            source, res = self._evaluate_child(outcome, parent, record, timing, seen)
            if source is not None:
                child = PoolEntry(f"iter_{iteration:03d}", parent.program_id, iteration, source, res.mean_score,
                                  outcome.title, res.per_category)
                parent_res = self.static_result(parent.program_id)
                child.no_change = record.no_change = bool(parent_res) and same_answers(res.cases, parent_res.cases)
                record.program_id, record.static_score, record.per_category = child.program_id, res.mean_score, res.per_category
                record.delta, record.eval_error, record.case_errors = res.mean_score - parent.static_score, res.error, res.case_errors
                record.ingest_errors = res.ingest_errors
                record.xray = res.xray
                record.evidence = paired_gain(res, parent_res)
                record.reference_id = reference
                record.progress_evidence = record.evidence if reference == parent.program_id else \
                    paired_gain(res, self.static_result(reference))
            else:
                record.status = "failed"
        for token in started.values():   # dropping a worker an evaluation took is a no-op
            if token is not None:
                self.executor.drop_prestart(token)
        if child is None and outcome.source is not None:  # keep the failed child's text for inspection
            self.store.write_program(f"iter_{iteration:03d}_rejected", outcome.source)
        # Outside the lock other iterations wait on: the child's files (its own) and this iteration's
        # spend (its calls are all done; with what writing the parent's knowledge base again cost: race_budget.py).
        if child is not None:
            self._write_entry(child, res)
        record.llm = {**self.router.spent_in(scope), "rewrite_tokens": rot.write_tokens if batch else 0,
                      **record.llm}   # the child's shared_write_tokens (_evaluate_child)
        record.replay_keys = self.router.replay_keys(scope)  # for resume (mstar.run.resume)
        with self._lock:  # the child joins, the event is written: the iteration is done
            if child is not None:
                self._join(child, res)
            self.remember(record)
            record.best_static_score = self.pool.best().static_score
            timing.update(gates_s=round(outcome.gate_seconds, 3), **self.prefetch.account(iteration))
            record.timing, record.seconds = timing, round(time.perf_counter() - t0, 3)
            self._event(record)

    def _evaluate_child(self, outcome, parent: PoolEntry, record, timing: dict, seen: list):
        """The child on the static set; a child that fails at run time goes back to the reflector
        with the error, up to `runtime_fix_rounds` times (paper Figure 2). Returns (source, result),
        or (None, None) when every round failed -- the child is then discarded."""
        ev = self.cfg.evolution
        source = outcome.source
        res = self._run(self._static_job(source))
        record.llm = with_shared_writes(record.llm, res)
        timing.update(child_eval_s=round(res.seconds, 3), child_sandbox_s=round(res.sandbox_seconds, 3),
                      child_chain_calls=res.chain_calls, child_write_s=res.write_seconds,
                      child_read_cpu_s=res.read_cpu_seconds)
        for round_no in range(1, ev.runtime_fix_rounds + 1):
            error = runtime_failure(res)
            if error is None:
                return source, res
            fix = fix_at_run_time(source, error, router=self.router, sandbox=self.cfg.sandbox,
                                  limits=sandbox_limits(self.cfg.sandbox), attempts=ev.compile_fix_attempts,
                                  known_sources={e.source for e in seen}, mode=ev.mode, parent_source=parent.source)
            record.runtime_fixes.append(entry := {"round": round_no, "error": error[:500], "status": fix.status,
                                                  "title": fix.title, "attempts": fix.attempts})
            if fix.status != "ok":
                continue
            source = outcome.source = fix.source
            res = self._run(self._static_job(source))
            record.llm = with_shared_writes(record.llm, res)
            entry["static_score"] = res.mean_score
        if runtime_failure(res) is not None and ev.runtime_fix_rounds > 0:
            return None, None
        return source, res

    def finish(self, t_start: float, stop: _Stop | None = None, iterations_done: int | None = None) -> RunSummary:
        """Champion, test and summary (mstar/final/finish.py)."""
        iterations = self.cfg.evolution.iterations if iterations_done is None else iterations_done
        return finish_run(self, t_start, stop, iterations, ENDPOINT_ERRORS)

    def run(self, todo: list[int] | None = None) -> RunSummary:
        """The whole run. `todo`: the iterations still to do (a resumed run, mstar/run/resume.py,
        has rebuilt the pool and failure memory); default all of them."""
        t0 = time.perf_counter()
        # What start-up built (modules, the task, the split) lives as long as the run. Frozen, the
        # collector no longer walks it: its full collections, which hold the GIL and so every call in
        # flight, went from 0.12-0.16 s to 0.02-0.03 s (LoCoMo, 30 sessions); unfrozen at the end.
        gc.freeze()
        self.store.write_json("split.json", self.split.to_dict())
        todo = list(range(1, self.cfg.evolution.iterations + 1)) if todo is None else list(todo)
        done_before = self.cfg.evolution.iterations - len(todo)
        try:
            try:
                self.evaluate_seeds()
            except ENDPOINT_ERRORS as exc:
                return self.finish(t0, _outage_stop(exc, "the seed evaluations"), done_before)
            self.held_out.start_early(self.pool.best_seed())   # tested whatever comes next (mstar/final/held_out.py)
            stop, done = self._iterations(todo)
            return self.finish(t0, stop, done_before + done if stop else None)
        finally:
            self.prefetch.close()
            self.held_out.close()
            self.executor.close()
            gc.unfreeze()   # a process that goes on (a notebook, the tests) collects it again

    def _iterations(self, todo: list[int]) -> tuple[_Stop | None, int]:
        """Up to `parallel` iterations at once; a budget is checked before each one starts."""
        stop: _Stop | None = None
        done = 0   # iterations finished
        with ThreadPoolExecutor(max(1, self.cfg.evolution.parallel), thread_name_prefix="iteration") as pool:
            running: dict = {}
            queue = list(todo)
            while queue or running:
                while queue and stop is None and len(running) < max(1, self.cfg.evolution.parallel):
                    reason = self.router.stop_reason(in_flight=len(running))
                    if reason:
                        stop = _Stop(reason, "budget")
                        break
                    with self._lock:
                        early = self.strategies.stopping.reason()
                    if early:   # the run is done: the champion is chosen and tested as usual
                        stop = _Stop(early, "patience")
                        break
                    it = queue.pop(0)
                    running[pool.submit(self.iterate, it)] = it
                if not running:
                    break
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    it = running.pop(fut)
                    try:
                        fut.result()
                        done += 1
                    except ENDPOINT_ERRORS as exc:
                        stop = stop or _outage_stop(exc, f"iteration {it}")
        return stop, done


def runtime_failure(res: EvalResult) -> str | None:
    """Why a child that passed its gates failed while it was evaluated (its worker died or timed
    out, a read or write raised, a read came back too long), or None."""
    if res.error:
        return str(res.error.get("message") or res.error) if isinstance(res.error, dict) else str(res.error)
    for rec in [*res.writes, *res.cases]:
        if rec.error:
            return rec.error
    return None


def _outage_stop(exc: BaseException, where: str) -> _Stop:
    """A resumable stop: the task's scorer's (its message says what failed), or the endpoint's."""
    if isinstance(exc, ScorerOutage):
        return _Stop(f"{exc} (during {where})", "scorer")
    kind = "rejected the requests" if isinstance(exc, FatalLLMError) else "failed"
    return _Stop(f"the LLM endpoint {kind} during {where}: {exc}", "endpoint")

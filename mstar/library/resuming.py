"""Continuing a stopped run: what may change (a larger budget, more iterations), and the loop
rebuilt from the folder (the state itself is read by mstar/run/resume.py).

A run stopped by its budget goes on only with a larger one for the flag that stopped it (the
spend so far and the cost of its iterations count: a resume never spends past the budget). A
finished run is not resumed. Every check comes before the folder is touched (`prepare_resume`,
then the preflight, then `start_resume`): a refused resume leaves it as it was.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace

from mstar.config import RunConfig
from mstar.library.errors import SetupError
from mstar.library.task_files import resumed_task
from mstar.run import events as ev_types
from mstar.run.resume import (RunState, check_sources, load_split, load_state, preload_usage, prior_spend,
                              rebuild, repair_tails)
from mstar.run.store import RunStore
from mstar.split import Split
from mstar.tasks import Task


@dataclass
class Resumable:
    """A run that passed every check a resume makes, and what it goes on with."""
    state: RunState
    config: RunConfig              # the folder's, with the new budget and --iterations
    task: Task
    split: Split | None            # the saved split (None: the run died before saving it)
    changed: bool                  # the configuration differs from the folder's


def prepare_resume(store: RunStore, *, task_obj=None, max_usd=None, max_tokens=None, iterations=None,
                   cli: bool = True) -> Resumable | None:
    """Every check a resume makes, in order -- the new limits, the run's state, the budget, the
    task (given again or rebuilt) and its split, the programs' sources -- and nothing written:
    a resume refused here leaves the folder as it was, so the same command with what was
    missing (a task, a larger budget) goes on as if the first had never been given. None when
    the run has finished already (and no more iterations are asked for: see `finished_problem`)."""
    problem = limits_problem(max_usd, max_tokens, iterations, cli=cli)
    if problem:
        raise SetupError(problem)
    state = load_state(store)   # a partial last line is left out here and dropped in start_resume
    done = max(state.done, default=0)
    if iterations is not None and iterations < done:
        raise SetupError(f"{_flag('iterations', iterations, cli)}: {done} iteration(s) are done already; "
                         "give that many or more")
    if state.finished:
        problem = finished_problem(store.root, done, iterations, cli=cli)
        if problem:
            raise SetupError(problem)
        print(f"run     {store.root} has already finished; nothing to resume")
        return None
    cfg = state.config
    stop = state.events[-1] if state.events and isinstance(state.events[-1], ev_types.StoppedEvent) else None
    if stop is not None and stop.kind == "budget":
        problem = budget_problem(stop.reason, cfg.llm, max_usd, max_tokens, store.root, cli=cli,
                                 spent=prior_spend(store))
        if problem:
            raise SetupError(problem)
    if max_usd is not None or max_tokens is not None:
        cfg = replace(cfg, llm=replace(cfg.llm, max_usd=max_usd if max_usd is not None else cfg.llm.max_usd,
                                       max_tokens=max_tokens if max_tokens is not None else cfg.llm.max_tokens))
    if iterations is not None:
        cfg = replace(cfg, evolution=replace(cfg.evolution, iterations=iterations))
    task = resumed_task(task_obj, cfg, store)
    split = load_split(store, task)
    check_sources(state, store)
    changed = cfg != state.config
    state.config = cfg   # in memory only: start_resume writes it once the resume goes on
    return Resumable(state, cfg, task, split, changed)


def start_resume(store: RunStore, resumable: Resumable) -> None:
    """The checks passed (the preflight too): now the folder changes -- partial last lines a kill
    left are dropped, temp files swept, and the new limits written to config.json, so the
    folder says which budget and how many iterations the rest ran under."""
    import sys
    for warning in repair_tails(store):
        print(f"mstar: warning: {warning}", file=sys.stderr)
    store.sweep_temp()  # left by a process killed mid-write; we hold the folder
    if resumable.changed:
        store.write_config(resumable.config.to_dict())


def limits_problem(max_usd, max_tokens, iterations, *, cli: bool) -> str | None:
    """The first new limit out of range (the rules of `mstar evolve`), as one line; None when
    all are fine. Checked first, so a typo costs nothing."""
    for name, value in (("max_usd", max_usd), ("max_tokens", max_tokens)):
        if value is not None and not value > 0:   # also NaN
            return f"{_flag(name, value, cli)}: give a budget above 0"
    if iterations is not None and iterations < 0:
        return f"{_flag('iterations', iterations, cli)}: give 0 or more"
    return None


def finished_problem(root, done: int, iterations, *, cli: bool) -> str | None:
    """Why more iterations cannot be had from a finished run (None when none are asked for). Its
    champion has been tested; going on would race again and test again with the first test
    score known -- a second look at the test set (docs/confirmation.md) -- so a finished run
    is not resumed. A new run with the same options replays this one's replies from the cache."""
    if iterations is None or iterations <= done:
        return None
    how = (f"mstar evolve with the same options and --iterations {iterations}" if cli
           else f"mstar.evolve(...) with the same task and options and iterations={iterations}")
    return (f"{root} has finished ({done} iteration(s), then the test): a finished run is not resumed, "
            "since more iterations would race and test again with its test score known (docs/confirmation.md); "
            f"for {iterations} iterations start a new run: {how} (the response cache answers what this run "
            "asked already)")


def _flag(name: str, value, cli: bool) -> str:
    return f"--{name.replace('_', '-')} {value}" if cli else f"{name}={value}"


def budget_problem(reason: str, llm, max_usd, max_tokens, root, *, cli: bool = True,
                   spent: dict | None = None) -> str | None:
    """Why a run its budget stopped cannot go on with these limits, or None: only a larger limit
    for the flag that stopped it lets it spend more -- larger than what it has spent too (`spent`:
    mstar.run.resume.prior_spend), or the resume would stop again at once, with nothing done."""
    from mstar.llm.budget import budget_flag

    flag = budget_flag(reason)
    if flag is None:
        return None
    attr = flag.removeprefix("--").replace("-", "_")
    old, new = getattr(llm, attr), {"max_usd": max_usd, "max_tokens": max_tokens}[attr]
    used = (spent or {}).get("cost_usd" if attr == "max_usd" else "tokens")
    show = (lambda v: f"${v:g}") if attr == "max_usd" else (lambda v: f"{int(v):,}")
    how = f"mstar resume {root} {flag} LARGER" if cli else f"mstar.resume({str(root)!r}, {attr}=LARGER)"
    if new is not None and (old is None or new > old):
        if used is None or new > used:
            return None
        return (f"{root} has spent {show(used)} of its budget ({reason}); {flag} {show(new)} is not more "
                f"than that, so it would stop again at once: {how}")
    shown = "none" if old is None else show(old)
    return f"{root} stopped at its budget ({reason}); it goes on only with a larger {flag} (now {shown}): {how}"


def iteration_costs(events) -> list[tuple[float, int]]:
    """(usd, billed tokens) of each iteration done: a resumed run's budget estimates its next
    iteration from these (mstar.llm.budget.Budget.prime)."""
    out = []
    for ev in ev_types.iterations(events):
        llm = ev.llm or {}
        out.append((float(llm.get("cost_usd") or 0.0),
                    int(llm.get("prompt_tokens") or 0) + int(llm.get("completion_tokens") or 0)))
    return out


def resume_run(store: RunStore, resumable: Resumable, router, *, progress=None):
    """Continue the run to its end; returns the loop's RunSummary. The caller holds the lock,
    has started the resume (`start_resume`: the jsonl tails repaired) and built `router` to
    append to llm_usage.jsonl."""
    from mstar.loop import Evolution  # the loop imports the sandbox: loaded only when a run goes on

    state = resumable.state
    preload_usage(router, store)
    evo = Evolution(state.config, resumable.task, router, store, progress=progress, split=resumable.split)
    rebuild(evo, state, store)
    store.append_jsonl("resumes.jsonl", {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "pid": os.getpid(),
        "seeds_done": len(state.seeds_done), "next_iteration": state.next_iteration,
        "iterations_done": len(state.done), "warnings": state.warnings})
    todo = state.todo(state.config.evolution.iterations)
    if todo:   # more iterations to do (--iterations): the recorded confirmation is out of date
        evo.prior_confirmation = None
    return evo.run(todo=todo)

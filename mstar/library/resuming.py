"""Continuing a stopped run: what may change (a larger budget, more iterations), and the loop
rebuilt from the folder (the state itself is read by mstar/run/resume.py).

A run stopped by its budget goes on only with a larger one for the flag that stopped it (the
spend so far and the cost of its iterations count: a resume never spends past the budget).
"""
from __future__ import annotations

import os
import time
from dataclasses import replace

from mstar.library.errors import SetupError
from mstar.run import events as ev_types
from mstar.run.resume import RunState, load_split, load_state, preload_usage, rebuild, repair_tails
from mstar.run.store import RunStore


def prepare_resume(store: RunStore, *, max_usd=None, max_tokens=None, iterations=None, cli: bool = True):
    """(state, config) to go on with, after the folder's tails are repaired and the new limits
    written to its config; None when the run has finished already."""
    import sys
    for warning in repair_tails(store):
        print(f"mstar: warning: {warning}", file=sys.stderr)
    store.sweep_temp()  # left by a process killed mid-write; we hold the folder
    state = load_state(store)
    if state.finished:
        print(f"run     {store.root} has already finished; nothing to resume")
        return None
    cfg = state.config
    stop = state.events[-1] if state.events and isinstance(state.events[-1], ev_types.StoppedEvent) else None
    if stop is not None and stop.kind == "budget":
        problem = budget_problem(stop.reason, cfg.llm, max_usd, max_tokens, store.root, cli=cli)
        if problem:
            raise SetupError(problem)
    if max_usd is not None or max_tokens is not None:
        llm = replace(cfg.llm, max_usd=max_usd if max_usd is not None else cfg.llm.max_usd,
                      max_tokens=max_tokens if max_tokens is not None else cfg.llm.max_tokens)
        state.config = cfg = replace(cfg, llm=llm)
        store.write_config(cfg.to_dict())  # the folder says which budget the rest ran under
    if iterations is not None:
        done = max(state.done, default=0)
        if iterations < max(done, 1):
            raise SetupError(f"--iterations {iterations}: {done} iteration(s) are done already; "
                             "give that many or more")
        state.config = cfg = replace(cfg, evolution=replace(cfg.evolution, iterations=iterations))
        store.write_config(cfg.to_dict())
    return state, cfg


def budget_problem(reason: str, llm, max_usd, max_tokens, root, *, cli: bool = True) -> str | None:
    """Why a run its budget stopped cannot go on with these limits, or None: only a larger limit
    for the flag that stopped it lets it spend more."""
    from mstar.llm.budget import budget_flag

    flag = budget_flag(reason)
    if flag is None:
        return None
    attr = flag.removeprefix("--").replace("-", "_")
    old, new = getattr(llm, attr), {"max_usd": max_usd, "max_tokens": max_tokens}[attr]
    if new is not None and (old is None or new > old):
        return None
    shown = "none" if old is None else f"${old:g}" if attr == "max_usd" else f"{old:,}"
    how = f"mstar resume {root} {flag} LARGER" if cli else f"mstar.resume({str(root)!r}, {attr}=LARGER)"
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


def resume_run(store: RunStore, state: RunState, task, router, *, progress=None):
    """Continue the run to its end; returns the loop's RunSummary. The caller holds the lock,
    has repaired the jsonl tails (RunStore.drop_partial_tail) and built `router` to append to
    llm_usage.jsonl."""
    from mstar.loop import Evolution  # the loop imports the sandbox: loaded only when a run goes on

    preload_usage(router, store)
    evo = Evolution(state.config, task, router, store, progress=progress, split=load_split(store, task))
    rebuild(evo, state, store)
    store.append_jsonl("resumes.jsonl", {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "pid": os.getpid(),
        "seeds_done": len(state.seeds_done), "next_iteration": state.next_iteration,
        "iterations_done": len(state.done), "warnings": state.warnings})
    todo = state.todo(state.config.evolution.iterations)
    if todo:   # more iterations to do (--iterations): the recorded confirmation is out of date
        evo.prior_confirmation = None
    return evo.run(todo=todo)

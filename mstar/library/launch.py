"""Starting a run and continuing one: the one code path behind `mstar evolve` / `mstar resume`
and `mstar.evolve` / `mstar.resume`.

Everything that can be checked is checked before the run folder exists and before any spend:
options, config, task (mstar.tasks.prepare_task: records, ids, splits, the task's own scorer),
embeddings, trackers, seeds (the sandbox's gates), the cluster, the LLM endpoints (one call per
role). A check that fails raises `SetupError` with one line and the exit code the command line
uses (2: bad input, 3: an endpoint). Then the run, guarded (mstar/library/exits.py): Ctrl-C,
SIGTERM and a full or read-only disk end it with one line and the way to continue it.

What the run prints (unless quiet) and what listens to it -- the console's progress lines, the
live spend, the caller's `on_event`, the trackers -- all hang on the loop's one progress
callback, which gets each typed lineage event right after it is written to lineage.jsonl.
"""
from __future__ import annotations

import argparse
import sys
import threading
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from mstar.config import RunConfig
from mstar.library import printing
from mstar.library.errors import SetupError
from mstar.library.exits import RunGuard, disk_line, disk_problem
from mstar.library.options import OptionError, check_numbers, resolve_config, trackers_of
from mstar.library.task_files import save_task, task_for_run
from mstar.run.store import RunStore


def evolve_namespace(ns: argparse.Namespace, task_obj=None, *, cli: bool, on_event: Callable | None = None,
                     llm=None) -> tuple[Any, RunStore]:
    """A new run from parsed options (`task_obj`: a Task given in Python, else `ns.task` names
    one); returns (the loop's RunSummary, the run's store)."""
    from mstar.llm.settings import ConfigError

    ns._cli = cli
    problem = check_numbers(ns)
    if problem:
        raise SetupError(problem)
    try:
        trackers = trackers_of(getattr(ns, "track", None))
        cfg = resolve_config(ns)
    except (ConfigError, OptionError) as exc:
        raise SetupError(str(exc)) from None
    if llm is not None:
        cfg = replace(cfg, llm=_llm_config(llm, cfg))
    task = task_for_run(task_obj, cfg)
    if task_obj is not None:
        cfg = replace(cfg, task=f"python:{task.name}")
    _check_embedder(cfg)
    listeners = _trackers(trackers)
    store = RunStore(Path(cfg.runs_dir) / cfg.name)
    try:
        store.check_new()
    except FileExistsError as exc:
        raise SetupError(str(exc)) from None
    with RunGuard(cli=cli) as guard:   # Ctrl-C during the checks below is one line too
        out = guard.run(lambda: _checked_run(cfg, task, task_obj, store, ns, guard, on_event, listeners))
    if isinstance(out, int):           # the command line's interrupt or disk error: its exit code
        raise SetupError("", out)
    return out, store


def _llm_config(llm, cfg: RunConfig):
    """`llm=`: an LLMConfig (mstar.api.llm_config(...)) or a TOML file's path."""
    from mstar.config import LLMConfig
    if isinstance(llm, LLMConfig):
        return replace(llm, max_usd=cfg.llm.max_usd if cfg.llm.max_usd is not None else llm.max_usd,
                       max_tokens=cfg.llm.max_tokens if cfg.llm.max_tokens is not None else llm.max_tokens)
    if isinstance(llm, (str, Path)):
        from mstar.llm.settings import ConfigError, resolve_llm_config
        try:
            return resolve_llm_config(str(llm), max_usd=cfg.llm.max_usd, max_tokens=cfg.llm.max_tokens)
        except ConfigError as exc:
            raise SetupError(str(exc)) from None
    raise SetupError(f"llm= takes an mstar.api.llm_config(...) or a TOML file's path, got {type(llm).__name__}")


def _check_embedder(cfg: RunConfig) -> None:
    from mstar.split.embed import make_embedder
    try:   # a missing embedding model fails here, before a run folder exists (loading is lazy)
        make_embedder(cfg.evolution.embed_model, None)
    except ValueError as exc:
        raise SetupError(f"--embed-model: {exc}") from None


def _trackers(names: list[str]) -> list:
    from mstar.trackers import TrackerError, make_tracker
    try:
        return [make_tracker(name) for name in names]
    except TrackerError as exc:
        raise SetupError(str(exc)) from None


def _checked_run(cfg, task, task_obj, store, ns, guard, on_event, trackers):
    """The checks that start processes or make calls, then the run folder and the run itself."""
    router, split = _router_checked(cfg, task, quiet=ns.quiet, preflight=not getattr(ns, "no_preflight", False))
    try:
        store.create()
        store.acquire_lock()  # held while this process runs it: `mstar runs` shows the run as running
        store.write_config(cfg.to_dict())
        if task_obj is not None:
            save_task(store, task)
    except FileExistsError as exc:   # made meanwhile (check_new passed): by another run, or by hand
        raise SetupError(str(exc)) from None
    except OSError as exc:
        if disk_problem(exc) is None:
            raise
        raise SetupError(disk_line(exc, store.root, resumable=False).removeprefix("mstar: "), 1) from None
    guard.store = store
    try:
        return _run(cfg, task, store, router, ns, on_event, trackers, split)
    finally:
        store.release_lock()


def _router_checked(cfg, task, *, quiet: bool, preflight: bool):
    """The run's router, its endpoints checked; and the run's split, computed meanwhile (a Future)."""
    from mstar.library.prechecks import check_seeds, preflight as run_preflight
    from mstar.library.wiring import make_router

    problem = check_seeds(cfg.seeds, cfg.sandbox)  # a bad seed name or file fails before a folder exists
    if problem:
        raise SetupError(problem)
    if cfg.evolution.executor == "ray":  # an unreachable cluster fails here, before a run folder exists
        from mstar.execution import ExecutorError
        from mstar.execution.ray_cluster import connect
        try:
            connect(cfg.evolution.ray_address)
        except ExecutorError as exc:
            raise SetupError(str(exc)) from None
    router = make_router(cfg)
    _warm_sandbox(cfg)
    split = _split_ahead(cfg, task)
    if preflight:
        code = run_preflight(router, quiet=quiet)
        if code is not None:
            raise SetupError("", code)   # the preflight printed its line
    return router, split


def _split_ahead(cfg, task) -> Future:
    """The run's split (mstar.split.for_run), computed in a thread of its own while the preflight
    waits for its replies: it is CPU work (embeddings in a child process, k-means, facility
    location; ~1.1-1.5 s on the 30-session LoCoMo workload), the preflight one LLM reply (0.3-2 s
    and more), and the run needs both before its seeds. A daemon thread, not a pool's: a run
    refused by its preflight exits without waiting for it. What the split raises, `result()` does."""
    from mstar.split.for_run import split_for
    out: Future = Future()

    def work() -> None:
        try:
            out.set_result(split_for(cfg, task))
        except BaseException as exc:  # handed to the run, which raises it where it would have
            out.set_exception(exc)
    threading.Thread(target=work, name="split-ahead", daemon=True).start()
    return out


def _warm_sandbox(cfg) -> None:
    """The sandbox's fork server starts while the preflight and the split run, not when the first
    seed asks for a worker (sandbox.engine.launchers.warm_default_launcher). Not for a Ray run:
    its evaluations start their workers on the cluster."""
    if cfg.evolution.executor != "ray":
        from sandbox.engine.launchers import warm_default_launcher
        warm_default_launcher()


def _run(cfg, task, store, router, ns, on_event, trackers, split: Future):
    from mstar.library.wiring import attach_store, live_display, seed_ids
    from mstar.loop import Evolution
    from mstar.run.live_spend import both
    from mstar.run.progress import ProgressPrinter
    from mstar.run.projection import for_run

    live = live_display(router, ns.quiet)
    lost = attach_store(router, store, live)
    printing.header(store, task, router, cfg, quiet=ns.quiet)
    progress = ProgressPrinter(cfg.evolution.iterations, ns.quiet, ids=seed_ids(cfg),
                               patience=cfg.evolution.patience)
    evo = Evolution(cfg, task, router, store, progress=progress, split=split.result())
    progress.projection = for_run(router, cfg, task, evo)
    progress = both(progress, printing.live_spend(router, cfg, task, evo, quiet=ns.quiet))
    if live is not None:
        progress = both(live.pause, progress)
    trackers = _started(trackers, cfg, store)
    evo.progress = both(progress, *listeners(on_event, trackers))
    printing.split_line(evo, task)
    summary = None
    try:
        summary = evo.run()
    finally:
        if live is not None:
            live.stop()
        router.close()
        for tracker in trackers:
            _guarded(f"{tracker.name} (at the end)", lambda _, t=tracker: t.finish(store, summary))(None)
    printing.done(summary, store.root, router, lost, cli=_is_cli(ns))
    return summary


def _started(trackers: list, cfg, store) -> list:
    """The trackers that could start; one that cannot (its server refuses us) is named on stderr
    and left out: the run is the work, the tracker a view of it."""
    from mstar.trackers import TrackerError
    out = []
    for tracker in trackers:
        try:
            tracker.start(cfg, store)
            out.append(tracker)
        except TrackerError as exc:
            print(f"mstar: warning: {exc}; the run goes on without {tracker.name}", file=sys.stderr, flush=True)
    return out


def listeners(on_event: Callable | None, trackers: list) -> list[Callable]:
    """The caller's callback and the trackers, each guarded: one that raises is reported once on
    stderr and called again for the next event; the run goes on (its events are on disk anyway)."""
    out = []
    for name, fn in ([("on_event", on_event)] if on_event else []) + [(t.name, t.on_event) for t in trackers]:
        out.append(_guarded(name, fn))
    return out


def _guarded(name: str, fn: Callable) -> Callable:
    warned = []

    def call(ev) -> None:
        try:
            fn(ev)
        except Exception as exc:   # the caller's code: the run must not die of a display error
            if not warned:
                warned.append(exc)
                print(f"mstar: warning: {name} raised {type(exc).__name__}: {exc} (the run goes on)",
                      file=sys.stderr, flush=True)
    return call


def _is_cli(ns) -> bool:
    return getattr(ns, "_cli", False)


# ------------------------------------------------------------------ resume
def resume_folder(store: RunStore, *, task_obj=None, cli: bool, quiet: bool = False, max_usd=None,
                  max_tokens=None, iterations=None, no_preflight: bool = False, on_event=None):
    """Continue a stopped run (see mstar/run/resume.py); returns the RunSummary, or None when the
    run had already finished. The caller has checked the folder and holds its lock."""
    with RunGuard(cli=cli) as guard:
        guard.store = store
        out = guard.run(lambda: _resume(store, task_obj, cli=cli, quiet=quiet, max_usd=max_usd,
                                        max_tokens=max_tokens, iterations=iterations,
                                        no_preflight=no_preflight, on_event=on_event))
    if isinstance(out, int):
        raise SetupError("", out)
    return out


def _resume(store, task_obj, *, cli, quiet, max_usd, max_tokens, iterations, no_preflight, on_event):
    from mstar.library.resuming import iteration_costs, prepare_resume, resume_run, start_resume
    from mstar.library.wiring import attach_store, live_display, make_router, seed_ids
    from mstar.run import events as ev_types
    from mstar.run.live_spend import both
    from mstar.run.progress import ProgressPrinter
    from mstar.run.resume import prior_spend

    resumable = prepare_resume(store, task_obj=task_obj, max_usd=max_usd, max_tokens=max_tokens,
                               iterations=iterations, cli=cli)
    if resumable is None:
        return None
    state, cfg = resumable.state, resumable.config
    _warm_sandbox(cfg)
    checker = None
    if not no_preflight:
        checker = make_router(cfg)  # its own router: its calls go to the folder before the run's
        from mstar.library.prechecks import preflight
        code = preflight(checker, quiet=quiet)
        if code is not None:   # refused like every other check: the folder is left as it was
            checker.close()
            raise SetupError("", code)
    try:
        start_resume(store, resumable)
        if checker is not None:
            attach_store(checker, store)   # the run's ledger is rebuilt from the folder (preload_usage)
    finally:
        if checker is not None:
            checker.close()
    router = make_router(cfg)
    if checker is not None:   # the preflight's router said "no price for model ..." once already
        router.ledger.unpriced |= checker.ledger.unpriced
    router.ledger.budget.prime(iteration_costs(state.events))
    live = live_display(router, quiet)
    lost = attach_store(router, store, live)
    for line in printing.fit(f"run     {store.root} (resuming: {len(state.seeds_done)}/{len(cfg.seeds)} seeds "
                             f"and {len(state.done)}/{cfg.evolution.iterations} iterations were done)"):
        print(line)
    progress = ProgressPrinter(cfg.evolution.iterations, quiet, first_iteration=state.next_iteration,
                               spend=prior_spend(store), ids=seed_ids(cfg), patience=cfg.evolution.patience)
    for done_event in ev_types.iterations(state.events):   # the stalled count goes on where it was
        progress.stalled.observe(done_event)
    if live is not None:
        progress.before_line = live.pause
    callback = both(progress, *listeners(on_event, []))
    try:
        summary = resume_run(store, resumable, router, progress=callback)
    finally:
        if live is not None:
            live.stop()
        router.close()
    printing.done(summary, store.root, router, lost, cli=cli)
    return summary

"""`mstar resume RUN`: continue a run that stopped before it finished (see mstar/run/resume.py).

A run stopped by its budget goes on only with a larger one for the flag that stopped it (the
spend so far and the cost of its iterations count: a resume never spends past the budget). The
endpoints are checked with one call per role first, as `mstar evolve` does; Ctrl-C, SIGTERM and a
full disk end it with one line (mstar/commands/exits.py). Temp files a killed process left in the
folder are removed."""
from __future__ import annotations

import sys
from dataclasses import replace


def register(sub) -> None:
    p = sub.add_parser("resume", help="continue a crashed, stopped or killed run where it stopped")
    p.add_argument("run", help="run folder, or a run name under --runs-dir")
    p.add_argument("--runs-dir", default="runs", help="folder that holds run folders")
    p.add_argument("--max-usd", type=float, default=None,
                   help="new hard budget in dollars (a run stopped by its budget needs a higher one to go on)")
    p.add_argument("--max-tokens", type=int, default=None, help="new hard budget in billed tokens")
    p.add_argument("--iterations", type=int, default=None,
                   help="new total number of iterations (at least as many as are done already)")
    p.add_argument("--no-preflight", action="store_true",
                   help="skip the one cheap call per LLM role that checks the endpoints first")
    p.add_argument("--quiet", action="store_true", help="print only the final summary")
    p.set_defaults(func=cmd_resume)


def cmd_resume(args) -> int:
    from mstar.commands.exits import RunGuard
    from mstar.run.store import RunFormatError, RunLockedError, RunStore, find_run
    from mstar.run.resume import load_state

    for flag in ("max_usd", "max_tokens"):
        value = getattr(args, flag)
        if value is not None and not value > 0:
            print(f"mstar: --{flag.replace('_', '-')} {value}: give a budget above 0", file=sys.stderr)
            return 2
    try:
        store = RunStore(find_run(args.run, args.runs_dir))
        load_state(store)  # read-only checks first: never lock a folder that is not a run
        store.acquire_lock()
    except (RunFormatError, RunLockedError) as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    try:
        with RunGuard() as guard:
            guard.store = store
            return guard.run(lambda: _resume(store, args))
    except RunFormatError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    finally:
        store.release_lock()


def _resume(store, args) -> int:
    from mstar.commands import load_task_or_report
    from mstar.commands.evolve import exit_code, print_done
    from mstar.commands.prechecks import preflight
    from mstar.commands.wiring import attach_store, live_display, make_router, seed_ids
    from mstar.run import events as ev_types
    from mstar.run.live_spend import cache_line
    from mstar.run.progress import ProgressPrinter
    from mstar.run.resume import load_state, prior_spend, repair_tails, resume_run

    for warning in repair_tails(store):
        print(f"mstar: warning: {warning}", file=sys.stderr)
    store.sweep_temp()  # left by a process killed mid-write; we hold the folder
    state = load_state(store)
    if state.finished:
        print(f"run     {store.root} has already finished; nothing to resume")
        return 0
    cfg = state.config
    stop = state.events[-1] if state.events and isinstance(state.events[-1], ev_types.StoppedEvent) else None
    if stop is not None and stop.kind == "budget":
        problem = budget_problem(stop.reason, cfg.llm, args, store.root)
        if problem:
            print(f"mstar: {problem}", file=sys.stderr)
            return 2
    if args.max_usd is not None or args.max_tokens is not None:
        llm = replace(cfg.llm, max_usd=args.max_usd if args.max_usd is not None else cfg.llm.max_usd,
                      max_tokens=args.max_tokens if args.max_tokens is not None else cfg.llm.max_tokens)
        state.config = cfg = replace(cfg, llm=llm)
        store.write_config(cfg.to_dict())  # the folder says which budget the rest ran under
    if args.iterations is not None:
        done = max(state.done, default=0)
        if args.iterations < max(done, 1):
            print(f"mstar: --iterations {args.iterations}: {done} iteration(s) are done already; "
                  "give that many or more", file=sys.stderr)
            return 2
        state.config = cfg = replace(cfg, evolution=replace(cfg.evolution, iterations=args.iterations))
        store.write_config(cfg.to_dict())
    task = load_task_or_report(cfg.task, cfg.data, theme=getattr(cfg, "theme", None),
                               metric=getattr(cfg, "metric", None), **cfg.task_options)
    if task is None:
        return 2
    if not args.no_preflight:
        checker = make_router(cfg)  # its own router: its calls go to the folder before the run's
        if checker is None:         # ledger is rebuilt from it (mstar.run.resume.preload_usage)
            return 2
        code = preflight(checker, quiet=args.quiet)
        attach_store(checker, store)
        checker.close()
        if code is not None:
            return code
    router = make_router(cfg)
    if router is None:
        return 2
    router.ledger.budget.prime(iteration_costs(state.events))
    live = live_display(router, args.quiet)
    attach_store(router, store, live)
    print(f"run     {store.root} (resuming: {len(state.seeds_done)}/{len(cfg.seeds)} seeds and "
          f"{len(state.done)}/{cfg.evolution.iterations} iterations were done)")
    progress = ProgressPrinter(cfg.evolution.iterations, args.quiet, first_iteration=state.next_iteration,
                               spend=prior_spend(store), ids=seed_ids(cfg), patience=cfg.evolution.patience)
    for done_event in ev_types.iterations(state.events):   # the stalled count goes on where it was
        progress.stalled.observe(done_event)
    if live is not None:
        progress.before_line = live.pause
    try:
        summary = resume_run(store, state, task, router, progress=progress)
    finally:
        if live is not None:
            live.stop()
        router.close()
    print_done(summary, store.root)
    print(f"llm     {router.ledger.spend_line()}")   # the whole run's, as `mstar evolve` ends: the ledger holds it all
    saved = cache_line(router)
    if saved:
        print(saved)
    return exit_code(summary)


def budget_problem(reason: str, llm, args, root) -> str | None:
    """Why a run its budget stopped cannot go on with these flags, or None: only a larger limit
    for the flag that stopped it lets it spend more."""
    from mstar.llm.budget import budget_flag

    flag = budget_flag(reason)
    if flag is None:
        return None
    attr = flag.removeprefix("--").replace("-", "_")
    old, new = getattr(llm, attr), getattr(args, attr)
    if new is not None and (old is None or new > old):
        return None
    shown = "none" if old is None else f"${old:g}" if attr == "max_usd" else f"{old:,}"
    return (f"{root} stopped at its budget ({reason}); it goes on only with a larger {flag} "
            f"(now {shown}): mstar resume {root} {flag} LARGER")


def iteration_costs(events) -> list[tuple[float, int]]:
    """(usd, billed tokens) of each iteration done: a resumed run's budget estimates its next
    iteration from these (mstar.llm.budget.Budget.prime)."""
    from mstar.run import events as ev_types

    out = []
    for ev in ev_types.iterations(events):
        llm = ev.llm or {}
        out.append((float(llm.get("cost_usd") or 0.0),
                    int(llm.get("prompt_tokens") or 0) + int(llm.get("completion_tokens") or 0)))
    return out

"""`mstar resume RUN`: continue a run that stopped before it finished (see mstar/run/resume.py)."""
from __future__ import annotations

import sys
from dataclasses import replace


def register(sub) -> None:
    p = sub.add_parser("resume", help="continue a crashed or killed run where it stopped")
    p.add_argument("run", help="run folder, or a run name under --runs-dir")
    p.add_argument("--runs-dir", default="runs", help="folder that holds run folders")
    p.add_argument("--max-usd", type=float, default=None,
                   help="new hard budget in dollars (a run stopped by its budget needs a higher one to go on)")
    p.add_argument("--max-tokens", type=int, default=None, help="new hard budget in billed tokens")
    p.add_argument("--iterations", type=int, default=None,
                   help="new total number of iterations (at least as many as are done already)")
    p.add_argument("--quiet", action="store_true", help="print only the final summary")
    p.set_defaults(func=cmd_resume)


def cmd_resume(args) -> int:
    from mstar.commands.evolve import exit_code, print_done
    from mstar.llm.router import LLMRouter
    from mstar.llm.types import LLMError
    from mstar.run.progress import ProgressPrinter
    from mstar.run.resume import load_state, prior_spend, repair_tails, resume_run
    from mstar.run.store import RunFormatError, RunLockedError, RunStore, find_run
    from mstar.commands import load_task_or_report

    try:
        store = RunStore(find_run(args.run, args.runs_dir))
        state = load_state(store)  # read-only checks first: never lock a folder that is not a run
        store.acquire_lock()
    except (RunFormatError, RunLockedError) as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    try:
        for warning in repair_tails(store):
            print(f"mstar: warning: {warning}", file=sys.stderr)
        state = load_state(store)
        if state.finished:
            print(f"run     {store.root} has already finished; nothing to resume")
            return 0
        cfg = state.config
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
        try:
            router = LLMRouter.from_config(
                cfg.llm, seed=cfg.evolution.seed,
                on_usage=lambda rec: store.append_jsonl("llm_usage.jsonl", rec.to_dict()),
                on_warning=lambda w: print(f"mstar: warning: {w}", file=sys.stderr, flush=True))
        except LLMError as exc:
            print(f"mstar: {exc}", file=sys.stderr)
            return 2
        print(f"run     {store.root} (resuming: {len(state.seeds_done)}/{len(cfg.seeds)} seeds and "
              f"{len(state.done)}/{cfg.evolution.iterations} iterations were done)")
        progress = ProgressPrinter(cfg.evolution.iterations, args.quiet,
                                   first_iteration=state.next_iteration, spend=prior_spend(store))
        summary = resume_run(store, state, task, router, progress=progress)
        router.close()
        print_done(summary, store.root)
        return exit_code(summary)
    except RunFormatError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    finally:
        store.release_lock()

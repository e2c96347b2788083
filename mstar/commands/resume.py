"""`mstar resume RUN`: continue a run that stopped before it finished (see mstar/run/resume.py).

A thin shell over `mstar.resume` (mstar/library/launch.py, resuming.py), which makes every check
before the folder changes: a run stopped by its budget goes on only with a larger one for the
flag that stopped it; a finished run is not resumed (more --iterations are refused); the
endpoints are checked with one call per role first, as `mstar evolve` does; Ctrl-C, SIGTERM and a full disk end it with
one line (mstar/library/exits.py). Temp files a killed process left in the folder are removed."""
from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("resume", help="continue a crashed, stopped or killed run where it stopped",
                       allow_abbrev=False)
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
    from mstar.library.errors import SetupError
    from mstar.library.launch import resume_folder
    from mstar.library.printing import exit_code
    from mstar.run.resume import load_state
    from mstar.run.store import RunFormatError, RunLockedError, RunStore, find_run

    try:
        store = RunStore(find_run(args.run, args.runs_dir))
        load_state(store)  # read-only checks first: never lock a folder that is not a run
        store.acquire_lock()
    except (RunFormatError, RunLockedError) as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    try:
        summary = resume_folder(store, cli=True, quiet=args.quiet, max_usd=args.max_usd,
                                max_tokens=args.max_tokens, iterations=args.iterations,
                                no_preflight=args.no_preflight)
    except SetupError as exc:
        if str(exc):
            print(f"mstar: {exc}", file=sys.stderr)
        return exc.code
    except RunFormatError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    finally:
        store.release_lock()
    return 0 if summary is None else exit_code(summary)

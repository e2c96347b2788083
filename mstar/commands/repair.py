"""`mstar repair RUN [--dry-run]`: set damaged lines of a run's lineage.jsonl (and llm_usage.jsonl,
resumes.jsonl) aside into `<file>.set-aside`, kept, and say what that loses; then the run can be
inspected and resumed again. The logic is mstar/run/repair.py."""
from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("repair", help="set damaged lines of a run's lineage aside (kept in a side file) and go on")
    p.add_argument("run", help="run folder, or a run name under --runs-dir")
    p.add_argument("--runs-dir", default="runs", help="folder that holds run folders")
    p.add_argument("--dry-run", action="store_true", help="only say what would be set aside and what that loses")
    p.set_defaults(func=cmd_repair)


def cmd_repair(args) -> int:
    from mstar.run import repair
    from mstar.run.store import RunFormatError, RunLockedError, RunStore, find_run
    from sandbox.engine.terminal import terminal_safe

    say = lambda text: print(terminal_safe(text, newlines=False))   # noqa: E731 (lines quote damaged text)
    try:
        root = find_run(args.run, args.runs_dir)
        RunStore(root).read_config()
    except RunFormatError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    store = RunStore(root)
    try:
        if not args.dry_run:
            store.acquire_lock()     # nothing may append to the files while they are rewritten
        found = {f: repair.find_damaged(root, f) for f in repair.FILES}
        damaged = [d for ds in found.values() for d in ds]
        if not damaged:
            say(f"{root}: no damaged line in {', '.join(repair.FILES)}; nothing to repair")
            return 0
        done = repair.finished(root, damaged)
        for d in damaged:
            say(f"{d.file}:{d.line}: {d.problem} -- setting it aside loses {d.loss(done)}")
        for line in repair.orphans(root, damaged, done):
            say(f"  note: {line}")
        if args.dry_run:
            say(f"(dry run: nothing changed; `mstar repair {root}` sets {len(damaged)} line(s) aside)")
            return 0
        for f, ds in found.items():
            if ds:
                side = repair.set_aside(root, f, ds)
                say(f"set aside {len(ds)} line(s) of {f} into {side} (kept; nothing there is ever deleted)")
        say("the run can be read again" + ("" if done else f"; continue it with: mstar resume {root}"))
        return 0
    except RunLockedError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"mstar: cannot repair {root}: {exc}; the damaged files were left as they were", file=sys.stderr)
        return 1
    finally:
        store.release_lock()

"""`mstar memory info STORE` and `mstar memory migrate STORE --program NEW [--out DIR]`: look at a
memory store, and move its memory to a better program (mstar/memory/migrate.py)."""
from __future__ import annotations

import json
import sys


def register(sub) -> None:
    from mstar.commands.llm_flags import add_llm_args
    from mstar.memory.migrate import DEFAULT_WORKERS

    p = sub.add_parser("memory", help="inspect a memory store, or migrate it to another program")
    inner = p.add_subparsers(dest="memory_command", required=True)
    info = inner.add_parser("info", help="a store's program and namespaces (writes per namespace)")
    info.add_argument("store", help="the store folder (as given to `mstar serve --store`)")
    info.add_argument("--json", action="store_true", help="print it as JSON")
    info.set_defaults(func=cmd_info)
    mig = inner.add_parser("migrate", help="re-ingest a store's texts with another program into a new store")
    mig.add_argument("store", help="the store folder to migrate (only read)")
    mig.add_argument("--program", required=True, help="the new program (.py or a built-in name)")
    mig.add_argument("--out", default=None, metavar="DIR",
                     help="the new store (default: STORE-<program name>); an interrupted migration into it resumes")
    mig.add_argument("--workers", type=int, default=DEFAULT_WORKERS, metavar="N",
                     help="extractions asked at once (writes stay in the old order)")
    add_llm_args(mig)
    mig.set_defaults(func=cmd_migrate)


def not_a_store(path: str) -> str | None:
    """Why `path` is no store to read, in one line (open_store's own line is written for `mstar
    serve`, where the cure is to give a program); None when it is one."""
    from pathlib import Path
    root = Path(path)
    if (root / "store.json").is_file():
        return None
    why = "no such folder" if not root.exists() else "it has no store.json"
    return f"{root} is not a memory store ({why}); a store is the folder `mstar serve PROGRAM --store DIR` writes"


def cmd_info(args) -> int:
    from mstar.memory.log import LogError, read_log
    from mstar.memory.store import StoreError, open_store

    problem = not_a_store(args.store)
    if problem:
        print(f"mstar: {problem}", file=sys.stderr)
        return 2
    try:
        folder = open_store(args.store, None, create=False)
        counts = {}
        for ns in folder.namespaces():
            try:
                counts[ns] = len(read_log(folder.log_path(ns)))
            except LogError as exc:
                counts[ns] = f"cannot be read now: {exc}"
    except StoreError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"store": str(folder.root), "program": folder.name, "sha256": folder.sha256,
                          "namespaces": counts}, indent=2))
        return 0
    print(f"store     {folder.root}")
    print(f"program   {folder.name} (sha256 {folder.sha256[:12]})")
    print(f"namespaces {len(counts)}" + ("" if counts else " (nothing remembered yet)"))
    for ns, n in counts.items():
        print(f"  {ns:<24} {n} writes" if isinstance(n, int) else f"  {ns:<24} {n}")
    return 0


def cmd_migrate(args) -> int:
    from mstar.commands.serve import _say
    from mstar.commands.llm_flags import resolve_llm
    from mstar.llm.router import LLMRouter
    from mstar.llm.types import LLMError
    from mstar.memory.migrate import migrate
    from mstar.memory.store import StoreError

    if args.workers < 1:
        print(f"mstar: --workers {args.workers}: give 1 or more", file=sys.stderr)
        return 2
    problem = not_a_store(args.store)
    if problem:
        print(f"mstar: {problem}", file=sys.stderr)
        return 2
    try:
        router = LLMRouter.from_config(resolve_llm(args), on_warning=lambda w: _say(f"mstar: warning: {w}"))
    except (LLMError, ValueError) as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    last = {}

    def progress(namespace: str, done: int, total: int) -> None:
        if done == total or done - last.get(namespace, 0) >= 100:
            last[namespace] = done
            print(f"  {namespace:<24} {done}/{total}", flush=True)

    try:
        report = migrate(args.store, args.program, args.out, llm=router, workers=args.workers, progress=progress,
                         on_warning=lambda w: _say(f"mstar: warning: {w}"))
    except StoreError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("mstar: interrupted; run the same command again to go on where it stopped", file=sys.stderr)
        return 130
    finally:
        router.close()
    resumed = sum(report.resumed.values())
    total = sum(report.namespaces.values())
    print(f"migrated {total} texts in {len(report.namespaces)} namespace(s) to {report.out}"
          + (f" ({resumed} were already there)" if resumed else "")
          + (f"; the new write() raised on {report.write_errors} (kept in its log)" if report.write_errors else ""))
    print(f"serve   mstar serve --store {report.out}")
    return 0

"""`mstar memory info|list|get|forget|export|import|migrate`: look at a memory store, manage
what it holds, and move its memory to a better program (mstar/memory/migrate.py).

list, get and export read the logs (refused while a server holds the namespace: use its tools);
forget erases entries as the server does -- the kept ones replayed with the store's program, which
may ask the toolkit LLM again (mstar/memory/replay.py), so it takes the LLM options -- and `--all`
removes a namespace's files; import remembers an export's texts with the store's program (the LLM
options as for `mstar evolve`)."""
from __future__ import annotations

import json
import sys
from typing import Any


def register(sub) -> None:
    from mstar.commands.llm_flags import add_llm_args
    from mstar.memory.entries import DEFAULT_PAGE, MAX_PAGE
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

    def op(name: str, help: str, func) -> Any:
        q = inner.add_parser(name, help=help)
        q.add_argument("store", help="the store folder")
        q.add_argument("--namespace", "-n", default="default", help="the namespace (default: default)")
        q.set_defaults(func=func)
        return q

    ls = op("list", "a namespace's entries, oldest first (id, time, text)", cmd_list)
    ls.add_argument("--contains", default=None, metavar="TEXT", help="only entries holding TEXT (any case)")
    ls.add_argument("--offset", type=int, default=0, metavar="N", help="skip the first N (of those shown)")
    ls.add_argument("--limit", type=int, default=DEFAULT_PAGE, metavar="N", help=f"at most N (1-{MAX_PAGE})")
    ls.add_argument("--json", action="store_true", help="print the page as JSON (with each entry's item)")
    get = op("get", "one entry, as JSON (its text, item, time)", cmd_get)
    get.add_argument("id", help="the entry's id (from list)")
    fg = op("forget", "erase entries for good: by id, by text, or the whole namespace", cmd_forget)
    how = fg.add_mutually_exclusive_group(required=True)
    how.add_argument("--id", action="append", dest="ids", metavar="ID", help="an entry's id (repeat for more)")
    how.add_argument("--matching", metavar="TEXT", help="every entry holding TEXT (any case); `list --contains` "
                                                        "shows which first")
    how.add_argument("--all", action="store_true", help="the namespace whole (its files and folder)")
    add_llm_args(fg)    # by id or text the kept entries are replayed, and may ask the toolkit LLM again
    ex = op("export", "a namespace's texts as JSON lines (what import takes back)", cmd_export)
    ex.add_argument("--out", default=None, metavar="FILE", help="write here (default: stdout)")
    im = op("import", "remember an export's texts (ids kept: importing twice writes each once)", cmd_import)
    im.add_argument("file", help="the export (JSON lines with \"text\" and \"id\")")
    im.add_argument("--program", default=None, help="the program of a new store (.py or a built-in name)")
    add_llm_args(im)


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


def _fail(message: object) -> int:
    print(f"mstar: {message}", file=sys.stderr)
    return 2


def _namespace_log(args):
    """The log of the namespace asked for (StoreError when the store or the name is wrong)."""
    from mstar.memory.store import check_namespace, open_store
    folder = open_store(args.store, None, create=False)
    return folder.namespaces_dir / check_namespace(args.namespace) / "log.jsonl"


def _records(args) -> list:
    from mstar.memory.log import read_log
    return read_log(_namespace_log(args))


def cmd_list(args) -> int:
    from mstar.memory.entries import page
    from mstar.memory.log import LogError
    from mstar.memory.store import StoreError
    try:
        shown = page(args.namespace, _records(args), args.offset, args.limit, args.contains)
    except (StoreError, LogError) as exc:
        return _fail(exc)
    if args.json:
        print(json.dumps(shown.to_dict(), indent=2, ensure_ascii=False))
        return 0
    for e in shown.entries:
        text = " ".join(e.text.split())
        print(f"{e.id}  {e.at[:19]}  {text[:100] + ('...' if len(text) > 100 else '')}")
    more = f"; next: --offset {shown.next_offset}" if shown.next_offset is not None else ""
    print(f"({len(shown.entries)} of {shown.total}{' matching' if args.contains else ''} entries "
          f"in {args.namespace!r}{more})", file=sys.stderr)
    return 0


def cmd_get(args) -> int:
    from mstar.memory.entries import Entry
    from mstar.memory.log import LogError
    from mstar.memory.store import StoreError
    try:
        found = [r for r in _records(args) if r.entry_id == args.id]
    except (StoreError, LogError) as exc:
        return _fail(exc)
    if not found:
        return _fail(f"namespace {args.namespace!r} holds no entry {args.id!r}")
    print(json.dumps(Entry.of(found[0]).to_dict(), indent=2, ensure_ascii=False))
    return 0


def cmd_forget(args) -> int:
    from mstar.memory import compact
    from mstar.memory.entries import check_needle
    from mstar.memory.log import LogError
    from mstar.memory.store import StoreError, upgrade
    try:
        path = _namespace_log(args)
        if not path.is_file():
            return _fail(f"the store has no namespace {args.namespace!r}")
        if args.all:
            upgrade(path.parent.parent.parent)    # the version this mstar writes
            count = compact.remove_files(path)
            held = f"{count} entries" if count is not None else "its log was damaged"
            print(f"forgot namespace {args.namespace!r} ({held}); its files are gone")
            return 0
        needle = check_needle(args.matching) if args.matching is not None else None
    except (StoreError, LogError, OSError) as exc:
        return _fail(f"{exc}; nothing was forgotten" if isinstance(exc, OSError) else exc)
    return _forget_entries(args, needle)


def _no_toolkit(messages: list) -> str:
    raise RuntimeError("no toolkit LLM was given (pass the LLM options the store is served with, "
                       "or --offline-role toolkit)")


def _forget_entries(args, needle: str | None) -> int:
    """Forget by ids or by text as the server does (mstar/memory/namespace.py): the kept entries
    are replayed with the store's program, and a write() that asks the toolkit LLM something new
    once the forgotten entries are gone asks the live one. Without LLM options that is refused
    rather than answered by the offline backend, whose replies would replace the real ones."""
    from mstar.commands.llm_flags import resolve_llm
    from mstar.commands.serve import _say
    from mstar.llm.router import LLMRouter
    from mstar.llm.types import LLMError
    from mstar.memory.service import MemoryService
    from mstar.memory.store import StoreError
    try:
        router = LLMRouter.from_config(resolve_llm(args), on_warning=lambda w: _say(f"mstar: warning: {w}"))
    except (LLMError, ValueError) as exc:
        return _fail(exc)
    given = any((args.base_url, args.model, args.config, args.offline_role, args.llm_overrides))
    try:
        with MemoryService(args.store, None, llm=router, toolkit_llm=router if given else _no_toolkit,
                           max_open=1, on_warning=lambda w: _say(f"mstar: warning: {w}")) as service:
            done = (service.forget_matching(needle, args.namespace) if needle is not None
                    else service.forget(args.ids, args.namespace))
    except StoreError as exc:
        return _fail(exc)
    finally:
        router.close()
    print(f"forgot {len(done.ids)} entr{'y' if len(done.ids) == 1 else 'ies'} of {args.namespace!r}"
          + (f" ({', '.join(done.ids)})" if done.ids else "")
          + (f"; not there: {', '.join(done.missing)}" if done.missing else ""))
    return 0


def cmd_export(args) -> int:
    from mstar.memory.entries import export_lines, write_export
    from mstar.memory.log import LogError
    from mstar.memory.store import StoreError
    try:
        text = "".join(export_lines(_records(args)))
        if args.out:
            write_export(args.out, text)          # 0600: it holds every raw text
        else:
            sys.stdout.write(text)
    except (StoreError, LogError, OSError) as exc:
        return _fail(exc)
    if args.out:
        print(f"exported {text.count(chr(10))} entries of {args.namespace!r} to {args.out}", file=sys.stderr)
    return 0


def cmd_import(args) -> int:
    from mstar.commands.llm_flags import resolve_llm
    from mstar.commands.serve import _say
    from mstar.llm.router import LLMRouter
    from mstar.llm.types import LLMError
    from mstar.memory.entries import read_export
    from mstar.memory.service import MemoryService
    from mstar.memory.store import StoreError
    try:
        pairs = read_export(args.file)
        router = LLMRouter.from_config(resolve_llm(args), on_warning=lambda w: _say(f"mstar: warning: {w}"))
    except (StoreError, LLMError, ValueError) as exc:
        return _fail(exc)
    done = []
    try:
        with MemoryService(args.store, args.program, llm=router, max_open=1, idle_close_s=None,
                           on_warning=lambda w: _say(f"mstar: warning: {w}")) as service:
            for text, ident in pairs:
                done.append(service.remember(text, args.namespace, id=ident))
    except StoreError as exc:
        return _fail(f"{exc} ({len(done)} of {len(pairs)} texts are in; run the same command again to go on)")
    finally:
        router.close()
    again = sum(r.repeated for r in done)
    print(f"imported {len(done) - again} texts into {args.namespace!r}" + (f" ({again} were already there)" if again else ""))
    return 0

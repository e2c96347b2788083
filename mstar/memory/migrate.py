"""Move a memory to a better program: re-ingest a store's raw texts into a new store.

The old store's logs keep every text that was remembered, in order. Migration hands each one to
the new program as if it were remembered today: the task LLM extracts a KnowledgeItem with the
new program's instructions and schema (the old items fit the old schema only), the new program's
write() runs, and the new store logs it. Extractions run `workers` at a time; writes go in the
old order, namespace by namespace. The old store is only read (and refused while a process
holds one of its namespaces open, so nothing is missed).

Interrupted (Ctrl-C, a crash, an endpoint outage), it resumes: a namespace of the new store
that already holds the first k texts of the old one goes on from text k+1, so no extraction
already paid for is asked again. A text whose extraction fails (the endpoint is down, the reply
holds no item) stops the migration there with one line naming it: it is never written as an
empty item, and the same command goes on from it. Entries keep their ids.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from mstar.memory.log import LogError, LogRecord, read_log
from mstar.memory.store import StoreError, open_store

DEFAULT_WORKERS = 8


@dataclass
class Migrated:
    out: Path
    namespaces: dict[str, int] = field(default_factory=dict)   # namespace -> texts in the new store
    resumed: dict[str, int] = field(default_factory=dict)      # namespace -> texts found already there
    write_errors: int = 0                                      # new write() raised (logged all the same)


def default_out(store: Path, program: str | Path) -> Path:
    return store.with_name(f"{store.name}-{Path(str(program)).stem}")


def migrate(store: str | Path, program: str | Path, out: str | Path | None = None, *, llm: Any = "offline",
            toolkit_llm: Any = None, model: str | None = None, workers: int = DEFAULT_WORKERS,
            progress: Callable[[str, int, int], None] | None = None,
            on_warning: Callable[[str], None] | None = None, **service_kwargs: Any) -> Migrated:
    """Re-ingest every namespace of `store` with `program` into `out` (default STORE-<program>).
    `progress(namespace, done, total)` is called after each text. Raises StoreError (one line)."""
    src = open_store(store, None, create=False)
    out = Path(out) if out is not None else default_out(Path(store), program)
    if out.resolve() == src.root.resolve():
        raise StoreError("the migrated memory needs a store of its own: give --out another folder")
    records: dict[str, list[LogRecord]] = {}
    for namespace in src.namespaces():
        try:
            records[namespace] = read_log(src.log_path(namespace))
        except LogError as exc:
            raise StoreError(f"namespace {namespace!r} of {src.root}: {exc}") from None
    from mstar.memory.service import MemoryService   # (imported here: `mstar --help` reads DEFAULT_WORKERS)

    report = Migrated(out)
    progress = progress or (lambda namespace, done, total: None)
    with MemoryService(out, program, llm=llm, toolkit_llm=toolkit_llm, model=model, max_open=1,
                       idle_close_s=None, on_warning=on_warning, **service_kwargs) as dst, \
            ThreadPoolExecutor(max(1, workers), thread_name_prefix="migrate-extract") as pool:
        for namespace, recs in records.items():
            old = [rec.text for rec in recs]
            with dst.pool.lease(namespace) as ns:
                done = ns.writes
                have = [rec.text for rec in ns.log.records] if ns.log is not None else []
                if done > len(old) or have != old[:done]:
                    raise StoreError(f"{out} already holds other texts in namespace {namespace!r}; "
                                     "choose another --out")
                report.resumed[namespace] = done
                todo = recs[done:]
                extractions = [pool.submit(ns.extract, rec.text) for rec in todo]
                try:
                    for i, (rec, fut) in enumerate(zip(todo, extractions), done + 1):
                        try:
                            extracted = fut.result()
                        except StoreError as exc:
                            raise StoreError(f"text {i} of {len(old)} of namespace {namespace!r} (entry {rec.entry_id}) "
                                             f"could not be migrated: {exc}; the {i - 1} before it are in {out}: run "
                                             "the same command again to go on from it") from None
                        result = ns.commit(rec.text, extracted, id=rec.entry_id)
                        report.write_errors += result.error is not None
                        progress(namespace, i, len(old))
                finally:
                    for fut in extractions:
                        fut.cancel()
                report.namespaces[namespace] = ns.writes
    return report

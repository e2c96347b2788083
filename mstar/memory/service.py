"""A store in use: its program, its namespaces, the LLM roles -- what the API and the server share.

`MemoryService(store, program, llm=...)` checks the program once (its gates and __init__, in a
throwaway worker: a program that fails them is refused before a store is made for it), opens or
makes the store for it, and serves `remember` / `recall` on any namespace through a bounded pool
of open namespaces (mstar.memory.pool). Looking does not make a namespace: a recall of one with
no log is answered by a worker with nothing written to it, and a namespace made for a write that
failed is removed again. Namespaces are closed when idle only with `idle_close_s` (the server's
--idle-close). `StoredMemory` is the one-namespace handle that `MemoryProgram.open` returns: the
same calls as `MemoryProgram` (ingest, ask, ask_detailed), kept; it holds its namespaces, and
their locks, until it is closed (no idle closing; with more than `max_open` namespaces through
`other()`, the least recently used idle one is closed and its lock given up until asked again).

LLM roles: `llm` serves the task agent (extraction, query, answer) and, unless `toolkit_llm` is
given, the programs' toolkit calls -- anything `MemoryProgram` takes (a callable, an OpenAI client
with `model=`, an LLMRouter, an LLMConfig as `mstar evolve` resolves it, "offline").
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable

from mstar.evaluation.read_state import read_changes_state
from mstar.memory import entries as E
from mstar.memory.entries import Entry, Page
from mstar.memory.namespace import Namespace, Remembered, Reopen
from mstar.memory.sandboxed import Answer, MemoryProgramError, SandboxedProgram, as_router
from mstar.memory.pool import DEFAULT_MAX_OPEN, NamespacePool
from mstar.memory.store import DEFAULT_NAMESPACE, StoreError, check_namespace, open_store
from sandbox.engine.session import SandboxError


def _program(program: str | Path | None) -> tuple[str, str] | None:
    """(name, source) of a program file or built-in name; None for None."""
    if program is None:
        return None
    from mstar.program.sources import load_program_source
    try:
        return load_program_source(str(program))
    except (ValueError, FileNotFoundError, OSError, UnicodeDecodeError) as exc:
        raise StoreError(str(exc)) from None


@dataclass
class Forgotten:
    namespace: str
    ids: list[str] = field(default_factory=list)        # the entries erased
    missing: list[str] = field(default_factory=list)    # ids asked for that the namespace does not hold

    def to_dict(self) -> dict:
        return {"namespace": self.namespace, "forgotten": self.ids, "missing": self.missing}


class MemoryService:
    def __init__(self, store: str | Path, program: str | Path | None = None, *, llm: Any = "offline",
                 toolkit_llm: Any = None, model: str | None = None, sandbox=None, limits=None,
                 max_open: int = DEFAULT_MAX_OPEN, idle_close_s: float | None = None,
                 on_warning: Callable[[str], None] | None = None) -> None:
        given = _program(program)
        source = given[1] if given else open_store(store, None, create=False).source
        self.llm = as_router(llm)
        self.toolkit_llm = as_router(toolkit_llm) if toolkit_llm is not None else self.llm
        self._owns_router = self.llm is not llm
        self._model, self._sandbox, self._limits = model, sandbox, limits
        self._warn = on_warning or (lambda message: None)
        self.info = self._check_program(source, given[0] if given else "program")
        self.folder = open_store(store, source, given[0] if given else "program")
        self.pool = NamespacePool(self._open_namespace, max_open=max_open, idle_close_s=idle_close_s)
        self._blank: SandboxedProgram | None = None     # answers recalls of namespaces that have no log
        self._blank_lock = threading.Lock()

    def _check_program(self, source: str, name: str):
        """The program's load info (instructions, schemas), from a worker that is closed at once."""
        try:
            probe = SandboxedProgram(source, llm=self.llm, toolkit_llm=self.toolkit_llm, model=self._model,
                                  sandbox=self._sandbox, limits=self._limits, name=name)
        except SandboxError as exc:
            verdict = exc.verdict
            raise StoreError(f"program {name!r} cannot be served: it fails the sandbox's {verdict.stage} gate "
                             f"({verdict.rule}): {' '.join(str(verdict.message).split())[:300]}") from None
        except MemoryProgramError as exc:
            raise StoreError(str(exc)) from None
        probe.close()
        return probe.info

    def _namespace(self, name: str) -> Namespace:
        return Namespace(self.folder, name, task_llm=self.llm, toolkit_llm=self.toolkit_llm, model=self._model,
                         sandbox=self._sandbox, limits=self._limits, on_warning=self._warn,
                         on_owner_thread=self.pool.on_thread)

    def _open_namespace(self, name: str) -> Namespace:
        return self._namespace(name).open()

    # ------------------------------------------------------------------ ops

    def remember(self, text: str, namespace: str = DEFAULT_NAMESPACE, id: str | None = None) -> Remembered:
        """Extract, write() and log `text`. With `id`: a retry of a write already logged under it
        returns that write's acknowledgement (`repeated`) and writes nothing."""
        made = not self._exists(namespace)
        try:
            return self._with(namespace, lambda ns: ns.remember(text, id=id))
        except StoreError:
            if made:       # the namespace was made for this write, which left nothing in it
                self._drop_if_empty(namespace)
            raise

    def _drop_if_empty(self, namespace: str) -> None:
        if not self._exists(namespace):
            return
        try:
            self._with(namespace, lambda ns: ns.erase(only_if_empty=True))
        except StoreError:
            pass           # it cannot be opened, or a write went in meanwhile: the caller's error stands

    def recall(self, question: str, namespace: str = DEFAULT_NAMESPACE, answer: bool = False) -> Answer:
        """The program's read() for `question`. A namespace with no log (never written, or forgotten
        whole) is answered by a worker with nothing written to it, and is not made."""
        if not self._exists(namespace):
            return self._recall_blank(question, namespace, answer)
        return self._with(namespace, lambda ns: ns.recall(question, answer=answer))

    def _recall_blank(self, question: str, namespace: str, answer: bool) -> Answer:
        ns = self._namespace(namespace)                      # never opened: no log, no folder
        if read_changes_state(self.folder.source):
            # Its read() changes its state: a shared worker would carry one namespace's questions
            # into another's answers, so this recall gets a worker of its own.
            ns.memory = self.pool.on_thread(lambda: ns.build([])[0])
            try:
                return ns.recall(question, answer=answer)
            finally:
                self.pool.on_thread(ns.memory.close)
        with self._blank_lock:
            if self._blank is None or not self._blank.alive:
                if self._blank is not None:
                    self.pool.on_thread(self._blank.close)
                self._blank = self.pool.on_thread(lambda: ns.build([])[0])
            ns.memory = self._blank
        return ns.recall(question, answer=answer)

    def entries(self, namespace: str = DEFAULT_NAMESPACE, offset: int = 0, limit: int = E.DEFAULT_PAGE,
                contains: str | None = None) -> Page:
        """A page of the namespace's entries in log order (`contains`: only those holding that text)."""
        return E.page(namespace, self._records(namespace), offset, limit, contains)

    def entry(self, id: str, namespace: str = DEFAULT_NAMESPACE) -> Entry:
        E.check_id(id)
        for rec in self._records(namespace):
            if rec.entry_id == id:
                return Entry.of(rec)
        raise StoreError(f"namespace {namespace!r} holds no entry {id!r}")

    def forget(self, ids: list[str] | str, namespace: str = DEFAULT_NAMESPACE) -> Forgotten:
        """Erase the entries with these ids (mstar.memory.compact); ids it does not hold are `missing`."""
        wanted = [ids] if isinstance(ids, str) else list(ids) if isinstance(ids, (list, tuple)) else None
        if not wanted:
            raise StoreError("forget needs the ids of the entries to forget (a non-empty list)")
        wanted = [E.check_id(i) for i in wanted]
        chosen = set(wanted)
        gone = self._forget(namespace, lambda rec: rec.entry_id in chosen)
        return Forgotten(namespace, gone, [i for i in wanted if i not in set(gone)])

    def forget_matching(self, text: str, namespace: str = DEFAULT_NAMESPACE) -> Forgotten:
        """Erase every entry holding `text` (any case) in its raw text or its KnowledgeItem."""
        needle = E.check_needle(text)
        return Forgotten(namespace, self._forget(namespace, lambda rec: E.matches(rec, needle)))

    def forget_namespace(self, namespace: str = DEFAULT_NAMESPACE) -> int:
        """Erase the namespace whole (its log and folder); returns how many entries it held."""
        if not self._exists(namespace):
            return 0
        try:
            return self._with(namespace, lambda ns: ns.erase())
        except Reopen:
            raise
        except StoreError as exc:         # it cannot be opened (a damaged log): its files go all the same
            from mstar.memory import compact
            from mstar.memory.log import LogError
            try:
                return compact.remove_files(self.folder.log_path(namespace)) or 0
            except (LogError, OSError):
                raise exc from None

    def export(self, namespace: str = DEFAULT_NAMESPACE) -> list[str]:
        """The namespace's entries as JSON lines (mstar.memory.entries: what `import_entries` takes back)."""
        return list(E.export_lines(self._records(namespace)))

    def import_entries(self, pairs: list[tuple[str, str | None]], namespace: str = DEFAULT_NAMESPACE,
                       progress: Callable[[int, int], None] | None = None) -> list[Remembered]:
        """Remember exported (text, id) pairs in order; an id already here is not written again."""
        out = []
        for done, (text, ident) in enumerate(pairs, 1):
            out.append(self.remember(text, namespace, id=ident))
            if progress:
                progress(done, len(pairs))
        return out

    def _exists(self, namespace: str) -> bool:
        return (self.folder.namespaces_dir / check_namespace(namespace) / "log.jsonl").is_file()

    def _records(self, namespace: str) -> list:
        if not self._exists(namespace):
            return []                  # looking does not make a namespace
        return self._with(namespace, lambda ns: ns.records())

    def _forget(self, namespace: str, select: Callable) -> list[str]:
        if not self._exists(namespace):
            return []
        return [rec.entry_id for rec in self._with(namespace, lambda ns: ns.forget(select))]

    def _with(self, namespace: str, op: Callable[[Namespace], Any]) -> Any:
        check_namespace(namespace)
        for attempt in (1, 2, 3):
            with self.pool.lease(namespace) as ns:
                if ns.broken and attempt < 3:
                    continue                  # lost by an earlier request: the pool reopens it now
                try:
                    return op(ns)
                except Reopen:
                    if attempt == 3:
                        raise                 # forgotten or lost while this request waited: ask anew
        raise AssertionError("unreachable")

    def program_info(self) -> dict:
        """What an agent needs to use the memory well: the program's instructions and schemas."""
        return {"program": self.folder.name, "sha256": self.folder.sha256,
                "instructions": dict(self.info.constants),
                "knowledge_item_schema": self.info.knowledge_item_schema, "query_schema": self.info.query_schema}

    def status(self) -> dict:
        return {"store": str(self.folder.root), "program": self.folder.name, "namespaces": self.folder.namespaces(),
                "open": [ns.status() for ns in self.pool.open_namespaces()],
                "max_open": self.pool.max_open}

    def close(self) -> None:
        with self._blank_lock:
            if self._blank is not None:
                self.pool.on_thread(self._blank.close)   # where it was started
                self._blank = None
        self.pool.close()
        if self._owns_router and hasattr(self.llm, "close"):
            self.llm.close()

    def __enter__(self) -> "MemoryService":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class StoredMemory:
    """One namespace of a store, with MemoryProgram's calls (what `MemoryProgram.open` returns)."""

    def __init__(self, service: MemoryService, namespace: str, *, owns_service: bool = True) -> None:
        self.service = service
        self.namespace = check_namespace(namespace)
        self._owns = owns_service

    @classmethod
    def open(cls, path: str | Path | None, *, store: str | Path, namespace: str = DEFAULT_NAMESPACE,
             **kwargs: Any) -> "StoredMemory":
        check_namespace(namespace)
        if "idle_close_s" in kwargs:
            raise StoreError("idle_close_s is the server's (`mstar serve --idle-close`): a handle keeps its "
                             "namespaces, and their locks, until it is closed")
        service = MemoryService(store, path, **kwargs)
        try:
            with service.pool.lease(namespace):   # opened (and replayed) now: errors show here
                pass
        except BaseException:
            service.close()
            raise
        return cls(service, namespace)

    def other(self, namespace: str) -> "StoredMemory":
        """Another namespace of the same store (closed with this one)."""
        return StoredMemory(self.service, namespace, owns_service=False)

    @property
    def constants(self) -> dict[str, str]:
        return dict(self.service.info.constants)

    def ingest(self, text: str, id: str | None = None) -> Remembered:
        """Extract, write() and log `text`; returns once the write is on disk. Raises StoreError
        when nothing could be extracted (the task LLM failed): nothing is written then. With
        `id`, a retry of a write already logged under it returns its acknowledgement."""
        return self.service.remember(text, self.namespace, id=id)

    def entries(self, offset: int = 0, limit: int = E.DEFAULT_PAGE, contains: str | None = None) -> Page:
        return self.service.entries(self.namespace, offset, limit, contains)

    def entry(self, id: str) -> Entry:
        return self.service.entry(id, self.namespace)

    def forget(self, ids: list[str] | str) -> Forgotten:
        return self.service.forget(ids, self.namespace)

    def forget_matching(self, text: str) -> Forgotten:
        return self.service.forget_matching(text, self.namespace)

    def forget_namespace(self) -> int:
        return self.service.forget_namespace(self.namespace)

    def export(self, file: str | Path | IO[str] | None = None) -> str | int:
        """The namespace as JSON lines: returned as text, or written to `file` (returns the count)."""
        lines = self.service.export(self.namespace)
        if file is None:
            return "".join(lines)
        if isinstance(file, (str, Path)):
            E.write_export(file, "".join(lines))
        else:
            file.write("".join(lines))
        return len(lines)

    def import_jsonl(self, source: str | Path | IO[str]) -> list[Remembered]:
        """Remember the texts of an export (ids kept: importing twice writes each entry once)."""
        return self.service.import_entries(E.read_export(source), self.namespace)

    def ask_detailed(self, question: str, answer: bool = True) -> Answer:
        return self.service.recall(question, self.namespace, answer=answer)

    def ask(self, question: str) -> str:
        return self.ask_detailed(question).answer

    def close(self) -> None:
        if self._owns:
            self.service.close()

    def __enter__(self) -> "StoredMemory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

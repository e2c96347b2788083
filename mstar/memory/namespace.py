"""One namespace of a store: its write log and the sandbox worker that holds its knowledge base.

Opening = lock the log, start a fresh worker (mstar.memory.sandboxed, what mstar.api.MemoryProgram
is: the same gates, limits and prompts as during evolution), and replay every logged write into
it, the toolkit LLM answering from the log (mstar.memory.tape). Nothing of the program's state is saved or pickled:
the knowledge base is rebuilt by the program itself from what it was given.

A write (`remember`): the task LLM extracts the KnowledgeItem (outside any lock: extractions of
concurrent writes overlap), then, holding the namespace's write lock, write() runs with its
toolkit replies recorded, the record is appended to the log and fsync'd, and only then does
`remember` return -- the acknowledgement. So the log order is the order writes were applied,
and a write is either in the log whole or was never acknowledged:
  - write() raised, worker alive: its partial effects are in the knowledge base, so it is logged
    (with the error) and replays the same way;
  - write() took the worker down (deadline, crash): not logged; the namespace is `broken` and
    the pool reopens it from its log at the next request;
  - the log append failed (disk full): not acknowledged, the file is cut back, and the worker --
    now ahead of the log -- is discarded the same way.
Reads (`recall`) share the lock with each other and run concurrently under the evaluation's rule
(up to the sandbox's `parallel_reads`; a program whose read() changes its own state has its reads
run one at a time: mstar.evaluation.read_state); they wait for a write in progress. Only the sandbox ops hold the
lock: the task LLM's query, answer and extraction calls wait outside it. Reads are not logged: a
program whose read() changes its knowledge base loses those changes when the namespace reopens.

A write may carry an id (the client's; else the store makes one): one already in the log is
answered with that write's acknowledgement and nothing is written, so a client that lost an
acknowledgement (the server died between the fsync and the reply) can retry safely. An
extraction that gave no item (the task LLM failed) is refused before anything is written.

A forget holds back writes, replays what is left into a new worker (on the pool's thread: workers
die with the thread that started them), asking the live toolkit LLM again wherever the forgotten
entries changed what write() asks it (mstar.memory.replay), writes the log of the rebuilt entries
(mstar.memory.compact) while reads go on against the old worker, then -- holding the lock reads
share -- renames the new log in and swaps the workers: a read sees the memory before or after,
never half. A forget that cannot rebuild (a live toolkit call failed) changes nothing.
Forgetting the whole namespace removes its files; this object is then done, and the pool opens
an empty namespace at the next request.

A replay whose write() fails where the original did not (or the reverse) leaves the namespace
read-only (recall still answers from the writes before it); one that takes the worker down leaves
it unusable until it is closed; both with the error named in every answer. An empty text, or
one too large for the worker, is refused before anything is written; so is a question too large.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, TypeVar

from mstar.evaluation.read_state import read_changes_state
from mstar.memory import compact
from mstar.memory.entries import check_id, new_id
from mstar.memory.sandboxed import Answer, Ingested, MemoryProgramError, SandboxedProgram, _as_llm_fn
from mstar.memory.log import LogError, LogRecord, WriteLog
from mstar.memory.replay import one_line as _one_line, rebuild, replay
from mstar.memory.store import StoreError, StoreFolder
from mstar.memory.tape import ToolkitTape
from sandbox.engine.session import SandboxError

T = TypeVar("T")


class Reopen(StoreError):
    """This namespace object is done (forgotten whole, or its worker lost): ask the pool again."""


@dataclass
class Remembered:
    namespace: str
    seq: int                                      # its place in the namespace's log
    item: dict
    warnings: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    error: str | None = None                      # write() raised; the text is logged all the same
    id: str = ""                                  # the entry's id (the client's, or one the store made)
    repeated: bool = False                        # a retry: this id was already in the log, nothing written


class ReadWriteLock:
    """Many readers or one writer; a waiting writer holds back new readers (no starvation)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._cond:
            while self._writer or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with self._cond:
            self._writers_waiting += 1
            while self._writer or self._readers:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writer = True
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


class Namespace:
    def __init__(self, folder: StoreFolder, name: str, *, task_llm: Any, toolkit_llm: Any,
                 model: str | None = None, sandbox=None, limits=None,
                 on_warning: Callable[[str], None] | None = None,
                 on_owner_thread: Callable[[Callable[[], T]], T] | None = None) -> None:
        self.folder, self.name = folder, name
        # Workers die with the thread that started them: a forget starts its new one there (the pool's).
        self._on_owner = on_owner_thread or (lambda fn: fn())
        self._task_llm, self._model = task_llm, model
        self._toolkit_live = _as_llm_fn(toolkit_llm, "toolkit", model)
        self._sandbox, self._limits = sandbox, limits
        self._warn = on_warning or (lambda message: None)
        self._rw = ReadWriteLock()
        self._writes = threading.Lock()   # one write or forget at a time; reads go on beside a forget's replay
        # The evaluation's rule: a read() that changes the program's state runs alone.
        self._read_turn = threading.Lock() if read_changes_state(folder.source) else contextlib.nullcontext()
        self.log: WriteLog | None = None
        self.memory: SandboxedProgram | None = None
        self.tape = ToolkitTape(self._toolkit_live)
        self.read_only = ""          # why writes are refused (a replay that failed), when they are
        self.broken = ""             # why this worker must be replaced (the pool reopens the namespace)
        self.dead = ""               # why the replay left no worker (the namespace answers with this)
        self.replayed = 0
        self.open_s = 0.0
        self.warnings: list[str] = []

    # ------------------------------------------------------------------ life

    def open(self) -> "Namespace":
        t0 = time.monotonic()
        try:
            self.log = WriteLog(self.folder.log_path(self.name), on_warning=self._note)
            records = self.log.open()
        except (LogError, OSError) as exc:
            self.log = None
            raise StoreError(f"namespace {self.name!r}: {_one_line(exc)}") from None
        try:
            self.memory, (self.replayed, self.read_only, self.dead) = self.build(records)
        except BaseException:
            self.close()      # no worker left running, no log left locked
            raise
        self.open_s = time.monotonic() - t0
        return self

    def _worker(self) -> SandboxedProgram:
        try:
            return SandboxedProgram(self.folder.source, llm=self._task_llm, toolkit_llm=self.tape,
                                    model=self._model, sandbox=self._sandbox, limits=self._limits,
                                    name=self.folder.name)
        except SandboxError as exc:
            raise StoreError(f"program {self.folder.name!r} cannot be loaded: {_one_line(exc)}") from None

    def build(self, records: list[LogRecord]) -> tuple[SandboxedProgram, tuple[int, str, str]]:
        """A fresh worker with `records` replayed into it, and (replayed, read_only, dead)."""
        memory = self._worker()
        try:
            return memory, replay(memory, records, self.tape, name=self.name, note=self._note)
        except BaseException:
            memory.close()
            raise

    def rebuild(self, kept: list[LogRecord]) -> tuple[SandboxedProgram, list[LogRecord]]:
        """A forget's new worker with `kept` re-recorded into it, and the records as rebuilt
        (mstar.memory.replay.rebuild)."""
        memory = self._worker()
        try:
            return memory, rebuild(memory, kept, self.tape, name=self.name)
        except BaseException:
            memory.close()
            raise

    def _note(self, message: str) -> None:
        self.warnings.append(message)
        self._warn(message)

    def close(self) -> None:
        if self.memory is not None:
            self.memory.close()
        if self.log is not None:
            self.log.close()

    # ------------------------------------------------------------------ ops

    @property
    def writes(self) -> int:
        return self.log.count if self.log is not None else 0

    def _usable(self) -> SandboxedProgram:
        if self.dead:
            raise StoreError(f"namespace {self.name!r} cannot be used: {self.dead}")
        if self.broken:
            raise Reopen(f"namespace {self.name!r} is reopening ({self.broken}); ask again")
        assert self.memory is not None
        return self.memory

    def remember(self, text: str, id: str | None = None) -> Remembered:
        if not isinstance(text, str):
            raise StoreError(f"remember() takes a text (str), not {type(text).__name__}")
        if not text.strip():
            raise StoreError(f"namespace {self.name!r}: nothing to remember, the text is empty")
        if id is not None:
            check_id(id)
            earlier = self._earlier(id, text)
            if earlier is not None:
                return earlier          # a retry: answered from the log, no extraction paid again
        self._writable()
        return self.commit(text, self.extract(text), id=id)

    def _earlier(self, id: str, text: str) -> Remembered | None:
        """The acknowledgement of the write logged under `id`, when there is one."""
        assert self.log is not None
        rec = self.log.by_id.get(id)
        if rec is None:
            return None
        if rec.text != text:
            raise StoreError(f"namespace {self.name!r}: id {id!r} is taken by another text (write {rec.seq}, "
                             f"{rec.at}); give a new id for a new text")
        return Remembered(self.name, rec.seq, dict(rec.item), error=rec.error, id=rec.entry_id, repeated=True)

    def extract(self, text: str) -> Ingested:
        """The task LLM's KnowledgeItem for `text` (no lock: extractions overlap; nothing written).
        An extraction that gave no item is refused (StoreError): the memory keeps no empty entry."""
        for attempt in (1, 2):
            memory = self._usable()
            try:
                out = memory.extract(text)
                break
            except MemoryProgramError as exc:
                if attempt == 1 and memory is not self.memory:
                    continue            # a forget replaced the worker meanwhile
                raise self._lost(exc, "") from None
        if out.failed:
            raise StoreError(f"namespace {self.name!r}: nothing was remembered: the task LLM gave no "
                             f"KnowledgeItem ({_one_line(out.failed, 400)})")
        return out

    def commit(self, text: str, extracted: Ingested, id: str | None = None) -> Remembered:
        """write() an extracted item and log it; returns once the record is on disk."""
        with self._writes, self._rw.writing():
            if id is not None and (earlier := self._earlier(id, text)) is not None:
                return earlier                                   # the same id, committed meanwhile
            self._writable()
            memory = self._usable()
            assert self.log is not None
            with self.tape.recording() as replies:
                try:
                    memory.write_extracted(extracted, text)
                except MemoryProgramError as exc:
                    raise self._lost(extracted.error or exc, "; the text was not remembered") from None
                except (ValueError, TypeError) as exc:   # refused before it reached the worker (too large)
                    raise StoreError(f"namespace {self.name!r}: {_one_line(exc)}; the text was not remembered") from None
            rec = LogRecord(seq=self.log.next_seq, text=text, item=extracted.item, toolkit=replies,
                            error=extracted.error, at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
                            id=id if id is not None else new_id())
            try:
                self.log.append(rec)
            except OSError as exc:
                # The worker has the write, the log has not: the worker goes, the log is the memory.
                self.broken = "its log could not be written"
                raise StoreError(f"namespace {self.name!r}: the store could not write its log "
                                 f"({exc.strerror or exc}); the text was not remembered") from None
        return Remembered(self.name, rec.seq, extracted.item, extracted.warnings, extracted.logs, extracted.error,
                          id=rec.entry_id)

    def recall(self, question: str, answer: bool = False) -> Answer:
        if not isinstance(question, str):
            raise StoreError(f"recall() takes a question (str), not {type(question).__name__}")
        for attempt in (1, 2):
            memory = self._usable()
            try:
                result = memory.formulate(question)              # the LLM calls wait outside the lock
                with self._rw.reading(), self._read_turn:
                    self._usable().read_into(result)             # the worker of now: before or after a forget
                return memory.answer_into(result, question) if answer else result
            except (ValueError, TypeError) as exc:   # refused before it reached the worker (too large)
                raise StoreError(f"namespace {self.name!r}: {_one_line(exc)}; nothing was read") from None
            except MemoryProgramError as exc:
                if attempt == 1 and memory is not self.memory:
                    continue
                raise self._lost(exc, "") from None
        raise AssertionError("unreachable")

    def records(self) -> list[LogRecord]:
        """The entries as they are now (a write or forget in progress is not half seen)."""
        with self._rw.reading():
            self._usable_log()
            assert self.log is not None
            return list(self.log.records)

    def _usable_log(self) -> None:
        if self.broken or self.log is None:
            raise Reopen(f"namespace {self.name!r} is reopening ({self.broken or 'closed'}); ask again")

    def forget(self, select: Callable[[LogRecord], bool]) -> list[LogRecord]:
        """Erase the selected entries: a worker is rebuilt from the rest (re-recorded, so no toolkit
        reply written from a forgotten text is kept: mstar.memory.replay), the log is rewritten
        with them (mstar.memory.compact), and the new worker takes over; reads meanwhile answer
        from the old worker, then from the new one. Returns the forgotten records."""
        old = None
        with self._writes:
            self._usable_log()
            log = self.log
            assert log is not None
            gone = [rec for rec in log.records if select(rec)]
            if not gone:
                return []
            kept = [rec for rec in log.records if not select(rec)]
            # Rebuilt first: the kept lines to write are the rebuilt ones (ForgetRefused: unchanged).
            memory, rebuilt = self._on_owner(lambda: self.rebuild(kept))
            try:
                copy = compact.prepare(log, rebuilt)
            except BaseException as exc:
                self._on_owner(memory.close)
                if not isinstance(exc, OSError):
                    raise
                raise StoreError(f"namespace {self.name!r}: forget refused, the compacted log could not be written "
                                 f"({exc.strerror or exc}); nothing was forgotten, the store is unchanged") from None
            with self._rw.writing():
                try:
                    compact.install(log, copy)
                except OSError as exc:
                    self._on_owner(memory.close)
                    if isinstance(exc, compact.NotSynced):    # renamed: the worker is behind the log now
                        self.broken = "its folder could not be synced after a forget"
                        raise Reopen(f"namespace {self.name!r}: the entries were forgotten but the folder could "
                                     f"not be synced ({exc.strerror or exc}); ask again") from None
                    raise StoreError(f"namespace {self.name!r}: forget refused, the compacted log could not "
                                     f"replace the log ({exc.strerror or exc}); nothing was forgotten") from None
                old, self.memory = self.memory, memory
                self.replayed, self.read_only, self.dead = len(rebuilt), "", ""
        if old is not None:
            self._on_owner(old.close)
        return gone

    def erase(self, *, only_if_empty: bool = False) -> int:
        """Forget the namespace whole: its files go; this object is done (the pool drops it, and
        the next request opens an empty namespace). Returns how many entries it held.
        `only_if_empty`: only when it holds none (a namespace made for a write that failed)."""
        with self._writes, self._rw.writing():
            self._usable_log()
            assert self.log is not None
            count = self.log.count
            if only_if_empty and count:
                return count
            compact.remove(self.log)
            self.broken = "it was forgotten"
        return count

    def _writable(self) -> None:
        if self.dead:
            raise StoreError(f"namespace {self.name!r} cannot be used: {self.dead}")
        if self.read_only:
            raise StoreError(f"namespace {self.name!r} is read-only: {self.read_only}")

    def _lost(self, exc: object, what: str) -> StoreError:
        if self.dead:
            return StoreError(f"namespace {self.name!r} cannot be used: {self.dead}")
        self.broken = self.broken or f"its worker is gone: {_one_line(exc, 200)}"
        return StoreError(f"namespace {self.name!r}: the program's worker is gone ({_one_line(exc, 200)}){what}; "
                          "the namespace reopens from its log at the next request")

    def status(self) -> dict:
        return {"namespace": self.name, "writes": self.writes, "replayed": self.replayed,
                "open_s": round(self.open_s, 3), "read_only": self.read_only or None, "unusable": self.dead or None,
                "worker_pid": self.memory.worker_pid if self.memory is not None else None}

"""One namespace's write log: the only durable copy of a memory.

Each acknowledged write is one JSON line (a `LogRecord`: the raw text, the KnowledgeItem
write() received, the toolkit LLM replies it received, whether write() raised, and the entry's
id -- absent from lines written before ids existed, which read as before), appended
with a single write call and fsync'd before `append` returns -- only then is the write
acknowledged. Nothing of the program's state is kept: opening a namespace replays these lines
into a fresh worker (mstar.memory.namespace).

Each line carries a CRC-32 of its own canonical JSON, so a line cut short by a crash (SIGKILL
during the write, power loss before the fsync) is told apart from one with a stray byte:
  - an *unterminated* last line (no newline after it) is what a crash leaves: the newline is the
    last byte of the single write, so the write never completed and was never acknowledged; it is
    dropped with a warning and cut off the file (the next append must not be glued to it);
  - a damaged line that ends with its newline -- the last one or one in the middle -- was written
    whole (and may have been acknowledged): that is damage, not a crash, so the log is refused,
    naming the line, and the file is left as it is.
A failed append (disk full, a file-size limit) cuts the file back to where it was, so the log
never holds a write the caller was told failed.

Seqs rise by one per write; a forget (mstar.memory.compact) removes lines and leaves gaps, so the
rule checked on reading is "each line's seq is above the one before".

The file is held with an exclusive flock while open: one process writes a namespace at a time
(a second server on the same store gets one line saying so).
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from mstar.run.store import json_safe


class LogError(RuntimeError):
    """A log that cannot be used as it is; the message names the file and the problem."""


class LogBusyError(LogError):
    """Another process (or another handle in this one) holds the log."""


@dataclass
class LogRecord:
    seq: int                     # 1, 2, ... in the order the writes were applied
    text: str                    # the raw text, as remembered
    item: dict                   # the KnowledgeItem write() received
    toolkit: list[dict] = field(default_factory=list)  # {"prompt": hash, "reply": str} or {..., "error": str}
    error: str | None = None     # write() raised (its partial effects are part of the memory)
    at: str = ""                 # when it was acknowledged (UTC, ISO 8601)
    id: str | None = None        # the entry's id (the client's, or one the store made); logs written
                                 # before ids existed have none: their entries are `seq-<seq>`

    @property
    def entry_id(self) -> str:
        return self.id if self.id is not None else f"seq-{self.seq}"


def _canonical(body: dict) -> str:
    return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode_record(rec: LogRecord) -> bytes:
    body = json_safe(asdict(rec))
    if body.get("id") is None:   # a record without an id is the line an older mstar wrote
        body.pop("id", None)
    crc = f"{zlib.crc32(_canonical(body).encode('utf-8')):08x}"
    return (_canonical({**body, "crc": crc}) + "\n").encode("utf-8")


def decode_line(line: bytes) -> LogRecord | None:
    """The record on one line (without its newline), or None when the line is damaged."""
    try:
        body = json.loads(line.decode("utf-8"))
        crc = body.pop("crc")
        if not isinstance(body, dict) or f"{zlib.crc32(_canonical(body).encode('utf-8')):08x}" != crc:
            return None
        rec = LogRecord(**body)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    if type(rec.seq) is not int or not isinstance(rec.text, str) or not isinstance(rec.item, dict):
        return None
    return rec


def _follows(records: list[LogRecord], rec: LogRecord) -> bool:
    """Seqs rise by one per write; a forget leaves gaps (mstar.memory.compact), never a step back."""
    return rec.seq > (records[-1].seq if records else 0)


class WriteLog:
    """An open, locked log file. `records` holds what it contained when opened."""

    def __init__(self, path: Path, *, on_warning: Callable[[str], None] | None = None) -> None:
        self.path = Path(path)
        self._warn = on_warning or (lambda message: None)
        self._fd: int | None = None
        self.records: list[LogRecord] = []
        self.size = 0
        self.dropped = ""            # the warning about a torn last line, when there was one
        self.by_id: dict[str, LogRecord] = {}

    def open(self) -> list[LogRecord]:
        """Lock the file (created when missing) and read it; returns the records."""
        fd, created = self._lock()
        try:
            if created:  # the new name must survive a crash too
                fsync_dir(self.path.parent)
            leftover = compact_path(self.path)
            if leftover.exists():     # a forget cut off before its rename: never the log, only its kept part
                leftover.unlink()
                fsync_dir(self.path.parent)
            self.records, self.size = self._read(fd)
            self.by_id = {rec.entry_id: rec for rec in self.records}
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self.records

    def _lock(self) -> tuple[int, bool]:
        """The log's descriptor, locked, and whether it was made now."""
        for _ in range(10):
            created = not self.path.exists()
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise LogBusyError(f"{self.path} is open in another process (or another handle of this one)") from None
            # Between the open and the lock, a forget may have renamed its copy over the path, or the
            # namespace been erased: the lock would then hold a file nobody reads. Open it again.
            mine = os.fstat(fd)
            try:
                now = os.stat(self.path)
            except FileNotFoundError:
                now = None
            if now is not None and (now.st_ino, now.st_dev) == (mine.st_ino, mine.st_dev):
                return fd, created
            os.close(fd)
        raise LogBusyError(f"{self.path} was replaced again and again while opening it (another process is "
                           "forgetting in it)")

    def _read(self, fd: int) -> tuple[list[LogRecord], int]:
        chunks, offset = [], 0
        while chunk := os.pread(fd, 1 << 22, offset):
            chunks.append(chunk)
            offset += len(chunk)
        data = b"".join(chunks)
        records: list[LogRecord] = []
        good = 0                                  # bytes of whole, valid lines
        lines = data.split(b"\n")
        complete, tail = lines[:-1], lines[-1]   # the last element follows the last newline
        for number, line in enumerate(complete, 1):
            rec = decode_line(line)
            if rec is None or not _follows(records, rec):
                raise LogError(damaged(self.path, number, last=number == len(complete) and not tail))
            records.append(rec)
            good += len(line) + 1
        if tail:
            return self._drop_tail(fd, records, good, len(data), f"line {len(complete) + 1} has no end")
        return records, good

    def _drop_tail(self, fd: int, records: list[LogRecord], good: int, size: int, why: str):
        # Only ever for an unterminated last line (see the module docstring).
        self.dropped = (f"{self.path}: dropped a half-written last line ({why}, {size - good} bytes; a write "
                        f"cut off by a crash, never acknowledged); the {len(records)} writes before it are kept")
        self._warn(self.dropped)
        os.ftruncate(fd, good)
        os.fsync(fd)
        return records, good

    def append(self, rec: LogRecord) -> None:
        """Write one record and fsync it. On failure (OSError: disk full, file too large) the file
        is cut back to its previous length and the error is raised: nothing was acknowledged."""
        if self._fd is None:
            raise LogError(f"{self.path} is not open")
        line = encode_record(rec)
        try:
            written = 0
            while written < len(line):   # one call in practice; a short write is finished, not lost
                written += os.pwrite(self._fd, line[written:], self.size + written)
            os.fsync(self._fd)
        except OSError:
            try:
                os.ftruncate(self._fd, self.size)
                os.fsync(self._fd)
            except OSError:
                pass                     # the reader drops a torn last line anyway
            raise
        self.size += len(line)
        self.records.append(rec)
        self.by_id[rec.entry_id] = rec

    @property
    def next_seq(self) -> int:
        return self.records[-1].seq + 1 if self.records else 1

    def adopt(self, fd: int, records: list[LogRecord], size: int) -> None:
        """Take over `fd` (already locked, renamed over this log's path) as the log: a forget's
        compacted file (mstar.memory.compact). The old file's descriptor is closed."""
        old, self._fd = self._fd, fd
        self.records, self.size = list(records), size
        self.by_id = {rec.entry_id: rec for rec in self.records}
        if old is not None:
            os.close(old)

    @property
    def count(self) -> int:
        return len(self.records)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)       # releases the flock
            self._fd = None


def damaged(path: Path, number: int, *, last: bool) -> str:
    """The refusal of a log whose line `number` ends with its newline but does not decode."""
    where = ("it is the last line, but it ends with its newline: it was written whole, so it is damage, "
             "not a write cut off by a crash") if last else "lines follow it (not a crash's torn last line)"
    return f"{path}: line {number} is damaged or out of order; {where}; the log is left as it is"


def read_log(path: Path) -> list[LogRecord]:
    """The records of a log, read without changing it (an unterminated, torn last line is
    skipped, not cut off; a damaged whole line is refused). Refused (LogBusyError) while a
    process holds the log open for writing."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return []
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LogBusyError(f"{path} is open in another process (a server?); stop it first") from None
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read()
    finally:
        os.close(fd)
    records: list[LogRecord] = []
    lines = data.split(b"\n")
    for number, line in enumerate(lines[:-1], 1):
        rec = decode_line(line)
        if rec is None or not _follows(records, rec):
            raise LogError(damaged(path, number, last=number == len(lines) - 1 and not lines[-1]))
        records.append(rec)
    return records


def compact_path(path: Path) -> Path:
    """Where a forget writes the log's compacted copy before renaming it over the log."""
    return path.with_name(path.name + ".compact")


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:  # some file systems cannot sync a directory; the data is synced anyway
        if exc.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)

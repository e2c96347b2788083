"""Forgetting as erasure: a namespace's log rewritten without the forgotten entries.

The memory is what the log replays, so forgetting an entry is removing its line. The log is
never edited in place; a forget
  1. writes the kept lines to `log.jsonl.compact` (locked, fsync'd) -- a full disk or any other
     failure here removes that file and refuses the forget: the log is untouched;
  2. renames it over `log.jsonl` and fsyncs the folder: the one step that makes the forget
     happen. The old file (with the forgotten text) has no name from then on, and its blocks are
     freed when its descriptor closes, right after;
  3. (mstar.memory.namespace) swaps in the worker that rebuilt the kept entries (built before
     step 1, so that the copy holds the entries as rebuilt).
A crash before step 2 leaves the old log and at most a `.compact` leftover, which holds kept
lines only and is deleted when the log is next opened (mstar.memory.log); a crash after it
leaves the new log. Either way every acknowledged entry that was not forgotten is there, and an
acknowledged forget stays done. The kept lines are the entries as the forget's replay rebuilt
them (mstar.memory.replay): same seq, id, time, text and item, so entries keep their ids and seqs
keep rising from the last one; a line's toolkit replies and write() error are the ones of that
replay, and a line whose replay changed neither keeps its bytes.

Forgetting a whole namespace removes its files and folder (the log last but one, the folder
last), then syncs `namespaces/`.
"""
from __future__ import annotations

import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from mstar.memory.log import (LogBusyError, LogError, LogRecord, WriteLog, compact_path, encode_record,
                              fsync_dir)


class NotSynced(OSError):
    """The copy was renamed over the log, but the folder could not be synced after it."""


@dataclass
class Compacted:
    """A written, synced, locked compacted copy of a log, not yet renamed over it."""
    path: Path
    fd: int
    records: list[LogRecord]
    size: int


def prepare(log: WriteLog, kept: list[LogRecord]) -> Compacted:
    """Step 1. Raises OSError (the leftover removed) when the copy cannot be written whole."""
    tmp = compact_path(log.path)
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # the log's lock, once renamed
        data = b"".join(encode_record(rec) for rec in kept)
        written = 0
        while written < len(data):
            written += os.pwrite(fd, data[written:], written)
        os.fsync(fd)
    except BaseException:
        discard(Compacted(tmp, fd, [], 0))
        raise
    return Compacted(tmp, fd, list(kept), len(data))


def discard(copy: Compacted) -> None:
    os.close(copy.fd)
    try:
        copy.path.unlink()
    except FileNotFoundError:
        pass


def install(log: WriteLog, copy: Compacted) -> None:
    """Step 2: the copy becomes the log. A failed rename raises OSError with the log untouched
    (the copy is discarded); once renamed, `log` holds the copy's descriptor and records (and a
    failed folder sync after that raises NotSynced)."""
    try:
        os.rename(copy.path, log.path)
    except BaseException:
        discard(copy)
        raise
    log.adopt(copy.fd, copy.records, copy.size)
    try:
        fsync_dir(log.path.parent)
    except OSError as exc:
        raise NotSynced(exc.errno, exc.strerror) from None


def remove(log: WriteLog) -> None:
    """Forget a namespace whole: its leftover copy, its log, its folder. `log` is closed."""
    folder = log.path.parent
    for path in (compact_path(log.path), log.path):
        try:
            path.unlink()
        except FileNotFoundError:
            pass
    log.close()
    try:
        folder.rmdir()
    except OSError:
        pass                  # something else in it (not ours): the log is gone all the same
    fsync_dir(folder.parent)


def remove_files(path: Path) -> int | None:
    """Forget a namespace no process holds: its files go; returns how many entries it had (None
    when its log was damaged: erasure does not need a readable log). LogBusyError while a
    process holds it."""
    log = WriteLog(path)
    try:
        log.open()
    except LogBusyError:
        raise
    except LogError:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogBusyError(f"{path} is open in another process (a server?); stop it first") from None
        log._fd = fd                 # held, unread: removed all the same
        remove(log)
        return None
    count = log.count
    remove(log)
    return count

"""Scratch directories of workers, and the sweep of those an engine that died left behind.

A worker's HOME/TMPDIR is a fresh directory in the system temp folder, removed when the worker is
ended (`sandbox.engine.launch.WorkerProcess.end`). An engine that is killed (kill -9, OOM, power)
ends nothing: its workers die with it (PR_SET_PDEATHSIG) but their directories stay, one per
worker -- a killed run of 70 evaluations left 70.

So every directory carries its engine's token, `mstar-sbx-<token>-*`, and the engine holds an
flock on `mstar-eng-<token>.lock` for as long as it lives. The kernel drops that lock when the
process dies, however it dies; the first worker an engine starts sweeps every token whose lock
it can take. A lock works across PID namespaces (a pid check would not: an engine in another
container sharing /tmp looks dead from here), and a lock file younger than `_GRACE_S` is left
alone (its engine may not have taken the lock yet).
"""
from __future__ import annotations

import atexit
import fcntl
import glob
import os
import shutil
import tempfile
import threading
import time
import uuid

WORKER_PREFIX = "mstar-sbx-"
SERVER_PREFIX = "mstar-fsrv-"
LOCK_PREFIX = "mstar-eng-"
_GRACE_S = 60.0

_state: dict = {}
_lock = threading.Lock()


def make_dir(prefix: str) -> str:
    """A new empty directory `<prefix><this engine's token>-XXXXXXXX` in the temp folder."""
    return tempfile.mkdtemp(prefix=f"{prefix}{_token()}-")


def _token() -> str:
    with _lock:
        if _state.get("pid") != os.getpid():   # a forked child is an engine of its own
            _state.update(pid=os.getpid(), token=_claim())
        return _state["token"]


def _claim() -> str:
    """This process's token, its lock held until the process ends; sweeps dead engines' first."""
    token = uuid.uuid4().hex[:12]
    path = os.path.join(tempfile.gettempdir(), f"{LOCK_PREFIX}{token}.lock")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return token   # no lock, no sweep: the directories are still removed as workers end
    _state["fd"] = fd   # held open (and locked) for the life of the process
    atexit.register(_release, path, fd, os.getpid())
    sweep(exclude=token)
    return token


def _release(path: str, fd: int, owner: int) -> None:
    if os.getpid() != owner:   # a forked child runs its parent's handlers too: not its lock
        return
    try:
        os.unlink(path)
    except OSError:
        pass
    os.close(fd)


def sweep(exclude: str = "", grace_s: float = _GRACE_S) -> list[str]:
    """Remove the scratch directories of every engine whose lock is free and older than
    `grace_s`; return their tokens."""
    tmp = tempfile.gettempdir()
    swept = []
    for path in glob.glob(os.path.join(tmp, f"{LOCK_PREFIX}*.lock")):
        token = os.path.basename(path)[len(LOCK_PREFIX):-len(".lock")]
        if token == exclude or not _dead(path, grace_s):
            continue
        for prefix in (WORKER_PREFIX, SERVER_PREFIX):
            for leftover in glob.glob(os.path.join(tmp, f"{prefix}{glob.escape(token)}-*")):
                shutil.rmtree(leftover, ignore_errors=True)
        try:
            os.unlink(path)
        except OSError:
            pass
        swept.append(token)
    return swept


def _dead(path: str, grace_s: float) -> bool:
    """Is the lock at `path` free (its engine gone) and old enough to be past its engine's start?"""
    try:
        if time.time() - os.stat(path).st_mtime < grace_s:
            return False
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:   # gone meanwhile, or another user's
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)   # closing drops the lock we may have taken

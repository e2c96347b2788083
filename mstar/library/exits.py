"""How a run ends when it cannot go on: Ctrl-C, SIGTERM, a disk that is full or read-only, an
output pipe whose reader went away (`| head`). One line says what happened and which command
continues the run; temp files of atomic writes are removed. On the command line (`mstar evolve`,
`mstar resume`) that is all, with an exit code; in Python (`mstar.evolve`, `mstar.resume`, a script or a notebook) the same line is printed, the run
is marked stopped, and the exception goes on to the caller: `RunInterrupted` (a
KeyboardInterrupt, with `.path`, the folder to resume) or the disk's OSError.

Everything a run completed is on disk already (mstar/run/store.py), so an interrupt loses at
most the step in flight, which `mstar resume` does again. On the first signal the line is
printed at once, the run's lineage gets a `stopped` event (kind "interrupted"), and the main
thread unwinds; iterations still in flight are given GRACE_S seconds, then the process leaves
(the sandbox workers die with it: PR_SET_PDEATHSIG). A second signal leaves at once. In Python
no handler is installed and the process is never ended: the interpreter's own KeyboardInterrupt
unwinds the run (an iteration in flight finishes first; a second Ctrl-C leaves it behind).
"""
from __future__ import annotations

import errno
import os
import signal
import sys
import threading

from mstar.run import events as ev_types
from mstar.run.console import RESUME_SAID
from mstar.run.store import RunStore

GRACE_S = 3.0
SIGNALS = {signal.SIGINT: ("Ctrl-C", 130), signal.SIGTERM: ("SIGTERM", 143)}
DISK_ERRORS = {
    errno.ENOSPC: "the disk is full: free some space",
    errno.EDQUOT: "the disk quota is used up: free some space",
    errno.EROFS: "the file system is read-only: make it writable",
    errno.EACCES: "no permission to write there: fix the folder's permissions",
    errno.EPERM: "no permission to write there: fix the folder's permissions",
    errno.EIO: "the disk reports an I/O error: check it",
}


class Interrupted(KeyboardInterrupt):
    def __init__(self, signum: int) -> None:
        super().__init__(SIGNALS.get(signum, (f"signal {signum}", 1))[0])
        self.signum = signum


class RunInterrupted(KeyboardInterrupt):
    """A run stopped by Ctrl-C (or SIGTERM) in Python: what was done is saved; `mstar.resume(path)`
    continues it."""

    def __init__(self, message: str, path) -> None:
        super().__init__(message)
        self.path = path


def disk_problem(exc: BaseException) -> str | None:
    """What to do about an OSError that means the run folder cannot be written, or None."""
    return DISK_ERRORS.get(getattr(exc, "errno", None)) if isinstance(exc, OSError) else None


def disk_line(exc: OSError, root, *, resumable: bool) -> str:
    where = exc.filename or root
    name = errno.errorcode.get(exc.errno, str(exc.errno))
    then = f"; then continue with: mstar resume {root}" if resumable else ""
    return f"mstar: cannot write {where}: {exc.strerror} ({name}) -- {disk_problem(exc)}{then}"


class RunGuard:
    """`with RunGuard() as guard: ... guard.store = store; return guard.run(fn)` -- fn's Ctrl-C,
    SIGTERM and disk errors become one line and an exit code (130, 143, 1); with `cli=False` (the
    Python API) the line, the stopped mark, and the exception raised on (see the module doc)."""

    def __init__(self, cli: bool = True) -> None:
        self.cli = cli
        self.store: RunStore | None = None
        self.signum: int | None = None
        self._ended = False
        self._lock = threading.Lock()
        self._saved: dict = {}

    def __enter__(self) -> "RunGuard":
        if self.cli and threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                self._saved[signum] = signal.signal(signum, self._on_signal)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._saved.items():
            signal.signal(signum, handler)
        self._saved.clear()

    # ------------------------------------------------------------ signals
    def _on_signal(self, signum: int, frame) -> None:
        if self.signum is not None:  # a second signal: leave now
            self._leave()
        self.signum = signum
        print(self.line(signum), file=sys.stderr, flush=True)
        timer = threading.Timer(GRACE_S, self._leave)
        timer.daemon = True
        timer.start()
        raise Interrupted(signum)

    def line(self, signum: int) -> str:
        what = SIGNALS.get(signum, (f"signal {signum}", 1))[0]
        if self.store is None:
            return f"mstar: interrupted ({what}) before the run began; no run folder was created"
        how = f"mstar resume {self.store.root}" if self.cli else f"mstar.resume({str(self.store.root)!r})"
        return f"mstar: interrupted ({what}); what was done is saved -- continue with: {how}"

    def _leave(self) -> None:
        code = self.end_interrupted(self.signum or signal.SIGINT)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)

    def end_interrupted(self, signum: int) -> int:
        """Once: a `stopped` event (unless the run had finished) and no temp files of ours."""
        code = SIGNALS.get(signum, ("", 1))[1]
        with self._lock:
            if self._ended or self.store is None:
                return code
            self._ended = True
            try:
                _mark_interrupted(self.store, SIGNALS.get(signum, (f"signal {signum}", 1))[0])
            except (OSError, ValueError):
                pass  # a full disk, a damaged lineage: resume still works from what is there
            self.store.sweep_temp(os.getpid())
        return code

    # ------------------------------------------------------------ the guarded run
    def run(self, fn) -> int:
        try:
            return fn()
        except KeyboardInterrupt as exc:
            signum = getattr(exc, "signum", signal.SIGINT)
            if self.signum is None:  # not raised by our handler (e.g. before it was installed)
                print(self.line(signum), file=sys.stderr, flush=True)
            code = self.end_interrupted(signum)
            if self.cli:
                return code
            where = self.store.root if self.store is not None else None
            raise RunInterrupted(self.line(signum).removeprefix("mstar: "), where) from None
        except BrokenPipeError:
            if not self.cli:      # in Python the caller's own output: its error, not ours to hide
                raise
            # The reader of the output went away (`mstar resume RUN | head`): no crash, an
            # interruption like Ctrl-C -- the run is marked stopped and `mstar resume` goes on.
            discard_stdout()
            with self._lock:
                if self.store is not None and not self._ended:
                    self._ended = True
                    try:
                        _mark_interrupted(self.store, "the reader of its output closed the pipe")
                    except (OSError, ValueError):
                        pass
                    self.store.sweep_temp(os.getpid())
            return PIPE_CLOSED
        except OSError as exc:
            if disk_problem(exc) is None or self.store is None:
                raise
            self.store.sweep_temp(os.getpid())
            print(disk_line(exc, self.store.root, resumable=True), file=sys.stderr, flush=True)
            if not self.cli:
                raise
            return 1


PIPE_CLOSED = 141   # 128 + SIGPIPE: what a shell reports for a program a closed pipe stopped


def discard_stdout() -> None:
    """Whatever is still to be printed goes nowhere, so no later write (nor the interpreter's
    final flush) fails on the closed pipe again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _mark_interrupted(store: RunStore, what: str) -> None:
    records, _ = store.read_jsonl_tolerant("lineage.jsonl")
    evs = [e for e in (ev_types.from_dict(r) for r in records) if e is not None]
    if ev_types.finished(evs):
        return
    done = len(ev_types.iterations(evs))
    store.append_jsonl("lineage.jsonl", ev_types.to_dict(ev_types.StoppedEvent(
        reason=f"interrupted ({what}){RESUME_SAID}", iteration=done, kind="interrupted")))

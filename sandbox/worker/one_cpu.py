"""Each chroma call on one CPU: the calling thread and chromadb's own threads together (issue 43).

chromadb's Python API hands every call to its Rust side, whose tokio worker, blocking pool and
sqlx sqlite thread pass the call among themselves: a one-record add costs ~140 futex and eventfd
wake-ups. Between two CPUs each wake-up may cross to the other core and bring it out of idle,
and that, not the work, was most of the cost (perf: 42% of the samples in the kernel, waking and
switching threads).
Measured on this 2-core machine (TOKIO_WORKER_THREADS=1, as in a worker; 500 calls each, on an
idle host): a one-record add 2.5-3.2 ms -> 1.7-2.1 ms with the threads on one CPU; a top-5
query 1.8-2.0 -> 1.0-1.1 ms. The whole process pinned (`taskset -c 0`) gives the same.

A process pinned for its life would keep the kernel from moving a busy worker off a busy core,
so the pin lasts one call: on the CPU the kernel is running the caller on at that moment, the
caller and chromadb's threads are pinned; afterwards the caller gets its full set back.
chromadb's threads stay where the last call left them -- they only run for a call, and the next
one moves them. No other thread is touched (reads waiting on the LLM, OpenBLAS's).

chromadb's threads are the tokio worker and the sqlite thread it starts with its client, found
by name in /proc/self/task then, before the worker's scratch root hides /proc. No descriptor of
/proc is kept: a directory opened outside the root is a way out of it (tests/test_sandbox_jail.py).
Threads tokio's blocking pool starts later are not in the list; pinning them too gained nothing
measurable (a one-record add 1.9-2.6 ms with them, 2.0-2.3 ms without; a query 1.15 / 0.96 ms).
A thread starts with its creator's CPU set, so the pool's threads mostly start where the worker
thread was put. Where the pinning is refused, calls simply run unpinned.
"""
from __future__ import annotations

import os
from typing import Any, Callable

from sandbox.jail.limits import LayerUnavailable, _libc


# chromadb's Rust threads, by the names their runtimes give them: tokio's worker ("tokio-rt-worker")
# and sqlx's sqlite connection thread ("sqlx-sqlite-worker", cut to 15 characters by the kernel).
CHROMA_THREADS = ("tokio-", "sqlx-")


def chroma_threads() -> list[int]:
    """The thread ids of chromadb's threads in this process, read from /proc now."""
    tids = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().startswith(CHROMA_THREADS):
                    tids.append(int(tid))
        except OSError:
            pass   # a thread that has just ended
    return tids


class OneCpu:
    """`run(fn)`: fn() with the caller and chromadb's threads on the caller's current CPU.
    Made once chromadb's client exists, while /proc is still in view."""

    def __init__(self) -> None:
        self._tids: list[int] = []
        self._last = -1   # the CPU chromadb's threads were last put on: a call there leaves them be
        try:
            self._cpus = os.sched_getaffinity(0)
            self._getcpu = _libc().sched_getcpu
            if len(self._cpus) > 1:   # on one CPU there is nothing to gain
                self._tids = chroma_threads()
        except (AttributeError, OSError, LayerUnavailable):
            self._tids = []

    @property
    def active(self) -> bool:
        return bool(self._tids)

    @property
    def threads(self) -> tuple[int, ...]:
        """The ids of chromadb's threads this pins with each call."""
        return tuple(self._tids)

    def run(self, fn: Callable[[], Any]) -> Any:
        if not self._tids or not self._pin():
            return fn()
        try:
            return fn()
        finally:
            try:
                os.sched_setaffinity(0, self._cpus)
            except OSError:
                pass

    def _pin(self) -> bool:
        cpu = self._getcpu()
        if cpu < 0:
            return False
        here = {cpu}
        try:
            os.sched_setaffinity(0, here)
        except OSError:
            self._tids = []   # refused once, refused always: stop trying
            return False
        if cpu != self._last:   # most calls come from the CPU the last one did
            for tid in self._tids:
                try:
                    os.sched_setaffinity(tid, here)
                except OSError:
                    pass
            self._last = cpu
        return True

"""Threads the evaluations share, and closing workers off the critical path.

Measured on the 2-core machine (a child evaluated with every reply from the response cache, so
what is left is overhead): a third of an evaluation's wall time went to two things that are not
its work. Each evaluation made two thread pools and started up to ~80 threads (`Thread.start`
waits until the new thread runs: milliseconds each on a busy machine), and its last step waited
for its sandbox worker to be killed, reaped and its cgroup removed before the result went back.
Here the threads live for the process and are reused, and a finished worker is closed by one
background thread while the loop goes on with the result.

Bounds stay per evaluation: `Bounded` lets at most `limit` of one evaluation's tasks run at
once (the `workers` setting), whatever other evaluations have in flight.
"""
from __future__ import annotations

import atexit
import queue
import threading
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from typing import Any, Callable

from mstar.llm import scope as llm_scope
from mstar.split.served import return_freed_memory

# Idle threads are reused; new ones start only when every existing one is busy. Large, because a
# task waiting on the role's concurrency holds its thread, and several evaluations share the pool.
_MAX_THREADS = 1024
_pools: dict[str, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def shared_pool(kind: str) -> ThreadPoolExecutor:
    """The process's pool for one kind of task ("start": worker starts; "llm": calls; "case": reads
    and answers). Kept apart so that a case waiting on its calls never holds a thread a call needs,
    and a worker's start never waits behind the calls other evaluations asked first."""
    with _pools_lock:
        pool = _pools.get(kind)
        if pool is None:
            pool = _pools[kind] = ThreadPoolExecutor(_MAX_THREADS, thread_name_prefix=f"eval-{kind}")
        return pool


class Bounded:
    """One evaluation's view of a shared pool: at most `limit` of its tasks run at once; every
    task runs in the submitter's context (its LLM scope included, mstar.llm.scope)."""

    def __init__(self, kind: str, limit: int) -> None:
        self.pool = shared_pool(kind)
        self._slots = threading.BoundedSemaphore(max(1, limit))
        self.futures: list[Future] = []

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        def run() -> Any:
            with self._slots:
                return fn(*args)
        fut = llm_scope.submit(self.pool, run)
        self.futures.append(fut)
        return fut

    def cancel_pending(self) -> None:
        for f in self.futures:
            f.cancel()

    def join(self) -> None:
        """Wait for every task of this evaluation that started: nothing of it runs on after the
        evaluation returns (as when each evaluation owned its pool)."""
        for f in self.futures:
            if not f.cancelled():
                try:
                    f.exception()      # waits; a task's own error is returned, not raised: the caller's concern
                except CancelledError:  # cancelled meanwhile. Nothing broader: Ctrl-C here must reach the run
                    pass


class _Closer:
    """Closes finished sandbox sessions on one background thread, in the order given."""

    def __init__(self) -> None:
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def close_later(self, session) -> None:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="session-closer", daemon=True)
                self._thread.start()
        self._queue.put(session)

    def _run(self) -> None:
        while True:
            session = self._queue.get()
            try:
                session.close()
            except Exception:  # noqa: BLE001 -- a worker that will not die is reaped by its fork server
                pass
            finally:
                # A closed session leaves its evaluation's garbage freed but held by malloc: handed
                # back once the queue is empty (a few ms, on this thread): ~8-25 MB of the engine's
                # PSS on the 30-session LoCoMo workload (bench/bench_run_memory.py).
                if self._queue.qsize() == 0:
                    return_freed_memory()
                self._queue.task_done()

    def drain(self) -> None:
        """Return once every session handed over so far is closed."""
        self._queue.join()


_CLOSER = _Closer()
close_later = _CLOSER.close_later
drain_closes = _CLOSER.drain
atexit.register(drain_closes)   # no worker outlives the engine's own exit

"""The open namespaces of a store: opened on first use, bounded, closed when idle.

Each open namespace is a sandbox worker (tens of MB) and a locked log, so at most `max_open`
are open at once: opening one more first closes the least recently used namespace that no
request is using (its memory stays in its log and comes back on the next request, replayed). A
namespace nobody asked for `idle_close_s` seconds is closed too: the server's --idle-close
(MemoryService has none by default: a Python handle keeps its namespaces and their locks). When every open namespace is
busy, a request for another waits (up to `wait_s`) for one to come free.

Namespaces are opened and closed on one long-lived thread of the pool's own, in the order asked:
with the fallback launcher a worker dies with the thread that started it (sandbox.engine.session),
and request threads (the MCP server's) come and go; and a namespace closed and asked for again
is opened only after its old worker is gone and its log unlocked. (So a long replay -- seconds per
thousand writes, bench/bench_memory.py -- delays the opening of the namespaces asked after it.) A namespace whose worker was lost (`Namespace.broken`) is
closed and opened again -- from its log -- by the next request for it.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING, Callable, Iterator, TypeVar

from mstar.memory.store import StoreError, check_namespace

if TYPE_CHECKING:  # the pool only holds namespaces; the CLI reads its defaults without the sandbox
    from mstar.memory.namespace import Namespace

DEFAULT_MAX_OPEN = 16
DEFAULT_IDLE_CLOSE_S = 900.0
DEFAULT_WAIT_S = 120.0
T = TypeVar("T")


class _Entry:
    def __init__(self) -> None:
        self.ready: Future = Future()     # the open Namespace (or the error that kept it closed)
        self.leases = 0
        self.last_used = time.monotonic()


class NamespacePool:
    def __init__(self, opener: Callable[[str], Namespace], *, max_open: int = DEFAULT_MAX_OPEN,
                 idle_close_s: float | None = DEFAULT_IDLE_CLOSE_S, wait_s: float = DEFAULT_WAIT_S) -> None:
        if max_open < 1:
            raise ValueError(f"max_open must be 1 or more, got {max_open}")
        self._opener = opener
        self.max_open = max_open
        self.idle_close_s = idle_close_s
        self.wait_s = wait_s
        self._entries: OrderedDict[str, _Entry] = OrderedDict()   # least recently used first
        self._cond = threading.Condition()
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="memory-namespaces")
        self._closed = False
        self.opened = self.evicted = 0
        self._reaper = None
        if idle_close_s:
            self._reaper = threading.Thread(target=self._reap, name="memory-idle", daemon=True)
            self._reaper.start()

    @contextmanager
    def lease(self, name: str) -> Iterator[Namespace]:
        """The open namespace `name` (opened, or reopened, when needed), held open meanwhile."""
        check_namespace(name)
        entry = self._take(name)
        try:
            namespace = entry.ready.result()
        except BaseException:
            self._release(name, entry, failed=True)
            raise
        try:
            yield namespace
        finally:
            self._release(name, entry, failed=bool(namespace.broken))

    def _take(self, name: str) -> _Entry:
        deadline = time.monotonic() + self.wait_s
        with self._cond:
            while True:
                if self._closed:
                    raise StoreError("the memory store is closed")
                entry = self._entries.get(name)
                if entry is not None:
                    self._entries.move_to_end(name)
                    entry.leases += 1
                    entry.last_used = time.monotonic()
                    return entry
                if len(self._entries) < self.max_open or self._evict_one():
                    entry = self._entries[name] = _Entry()
                    entry.leases = 1
                    self._thread.submit(self._open, name, entry)
                    self.opened += 1
                    return entry
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StoreError(f"all {self.max_open} open namespaces are busy; namespace {name!r} "
                                     "cannot be opened now (raise --max-open, or try again)")
                self._cond.wait(min(left, 1.0))

    def _open(self, name: str, entry: _Entry) -> None:
        try:
            entry.ready.set_result(self._opener(name))
        except BaseException as exc:  # noqa: BLE001 -- handed to every waiter of this namespace
            entry.ready.set_exception(exc)

    def _release(self, name: str, entry: _Entry, *, failed: bool) -> None:
        with self._cond:
            entry.leases -= 1
            entry.last_used = time.monotonic()
            if failed and self._entries.get(name) is entry:
                del self._entries[name]           # the next request opens it anew (from the log)
            if failed and entry.leases == 0:
                self._close_later(entry)
            elif entry.leases == 0 and self._entries.get(name) is not entry:
                self._close_later(entry)          # evicted or replaced while in use
            self._cond.notify_all()

    def _evict_one(self) -> bool:
        """Close the least recently used idle namespace (caller holds the lock)."""
        for name, entry in self._entries.items():
            if entry.leases == 0 and entry.ready.done():
                del self._entries[name]
                self._close_later(entry)
                self.evicted += 1
                return True
        return False

    def _close_later(self, entry: _Entry) -> None:
        def close() -> None:
            try:
                namespace = entry.ready.result()
            except BaseException:  # noqa: BLE001 -- it never opened: nothing to close
                return
            namespace.close()
        self._thread.submit(close)

    def _reap(self) -> None:
        assert self.idle_close_s
        while True:
            time.sleep(max(0.5, min(self.idle_close_s / 4, 30.0)))
            with self._cond:
                if self._closed:
                    return
                now = time.monotonic()
                for name in [n for n, e in self._entries.items()
                             if e.leases == 0 and e.ready.done() and now - e.last_used > self.idle_close_s]:
                    self._close_later(self._entries.pop(name))
                    self.evicted += 1
                self._cond.notify_all()

    def on_thread(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the pool's own thread and wait: where workers are started and closed (a
        forget's new worker too -- a worker dies with the thread that started it)."""
        if threading.current_thread().name.startswith("memory-namespaces"):
            return fn()
        return self._thread.submit(fn).result()

    def open_namespaces(self) -> list[Namespace]:
        with self._cond:
            entries = list(self._entries.values())
        out = []
        for entry in entries:
            if entry.ready.done() and entry.ready.exception() is None:
                out.append(entry.ready.result())
        return out

    def close(self) -> None:
        """Close every namespace (their memory is in their logs). Idempotent."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            entries = list(self._entries.values())
            self._entries.clear()
            self._cond.notify_all()
        for entry in entries:
            self._close_later(entry)
        self._thread.shutdown(wait=True)

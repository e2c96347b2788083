"""Fair service: a namespace whose program or LLM endpoint is slow queues only its own calls.

The SDK runs a sync tool on anyio's shared pool of 40 threads, so 45 calls stuck in one namespace
(a read() that loops until its deadline, an endpoint that holds its replies) took every thread and
an unrelated namespace's call waited for one. Here a tool call first waits -- on the event loop,
holding no thread -- for one of its namespace's `per_namespace` slots, and only then runs on one
of the server's `threads` (a limiter of its own, not the SDK's). So:
  - one namespace holds at most `per_namespace` threads; its further calls queue behind its own
    calls, in the order they came;
  - the whole server holds at most `threads` threads; `per_namespace` < `threads` (checked), so
    the other namespaces find threads free while fewer than threads / per_namespace namespaces
    are stalled at once.
Inside a namespace the store's own rules still apply (writes in log order, reads concurrent up to
the sandbox's parallel reads: mstar.memory.namespace). A call whose client goes away while it waits
leaves the queue; one already running finishes on its thread (the thread cannot be taken back).
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

T = TypeVar("T")

DEFAULT_PER_NAMESPACE = 8       # the bench's 8 clients on one shared namespace fit (README's figures)
DEFAULT_THREADS = 64


class _Slots:
    def __init__(self, n: int) -> None:
        import anyio
        self.semaphore = anyio.Semaphore(n)
        self.users = 0                          # calls running or waiting (the entry goes at 0)


class FairGate:
    """Runs blocking tool work per namespace on bounded threads. Used from one event loop only."""

    def __init__(self, per_namespace: int = DEFAULT_PER_NAMESPACE, threads: int = DEFAULT_THREADS) -> None:
        check_bounds(per_namespace, threads)
        self.per_namespace, self.threads = per_namespace, threads
        self._slots: dict[str, _Slots] = {}
        self._limiter: Any = None               # made on first use: it belongs to the running event loop

    async def run(self, namespace: str, work: Callable[[], T]) -> T:
        """`work()` on a thread, once `namespace` has a free slot and the server a free thread."""
        import anyio
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.threads)
        slots = self._slots.get(namespace)
        if slots is None:
            slots = self._slots[namespace] = _Slots(self.per_namespace)
        slots.users += 1
        try:
            async with slots.semaphore:
                return await anyio.to_thread.run_sync(work, limiter=self._limiter)
        finally:
            slots.users -= 1
            if not slots.users:
                del self._slots[namespace]

    def status(self) -> dict[str, dict[str, int]]:
        """Per namespace with calls: how many run and how many wait for a slot."""
        out = {}
        for name, slots in self._slots.items():
            running = self.per_namespace - int(slots.semaphore.value)
            out[name] = {"running": running, "waiting": slots.users - running}
        return out


def check_bounds(per_namespace: int, threads: int) -> None:
    """ValueError (one line, in the command's words) unless 1 <= per_namespace < threads."""
    if per_namespace < 1:
        raise ValueError(f"--namespace-calls {per_namespace}: give 1 or more")
    if threads <= per_namespace:
        raise ValueError(f"--threads {threads} must be more than --namespace-calls {per_namespace}: otherwise one "
                         "namespace's stalled calls could take every thread")

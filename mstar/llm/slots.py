"""A role's calls in flight: at most `limit` at once, served by priority.

Why not a plain semaphore: when more calls wait than the endpoint may take, the order in which
they go decides how long an evaluation waits. Every evaluation asks all its extractions and
query formulations at once; a formulation is needed only once the knowledge base is built, but
an extraction gates its write and every write after it. With first-come-first-served, three
seeds asking 3 x (30 + 25) calls through 64 slots put the third seed's extractions behind the
first seeds' formulations, a whole round of latency later (measured: its last extraction came
back after 1.0 s instead of 0.6 s, at 300 ms a call). Here a waiting call goes by its priority:
FIRST (an extraction a write waits for) before NORMAL (formulations, answers, judges, the
toolkit's calls) before LAST (an extraction no write waits for -- the program's write() ignores
its item -- which only its record needs, by the end of the evaluation) before IDLE (work the run
needs only at its end: a test evaluation started early, mstar/final/held_out.py); within a priority,
calls go in the order they asked.

A freed slot is handed to the chosen waiter directly: a thread arriving meanwhile cannot take it
(plain semaphores let it barge), so the order above holds under load.
"""
from __future__ import annotations

import collections
import contextlib
import heapq
import itertools
import threading
import time


FIRST, NORMAL, LAST, IDLE = 0, 1, 2, 3   # a call's priority (lower goes first)
PRIORITIES = (FIRST, NORMAL, LAST, IDLE)
HOLDS_KEPT = 256     # background calls whose hold times a lending is priced on (the latest)


class Slots:
    """`with slots.held(priority): ...` runs the block holding one of `limit` slots."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a role needs at least one call in flight, got {limit}")
        self.limit = limit
        self._free = limit
        self._lock = threading.Lock()
        self._waiting: list[tuple[int, int, threading.Event]] = []   # heap of (priority, arrival, wake-up)
        self._arrivals = itertools.count()

    def acquire(self, priority: int = NORMAL) -> None:
        if priority not in PRIORITIES:
            raise ValueError(f"unknown call priority {priority!r}")
        with self._lock:
            if self._free > 0 and not self._waiting:
                self._free -= 1
                return
            entry = (priority, next(self._arrivals), threading.Event())
            heapq.heappush(self._waiting, entry)
        try:
            entry[2].wait()   # set by release(), which has taken the slot for us
        except BaseException:   # interrupted while waiting (Ctrl-C in the main thread): give the place up
            with self._lock:
                if entry in self._waiting:
                    self._waiting.remove(entry)
                    heapq.heapify(self._waiting)
                    raise
            self.release()      # the slot was handed over just as we were interrupted
            raise

    def release(self) -> None:
        with self._lock:
            if self._free < 0:          # held above a lowered limit (narrow): this slot is not handed on
                self._free += 1
            elif self._waiting:
                heapq.heappop(self._waiting)[2].set()
            elif self._free < self.limit:
                self._free += 1
            else:
                raise RuntimeError("released a slot that was not held")

    def held(self, priority: int = NORMAL) -> "_Held":
        return _Held(self, priority)

    def widen(self, limit: int) -> None:
        """Raise the limit to `limit` (never lower it); the new slots go to waiting calls at once."""
        with self._lock:
            if limit <= self.limit:
                return
            self._free += limit - self.limit
            self.limit = limit
            while self._free > 0 and self._waiting:
                self._free -= 1
                heapq.heappop(self._waiting)[2].set()

    def narrow(self, limit: int) -> None:
        """Lower the limit to `limit`: calls holding a slot keep it, and no slot is handed on until
        fewer than `limit` are held."""
        with self._lock:
            if limit < 1 or limit >= self.limit:
                return
            self._free -= self.limit - limit
            self.limit = limit

    def waiting(self) -> int:
        with self._lock:
            return len(self._waiting)


class _Held:
    __slots__ = ("_slots", "_priority")

    def __init__(self, slots: Slots, priority: int) -> None:
        self._slots, self._priority = slots, priority

    def __enter__(self) -> None:
        self._slots.acquire(self._priority)

    def __exit__(self, *exc: object) -> None:
        self._slots.release()


class BackgroundShare:
    """Background work's part of the run's cap (mstar/llm/scope.py): at most half of it, so that
    the calls the run waits on, which come in bursts (25 formulations at once), find slots free
    instead of waiting a whole reply for them. Within that half, a waiting call goes by its
    priority: a guess the next iteration may wait on (LAST) before a test started early (IDLE).

    IDLE work once had a quarter of its own, so that the guesses kept room (with half for both and
    every guess sent, an iteration waited 5.7 s for its guess at 2,000 ms). Since guesses are sent
    only when they pay (mstar/iteration/guesses.py: 1-2 a run at 2,000 ms), that quarter left the
    early test ~280 calls through 16 slots: it ended ~6 s after the iterations, the final phase's
    main wait. Measured on bench/bench_lead.py's 2,000 ms cells: the final phase 9.6 -> 4.5 s (seed
    wins, 3 iterations) and 7.7 -> 2.3 s (child wins), the iterations as before."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.any = Slots(max(1, cap // 2))
        self._lock = threading.Lock()
        self._lent = 0           # lendings open now (lent)
        self._wide = False       # widen() was called: the whole cap for good
        self._holds: collections.deque[float] = collections.deque(maxlen=HOLDS_KEPT)

    def widen(self) -> None:
        """From now on background work may hold the whole cap, still behind every call the run
        waits on: once the iterations are over (mstar/final/held_out.py, beside_the_race), when the
        run's own calls are the race's batches, a few dozen calls at a time, and no guess is left
        to keep room for."""
        with self._lock:
            self._wide = True
            self.any.widen(self.cap)

    @contextlib.contextmanager
    def lent(self, seconds: float):
        """For the next `seconds`, or until the block ends if that is sooner, background work may
        take every slot of the cap but one, the one the block's own call is about to take; a call
        that took one keeps it until its reply. The caller picks `seconds` so that such a call is
        back before the run's next burst of calls needs the room (mstar/iteration/lending.py: while
        the run waits on the reflector, its only call)."""
        if seconds <= 0 or self.cap < 3:
            yield
            return
        with self._lock:
            self._lent += 1
            self.any.widen(self.cap - 1)
        ended = threading.Event()

        def end() -> None:
            with self._lock:
                if ended.is_set():
                    return
                ended.set()
                self._lent -= 1
                if self._lent == 0 and not self._wide:
                    self.any.narrow(max(1, self.cap // 2))

        timer = threading.Timer(seconds, end)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
            end()

    def held(self, priority: int | None):
        """The context a call of this priority (None: not background work) is sent in."""
        if priority is None:            # every call the run waits on: nothing to hold here
            return contextlib.nullcontext()
        return self._timed(priority)

    @contextlib.contextmanager
    def _timed(self, priority: int):
        with self.any.held(priority):
            t0 = time.monotonic()
            try:
                yield
            finally:
                with self._lock:
                    self._holds.append(time.monotonic() - t0)

    def hold_seconds(self) -> float | None:
        """How long a background call holds its slot: the upper quartile of the last calls' holds
        (its reply, and any wait for the cap or a rate limit after it took the slot); None before any."""
        with self._lock:
            holds = sorted(self._holds)
        return holds[(3 * len(holds)) // 4] if holds else None

"""One read at a time on the CPU: concurrent reads take turns between their waits.

A worker runs up to `parallel_reads` reads on threads of its own so that their toolkit LLM
calls wait together. Their Python does not run together (one GIL), and left to the GIL they
share it in 5 ms slices: the reads of an evaluation reach their toolkit calls one by one, but a
read whose reply is back queues for the GIL behind every read still computing, so they all end
at about the same time, and the answer after each read waits for the slowest.

The baton makes the turns explicit: a read holds it while it runs program code and hands it on
while it waits on the engine (an LLM reply, embeddings). A read coming back from a wait goes
before one that has not started: finishing a read lets its answer be asked. So reads end one by
one, as fast as their CPU allows.

It is a scheduling hint, never a correctness lock: a thread that has not had its turn within
PATIENCE_S runs without it. A read that computes for long cannot hold the others back beyond
that, and no program can deadlock on it (a holder blocked on something a waiter holds -- a
library's lock across an embedding call, say -- is released when the waiter stops waiting).
"""
from __future__ import annotations

import heapq
import itertools
import threading

PATIENCE_S = 0.25
RESUMING, STARTING = 0, 1   # who goes first when the baton is handed on


class Baton:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy = False
        self._waiting: list[tuple[int, int, threading.Event]] = []   # (rank, arrival, wake-up)
        self._arrivals = itertools.count()
        self._held = threading.local()

    def take(self, rank: int = STARTING) -> bool:
        """Wait for this thread's turn (at most PATIENCE_S); whether it got the baton."""
        if getattr(self._held, "on", False):
            return True
        with self._lock:
            if not self._busy:
                self._busy = self._held.on = True
                return True
            entry = (rank, next(self._arrivals), threading.Event())
            heapq.heappush(self._waiting, entry)
        got = entry[2].wait(PATIENCE_S)
        if not got:
            with self._lock:
                got = entry[2].is_set()   # handed over while the wait timed out
                if not got:
                    self._waiting.remove(entry)
                    heapq.heapify(self._waiting)
        self._held.on = got
        return got

    def give(self) -> bool:
        """Hand the baton to the next waiter; whether this thread had it (False: a no-op)."""
        if not getattr(self._held, "on", False):
            return False
        self._held.on = False
        with self._lock:
            if self._waiting:
                heapq.heappop(self._waiting)[2].set()   # still busy: it changes hands
            else:
                self._busy = False
        return True

"""Single flight: a request identical to one already out waits for that one's reply.

Three seeds share most of their extraction and query prompts, and a child asks what its parent
asked; the response cache answers a repeat only once the first reply is back, so without this
two identical requests in flight at once were both sent (identical runs sent 243-265 seed-phase
calls). The router makes the first caller of a key the leader; later callers of the same key
wait for the leader's reply and take it as a cache hit. If the leader fails, each waiter asks
again on its own (one of them becomes the next leader), so a failure is never shared.
Keys are the response cache's (mstar/llm/cache.py), so only roles that reuse replies -- never
the reflector, which replays fresh samples -- share them.
"""
from __future__ import annotations

import threading

from mstar.llm.types import ChatResponse


class Flight:
    __slots__ = ("_done", "reply")

    def __init__(self) -> None:
        self._done = threading.Event()
        self.reply: ChatResponse | None = None

    def wait(self) -> ChatResponse | None:
        self._done.wait()
        return self.reply


class Flights:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._out: dict[str, Flight] = {}
        self.shared = 0            # replies handed to a waiter instead of a second request

    def lead(self, key: str) -> tuple[bool, Flight]:
        """(True, flight) for the caller that must send the request; (False, flight) to wait on."""
        with self._lock:
            flight = self._out.get(key)
            if flight is not None:
                self.shared += 1
                return False, flight
            flight = self._out[key] = Flight()
            return True, flight

    def land(self, key: str, flight: Flight, reply: ChatResponse | None) -> None:
        """The leader's outcome (None: it failed): wakes every waiter."""
        with self._lock:
            if self._out.get(key) is flight:
                del self._out[key]
        flight.reply = reply
        flight._done.set()

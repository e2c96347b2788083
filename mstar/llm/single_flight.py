"""Single flight: a request identical to one already out waits for that one's reply.

Three seeds share most of their extraction and query prompts, and a child asks what its parent
asked; the response cache answers a repeat only once the first reply is back, so without this
two identical requests in flight at once were both sent (identical runs sent 243-265 seed-phase
calls). The router makes the first caller of a key the leader; later callers of the same key
wait for the leader's reply and take it as a cache hit. If the leader fails, each waiter asks
again on its own (one of them becomes the next leader), so a failure is never shared.
Keys are the response cache's (mstar/llm/cache.py), so only roles that reuse replies -- never
the reflector, which replays fresh samples -- share them.

A leader may wait long for a slot: background work (mstar/llm/scope.py) waits behind every other
call, a test started early behind the prefetch's guesses too. A more urgent caller must not wait
behind it (a test started early asks the formulations an iteration's rotating evaluation asks:
the iteration waited 4 s for them). So a caller more urgent than a leader that has not sent yet
takes the request over: it leads a new flight, and the old leader, once it has its slots, sends
nothing and takes the new flight's reply (`TakenOver`).
"""
from __future__ import annotations

import dataclasses
import threading

from mstar.llm.types import ChatResponse


def joined_reply(resp: ChatResponse, waited_s: float) -> ChatResponse:
    """The leader's reply as a caller that waited `waited_s` for it gets it: a cache hit (no
    request of its own), with the share of the leader's latency it waited (`flight_wait`), which
    the critical-path count reads (evaluation/calls.py)."""
    share = min(1.0, waited_s / resp.latency_s) if resp.latency_s > 0 else 0.0
    return dataclasses.replace(resp, cache_hit=True, hints=None, flight_wait=share)


class TakenOver(Exception):
    """Raised to a background leader about to send: a caller the run waits on sent it instead."""


class Flight:
    __slots__ = ("_done", "reply", "rank", "unsent", "taken_by")

    def __init__(self, rank: tuple = ()) -> None:
        self._done = threading.Event()
        self.reply: ChatResponse | None = None
        self.rank = rank                    # the leader's urgency (lower: more urgent)
        self.unsent = True                  # the leader has not sent it yet
        self.taken_by: Flight | None = None

    def wait(self) -> ChatResponse | None:
        self._done.wait()
        return self.reply


class Flights:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._out: dict[str, Flight] = {}
        self.shared = 0            # replies handed to a waiter instead of a second request

    def lead(self, key: str, rank: tuple = ()) -> tuple[bool, Flight]:
        """(True, flight) for the caller that must send the request; (False, flight) to wait on.
        `rank`: the caller's urgency, compared with a leader's that has not sent yet."""
        with self._lock:
            flight = self._out.get(key)
            if flight is not None and not (flight.unsent and rank < flight.rank):
                self.shared += 1
                return False, flight
            new = self._out[key] = Flight(rank)
            if flight is not None:
                flight.taken_by = new
            return True, new

    def sending(self, flight: Flight) -> bool:
        """The leader is about to send: False when another caller sends it instead (TakenOver)."""
        with self._lock:
            if flight.taken_by is not None:
                return False
            flight.unsent = False
            return True

    def land(self, key: str, flight: Flight, reply: ChatResponse | None) -> None:
        """The leader's outcome (None: it failed): wakes every waiter."""
        with self._lock:
            if self._out.get(key) is flight:
                del self._out[key]
        flight.reply = reply
        flight._done.set()

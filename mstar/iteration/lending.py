"""While the run waits on the reflector, background work may use the calls in flight it leaves idle.

During the iterations, background work -- a test started early (mstar/final/held_out.py), guesses
ahead (rotating_prefetch.py) -- holds at most half of the cap on calls in flight
(mstar/llm/slots.py, BackgroundShare), so that the run's own bursts (a child's 25 answers at once)
find room. But while the reflector writes its reply the run has one call out, and the room kept
for its next burst stands idle for a whole reply: at a real endpoint the longest of an iteration,
a patch of hundreds to thousands of tokens against a short answer's few.

The next burst cannot come before the reply is back and the child has passed its gates. A
background call that takes an idle slot now and holds it no longer than a background call
usually does is back by then if it starts within

    window = reflector reply + gates - background call

after the reflector was asked, each term priced cautiously from the run so far: the lower
quartile of the reflector's replies (the preflight's one-word reply counts: it is short), the
shortest gates, the upper quartile of background calls' holds. With no history of one of them
nothing is lent. A call the estimates misjudge delays the child's burst by what it overruns, at
most one reply.

Measured on bench/bench_lead.py at 2,000 ms, where every reply takes the same time and the window
is only the gates' fraction of a second (docs/guesses.md, "Lending the reflector's wait").
"""
from __future__ import annotations

import contextlib
import threading


def window_seconds(reflector_replies: list[float], gates: float | None, hold: float | None) -> float:
    """The seconds a lending lasts (0: none) -- see the module docstring."""
    if not reflector_replies or gates is None or hold is None:
        return 0.0
    replies = sorted(reflector_replies)
    return max(0.0, replies[len(replies) // 4] + gates - hold)


class ReflectorLending:
    """`with lending.during_reply(): router.call("reflector", ...)`, and `saw_gates(seconds)` after
    each candidate's gates."""

    def __init__(self, router) -> None:
        self.router = router
        self._gates: float | None = None
        self._lock = threading.Lock()

    def saw_gates(self, seconds: float) -> None:
        with self._lock:
            self._gates = seconds if self._gates is None else min(self._gates, seconds)

    def window(self) -> float:
        replies = [r.latency_s for r in self.router.ledger.snapshot()
                   if r.role == "reflector" and not r.cache_hit and not r.error]
        with self._lock:
            gates = self._gates
        return window_seconds(replies, gates, self.router.background.hold_seconds())

    def during_reply(self):
        share = getattr(self.router, "background", None)
        if share is None:
            return contextlib.nullcontext()
        return share.lent(self.window())

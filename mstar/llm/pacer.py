"""How fast one endpoint may be sent requests: the rate state behind the shared limiter.

A pure state machine over a clock the caller passes in (seconds), so that it can be tested and
simulated without threads; mstar/llm/limiter.py puts it behind a lock and makes callers wait.

Pacing. While the endpoint has not said "too many", requests go unpaced (or at `--rpm` /
`--tpm`, when the user knows the limit). Once paced, requests are spaced by a generic cell rate
(GCRA): request k may go at `tat - burst_s`, and each one moves `tat` on by 1/rate, so after an
idle moment up to `rate x BURST_S` go at once -- the endpoint's own bucket refilled meanwhile.
Token pacing works the same way on estimated tokens (prompt characters / 4 plus the completion
size seen so far), corrected by the real usage when the reply comes back.

Finding the rate (multiplicative increase, multiplicative decrease). On a 429 the rate is cut
to `DECREASE` x the rate the endpoint actually served over the last `WINDOW_S` seconds -- once
per round trip: a 429 for a request sent before the last cut says nothing new. Every caller
also waits out the Retry-After (a shared pause, never one schedule per call). While callers
wait on the pacing (demand is above the rate) and no 429 comes, the rate grows by `INCREASE`
per second. Where the endpoint keeps a bucket of its own, the seconds spent below its rate
refill it, and the seconds above spend it, so the run's throughput stays close to the limit
(bench/bench_ratelimit.py measures it). `x-ratelimit-limit-*` headers, when a server sends them,
are taken as a ceiling the rate never passes; `x-ratelimit-remaining-* = 0` pauses until the
header's reset.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

INCREASE = 0.05      # growth per second while demand is above the rate and nothing says "too many"
RECOVER = 0.5        # ... growth per second while the rate is still below 0.9 x the rate that was cut
DECREASE = 0.8       # on a 429: this share of the rate served lately
WINDOW_S = 5.0       # the served rate is measured over this many seconds
BURST_S = 1.0        # after an idle moment, this many seconds' worth of requests may go at once
MIN_RATE = 0.05      # requests per second: never paced slower than one request every 20 s
NO_HINT_PAUSE_S = 1.0   # a 429 without Retry-After: the shared pause, doubling while 429s repeat


@dataclass(frozen=True)
class LimitHints:
    """What a reply's headers say about the endpoint's limits (any of them may be missing).
    Limits are per minute, as OpenAI, Azure and most proxies state them."""

    limit_requests: float | None = None
    remaining_requests: float | None = None
    reset_requests_s: float | None = None
    limit_tokens: float | None = None
    remaining_tokens: float | None = None
    reset_tokens_s: float | None = None


class Pacer:
    def __init__(self, rpm: float | None = None, tpm: float | None = None) -> None:
        for name, v in (("--rpm", rpm), ("--tpm", tpm)):
            if v is not None and not v > 0:
                raise ValueError(f"{name} must be a positive number per minute, got {v}")
        self.ceiling = rpm / 60.0 if rpm else None      # requests/s the rate never passes
        self.token_ceiling = tpm / 60.0 if tpm else None
        self.rate = self.ceiling                        # None: unpaced
        self.token_rate = self.token_ceiling
        self.not_before = 0.0                           # the shared pause ends here
        self._tat = -math.inf                           # GCRA: theoretical arrival time, requests
        self._token_tat = -math.inf                     # ... tokens
        self._served: deque[float] = deque()            # times of recent replies
        self._sent: deque[float] = deque()              # times of recent requests not refused
        self._cut_from: float | None = None             # the rate before the last cut
        self._last_cut = -math.inf
        self._grown_at: float | None = None             # last time the rate grew
        self._pressed = False                           # a caller waited on the pacing since then
        self._no_hint_pause = NO_HINT_PAUSE_S
        self.limited = 0                                # 429s seen
        self.cuts = 0

    # ------------------------------------------------------------ asking to send
    def wait(self, now: float, tokens: float = 0.0) -> float:
        """Seconds before a request of about `tokens` tokens may be sent; 0 means now, and the
        request is counted as sent."""
        delay = self.not_before - now
        if self.rate is not None:
            delay = max(delay, self._tat - BURST_S - now)
        if self.token_rate is not None and tokens > 0:
            delay = max(delay, self._token_tat - BURST_S - now)
        if delay > 0:
            self._pressed = self._pressed or self.rate is not None or self.token_rate is not None
            return delay
        self._sent.append(now)
        if self.rate is not None:
            self._tat = max(self._tat, now) + 1.0 / self.rate
        if self.token_rate is not None and tokens > 0:
            self._token_tat = max(self._token_tat, now) + tokens / self.token_rate
        return 0.0

    # ------------------------------------------------------------ what came back
    def served(self, now: float, hints: LimitHints | None = None, token_error: float = 0.0) -> None:
        """A reply arrived. `token_error`: its real tokens minus the estimate it was paced by."""
        self._served.append(now)
        self._forget(now)
        self._no_hint_pause = NO_HINT_PAUSE_S
        if self.token_rate is not None and token_error:
            self._token_tat += token_error / self.token_rate
        if hints is not None:
            self._apply(now, hints)
        self._grow(now)

    def limited_now(self, now: float, sent_at: float, retry_after: float | None,
                    hints: LimitHints | None = None) -> None:
        """The endpoint answered 429 to a request sent at `sent_at`."""
        self.limited += 1
        if retry_after is None or retry_after < 0:
            pause = self._no_hint_pause
            self._no_hint_pause = min(60.0, self._no_hint_pause * 2)
        else:
            pause = retry_after
        self.not_before = max(self.not_before, now + pause)
        if hints is not None:
            self._apply(now, hints)
        self._forget(now)
        if self._sent:
            self._sent.pop()           # refused: not part of what the endpoint took
        if sent_at <= self._last_cut:
            return                     # sent before the last cut: that cut already answered it
        # What the endpoint took lately: requests sent and not refused (answered or still out) --
        # at the start of a run the first 429 may come back before any reply does.
        taken = max(len(self._served), len(self._sent)) / WINDOW_S
        base = taken if self.rate is None else min(self.rate, max(taken, MIN_RATE))
        self._cut_from = base
        self.rate = max(MIN_RATE, DECREASE * base)
        if self.ceiling is not None:
            self.rate = min(self.rate, self.ceiling)
        if self.token_rate is not None:
            self.token_rate *= DECREASE
        self._last_cut = now
        # No burst right after a cut: the endpoint's bucket is empty, which is why it said no.
        self._tat = max(self._tat, self.not_before + BURST_S)
        self._token_tat = max(self._token_tat, self.not_before + BURST_S)
        self._grown_at, self._pressed = now, False
        self.cuts += 1

    # ------------------------------------------------------------ inside
    def _grow(self, now: float) -> None:
        if self.rate is None:
            return
        if self._grown_at is None or not self._pressed:
            self._grown_at = now       # no demand above the rate: growing would mean nothing
            return
        dt = now - self._grown_at
        if dt <= 0:
            return
        fast = self._cut_from is not None and self.rate < 0.9 * self._cut_from
        factor = (1.0 + (RECOVER if fast else INCREASE)) ** dt
        self.rate *= factor
        if self.ceiling is not None:
            self.rate = min(self.rate, self.ceiling)
        if self.token_rate is not None:
            self.token_rate *= factor
            if self.token_ceiling is not None:
                self.token_rate = min(self.token_rate, self.token_ceiling)
        self._grown_at, self._pressed = now, False

    def _apply(self, now: float, h: LimitHints) -> None:
        if h.limit_requests and h.limit_requests > 0:
            cap = h.limit_requests / 60.0
            self.ceiling = cap if self.ceiling is None else min(self.ceiling, cap)
            self.rate = self.ceiling if self.rate is None else min(self.rate, self.ceiling)
        if h.limit_tokens and h.limit_tokens > 0:
            cap = h.limit_tokens / 60.0
            self.token_ceiling = cap if self.token_ceiling is None else min(self.token_ceiling, cap)
            self.token_rate = self.token_ceiling if self.token_rate is None else min(self.token_rate,
                                                                                    self.token_ceiling)
        for remaining, reset in ((h.remaining_requests, h.reset_requests_s), (h.remaining_tokens, h.reset_tokens_s)):
            if remaining is not None and remaining <= 0 and reset is not None and reset > 0:
                self.not_before = max(self.not_before, now + min(reset, 60.0))

    def _forget(self, now: float) -> None:
        for times in (self._served, self._sent):
            while times and times[0] < now - WINDOW_S:
                times.popleft()

    def served_rate(self, now: float) -> float:
        """Replies per second over the last WINDOW_S seconds."""
        self._forget(now)
        return len(self._served) / WINDOW_S

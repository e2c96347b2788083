"""How fast one endpoint may be sent requests: the rate state behind the shared limiter.

A pure state machine over a clock the caller passes in (seconds), so that it can be tested and
simulated without threads; mstar/llm/limiter.py puts it behind a lock and makes callers wait.

Two budgets are paced the same way, each by a `Budget` below: requests, and tokens (estimated
before a request goes -- prompt characters / 4 plus the reply it may get -- and corrected by the
real usage when it comes back). Providers limit either or both per minute.

Pacing. While the endpoint has not said "too many", requests go unpaced (or at `--rpm` /
`--tpm`, when the user knows the limit). Once paced, a budget spaces what it lets through by a
generic cell rate (GCRA): each request moves the budget's theoretical arrival time `tat` on by
amount / rate, and may go once `tat - BURST_S` is past; so after an idle moment up to `rate x
BURST_S` go at once -- the endpoint's own bucket refilled meanwhile.

Finding the rate (multiplicative increase, multiplicative decrease). A rare 429 (fewer than
LIMITED_SHARE of the endpoint's answers over the last WINDOW_S seconds: an endpoint "overloaded"
now and then, an injected fault) delays only the call it refused, by its Retry-After: in a
simulation with 4% of requests refused at random and no limit, 64 callers took 9.7 s for what
takes 9.4 s unrefused. Past that share the endpoint is limiting the run. Then the budget it names
(OpenAI-style messages say "requests per min" or "tokens per min"; unknown means both) is cut to
DECREASE x what the endpoint took over the last WINDOW_S seconds -- once per round trip: a 429 for
a request sent before the last cut says nothing new. Every caller also waits out the Retry-After
(a shared pause, never one schedule per call). An endpoint that sends no Retry-After gets a
pause of NO_HINT_PAUSE_S that doubles once per round trip refused (a 429 for a request sent
after the last step), never once per 429 of one refused burst, and starts over at the next reply;
the rate itself is found as with the header (in the simulation above without Retry-After: the same
70.5 s, where doubling per 429 took 793 s). While callers wait on the pacing and no 429 comes,
the rate grows by INCREASE per second, or by RECOVER while it is still well below where it was
cut. Where the endpoint keeps a bucket of its own, the seconds spent below its rate refill it and
the seconds above spend it, so the run's throughput stays close to the limit: in a simulation of
a 600/min bucket with 5 s of burst at 300 ms a reply, 64 callers finished within 1% of the paced
minimum with ~30 refusals; bench/bench_ratelimit.py measures a real run. `x-ratelimit-limit-*`
headers, when a server sends them, are a ceiling the rate never passes; `x-ratelimit-remaining-*
= 0` pauses until the header's reset. An endpoint that refuses a fifth of all requests whatever
the pace is taken for a limit too; FLOOR_SHARE keeps the pace from spiralling below a quarter of
what the endpoint took in the last ten minutes (slower, never stalled).
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

INCREASE = 0.05      # growth per second while demand is above the rate and nothing says "too many"
RECOVER = 0.5        # ... growth per second while the rate is still below 0.9 x the rate that was cut
DECREASE = 0.8       # on a 429: this share of the rate the endpoint took lately
WINDOW_S = 5.0       # the taken rate is measured over this many seconds
BURST_S = 1.0        # after an idle moment, this many seconds' worth of requests may go at once
MIN_RATE = 0.05      # never paced slower than this share of a unit a second (one request every 20 s)
NO_HINT_PAUSE_S = 1.0   # a 429 without Retry-After: the shared pause, doubling per round trip refused
NO_HINT_MAX_S = 60.0    # ... up to this
LIMITED_SHARE = 0.1  # the endpoint is limiting the run when this share of its recent answers are 429s
FLOOR_SHARE = 0.25   # a cut never goes below this share of the most the endpoint took lately ...
FLOOR_MEMORY_S = 600.0   # ... over this many seconds


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


class Budget:
    """One paced quantity (requests, or tokens) of an endpoint."""

    def __init__(self, per_minute: float | None, name: str) -> None:
        if per_minute is not None and not per_minute > 0:
            raise ValueError(f"{name} must be a positive number per minute, got {per_minute}")
        self.ceiling = per_minute / 60.0 if per_minute else None   # units/s the rate never passes
        self.rate = self.ceiling                                   # None: unpaced
        self.tat = -math.inf
        self.taken: deque[tuple[float, float]] = deque()           # (time, amount) not refused lately
        self.cut_from: float | None = None
        self.last_cut = -math.inf
        self.peaks: deque[tuple[float, float]] = deque()          # (time, rate taken) at recent cuts
        self.grown_at: float | None = None
        self.pressed = False                                       # a caller waited on it since then

    def delay(self, now: float, amount: float) -> float:
        if self.rate is None or amount <= 0:
            return 0.0
        return self.tat - BURST_S - now

    def take(self, now: float, amount: float) -> None:
        if amount <= 0:
            return
        self.taken.append((now, amount))
        if self.rate is not None:
            self.tat = max(self.tat, now) + amount / self.rate

    def correct(self, amount: float) -> None:
        """The request cost `amount` more (or less) than it was paced by."""
        if self.rate is not None and amount:
            self.tat += amount / self.rate

    def refused(self, now: float, amount: float) -> None:
        for i in range(len(self.taken) - 1, -1, -1):     # the refused request took nothing
            if self.taken[i][1] == amount:
                del self.taken[i]
                break

    def cut(self, now: float, sent_at: float, resume_at: float) -> bool:
        if sent_at <= self.last_cut:
            return False          # sent before the last cut: that cut already answered it
        self.forget(now)
        taken = sum(a for _, a in self.taken) / WINDOW_S
        base = taken if self.rate is None else min(self.rate, max(taken, MIN_RATE))
        # A floor: refusals that go on however slow the run goes (an endpoint refusing a share of
        # requests at random) must not spiral the pace down to nothing; a real limit is met well
        # above a quarter of what the endpoint took in the last ten minutes.
        self.peaks.append((now, taken))
        while self.peaks[0][0] < now - FLOOR_MEMORY_S:
            self.peaks.popleft()
        floor = FLOOR_SHARE * max(r for _, r in self.peaks)
        self.cut_from = base
        self.rate = max(MIN_RATE, floor, DECREASE * base)
        if self.ceiling is not None:
            self.rate = min(self.rate, self.ceiling)
        self.last_cut = now
        # No burst right after a cut: the endpoint's bucket is empty, which is why it said no.
        self.tat = max(self.tat, resume_at + BURST_S)
        self.grown_at, self.pressed = now, False
        return True

    def grow(self, now: float) -> None:
        if self.rate is None:
            return
        if self.grown_at is None or not self.pressed:
            self.grown_at = now   # no demand above the rate: growing would mean nothing
            return
        dt = now - self.grown_at
        if dt <= 0:
            return
        fast = self.cut_from is not None and self.rate < 0.9 * self.cut_from
        self.rate *= (1.0 + (RECOVER if fast else INCREASE)) ** dt
        if self.ceiling is not None:
            self.rate = min(self.rate, self.ceiling)
        self.grown_at, self.pressed = now, False

    def lower_ceiling(self, per_minute: float) -> None:
        cap = per_minute / 60.0
        self.ceiling = cap if self.ceiling is None else min(self.ceiling, cap)
        self.rate = self.ceiling if self.rate is None else min(self.rate, self.ceiling)

    def forget(self, now: float) -> None:
        while self.taken and self.taken[0][0] < now - WINDOW_S:
            self.taken.popleft()

    def taken_rate(self, now: float) -> float:
        self.forget(now)
        return sum(a for _, a in self.taken) / WINDOW_S


class Pacer:
    def __init__(self, rpm: float | None = None, tpm: float | None = None) -> None:
        self.requests = Budget(rpm, "--rpm")
        self.tokens = Budget(tpm, "--tpm")
        self.not_before = 0.0                   # the shared pause ends here
        self._served: deque[float] = deque()    # times of recent replies
        self._refusals: deque[float] = deque()  # times of recent 429s
        self._no_hint_pause = NO_HINT_PAUSE_S
        self._no_hint_at: float | None = None   # when that pause last stepped (None: a reply since)
        self.limited = 0                        # 429s seen
        self.cuts = 0

    @property
    def rate(self) -> float | None:
        """Requests per second the endpoint is paced at (None: unpaced)."""
        return self.requests.rate

    @property
    def token_rate(self) -> float | None:
        return self.tokens.rate

    # ------------------------------------------------------------ asking to send
    def wait(self, now: float, tokens: float = 0.0) -> float:
        """Seconds before a request of about `tokens` tokens may be sent; 0 means now, and the
        request is counted as sent."""
        delay = max(self.not_before - now, self.requests.delay(now, 1.0), self.tokens.delay(now, tokens))
        if delay > 0:
            for b in (self.requests, self.tokens):
                b.pressed = b.pressed or b.rate is not None
            return delay
        self.requests.take(now, 1.0)
        self.tokens.take(now, tokens)
        return 0.0

    # ------------------------------------------------------------ what came back
    def served(self, now: float, hints: LimitHints | None = None, token_error: float = 0.0) -> None:
        """A reply arrived. `token_error`: its real tokens minus the estimate it was paced by."""
        self._served.append(now)
        self._forget(now)
        self._no_hint_pause, self._no_hint_at = NO_HINT_PAUSE_S, None
        self.tokens.correct(token_error)
        if hints is not None:
            self._apply(now, hints)
        self.requests.grow(now)
        self.tokens.grow(now)

    def limited_now(self, now: float, sent_at: float, retry_after: float | None,
                    hints: LimitHints | None = None, which: str | None = None, tokens: float = 0.0) -> float:
        """The endpoint answered 429 to a request of about `tokens` tokens sent at `sent_at`;
        `which`: the limit it named ("requests", "tokens"), None when it did not say. Returns the
        seconds this caller alone must wait before asking again (0: the shared pause covers it).

        A rare 429 among many replies (an endpoint "overloaded" now and then, an injected fault)
        says little about the run's pace: only the refused call waits its Retry-After. Once 429s
        are LIMITED_SHARE of the endpoint's recent answers (or nothing was taken lately) it is
        limiting the run: everyone waits out the Retry-After and the named budget is cut."""
        self.limited += 1
        self._refusals.append(now)
        self.requests.refused(now, 1.0)
        self.tokens.refused(now, tokens)
        if hints is not None:
            self._apply(now, hints)
        if retry_after is None or retry_after < 0:
            pause = self._no_hint_backoff(now, sent_at)
        else:
            pause = retry_after
        self._forget(now)
        taken = len(self.requests.taken)
        if taken and len(self._refusals) < LIMITED_SHARE * (taken + len(self._refusals)):
            return pause
        self.not_before = max(self.not_before, now + pause)
        cut = False
        if which in (None, "requests"):
            cut = self.requests.cut(now, sent_at, self.not_before) or cut
        if which in (None, "tokens") and tokens > 0:
            cut = self.tokens.cut(now, sent_at, self.not_before) or cut
        self.cuts += cut
        return 0.0

    # ------------------------------------------------------------ inside
    def _no_hint_backoff(self, now: float, sent_at: float) -> float:
        """The pause after a 429 that came without Retry-After. It steps (doubles) once per round
        trip: only a request sent after the last step was refused with the longer pause already
        known, so only its 429 says the pause was too short. The other 429s of one burst -- sent
        together, refused together -- are one answer, and doubling on each of them (64 callers:
        2^64) turned one refused burst into a minute with nothing in flight."""
        if self._no_hint_at is not None and sent_at > self._no_hint_at:
            self._no_hint_pause = min(NO_HINT_MAX_S, self._no_hint_pause * 2)
            self._no_hint_at = now
        elif self._no_hint_at is None:
            self._no_hint_at = now
        return self._no_hint_pause

    def _apply(self, now: float, h: LimitHints) -> None:
        if h.limit_requests and h.limit_requests > 0:
            self.requests.lower_ceiling(h.limit_requests)
        if h.limit_tokens and h.limit_tokens > 0:
            self.tokens.lower_ceiling(h.limit_tokens)
        for remaining, reset in ((h.remaining_requests, h.reset_requests_s), (h.remaining_tokens, h.reset_tokens_s)):
            if remaining is not None and remaining <= 0 and reset is not None and reset > 0:
                self.not_before = max(self.not_before, now + min(reset, 60.0))

    def _forget(self, now: float) -> None:
        for times in (self._served, self._refusals):
            while times and times[0] < now - WINDOW_S:
                times.popleft()
        self.requests.forget(now)
        self.tokens.forget(now)

    def served_rate(self, now: float) -> float:
        """Replies per second over the last WINDOW_S seconds."""
        self._forget(now)
        return len(self._served) / WINDOW_S

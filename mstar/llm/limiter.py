"""One limiter per endpoint, shared by every role and thread that calls it.

An endpoint is a base URL and an API key (the key's fingerprint: two keys have two quotas). The
router asks the endpoint's limiter for a permit before each request and tells it what came
back; the rate itself is worked out by mstar/llm/pacer.py. Here:

- Waiting callers go in order of priority, then arrival (the router's FIRST / NORMAL / LAST, as
  for the slots), and a permit goes to the first of them, never to a newcomer that barges in.
- Waiting here is not failing: a 429 sends the call back to wait for its turn (the router does
  not count it against the call's retries); once 429s are a tenth of the endpoint's recent
  answers, every caller of the endpoint waits out its Retry-After together (a rare one delays
  only its own call).
- Patience: when the endpoint has answered nothing but 429 for `patience_s` seconds, every
  waiting and new call fails with RateLimitedError, which stops the run (resumably, never
  scored) with a line that says "rate limited".
- Counters for the console and the summary: 429s seen, seconds callers spent held back, the
  current pace, and the rate served: replies in the last minute (ANSWERED_WINDOW_S; since the
  start while that is shorter). The progress line shows the rate served, not the pace: the pace
  is where the pacer probes (above the limit at times, 0 while a pause holds everyone).

With no 429 and no --rpm / --tpm the limiter never makes anyone wait, and a permit costs one
uncontended lock.
"""
from __future__ import annotations

import hashlib
import heapq
import itertools
import math
import threading
import time
from collections import deque
from typing import Callable

from mstar.llm.pacer import LimitHints, Pacer
from mstar.llm.types import FatalLLMError, estimate_tokens, messages_text

DEFAULT_PATIENCE_S = 600.0
ANSWERED_WINDOW_S = 60.0


class RateLimitedError(FatalLLMError):
    """The endpoint has refused every request for longer than the limiter's patience."""


def endpoint_key(base_url: str | None, api_key: str | None) -> str:
    """Who keeps the quota: the base URL and a fingerprint of the key (never the key)."""
    finger = hashlib.sha256((api_key or "").encode()).hexdigest()[:12]
    return f"{base_url or 'https://api.openai.com/v1'}#{finger}"


class EndpointLimiter:
    def __init__(self, name: str, *, rpm: float | None = None, tpm: float | None = None,
                 patience_s: float = DEFAULT_PATIENCE_S, clock: Callable[[], float] = time.monotonic) -> None:
        if not patience_s > 0:
            raise ValueError(f"the rate-limit patience must be a positive number of seconds, got {patience_s}")
        self.name = name
        self.patience_s = patience_s
        self._pacer = Pacer(rpm, tpm)
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: list[tuple[int, int]] = []    # heap of (priority, arrival) of the callers waiting
        self._arrivals = itertools.count()
        self._refused_since: float | None = None   # the first 429 since the last reply
        self.held_s = 0.0                          # seconds callers spent waiting here, summed
        self.waits = 0                             # permits that had to wait
        self._paced_until = 0.0                    # the last moment a caller was held back
        self._started = clock()
        self._replies: deque[float] = deque()      # when the replies of the last minute came

    # ------------------------------------------------------------ permits
    def acquire(self, priority: int = 1, tokens: float = 0.0) -> float:
        """Wait for a permit; returns the moment it was given (the request's send time)."""
        with self._cond:
            now = self._clock()
            self._check_patience(now)
            if not self._queue and self._pacer.wait(now, tokens) <= 0:
                return now
            me = (priority, next(self._arrivals))
            heapq.heappush(self._queue, me)
            started = now
            try:
                while True:
                    now = self._clock()
                    self._check_patience(now)
                    if self._queue[0] == me:
                        delay = self._pacer.wait(now, tokens)
                        if delay <= 0:
                            heapq.heappop(self._queue)
                            self._account(started, now)
                            self._cond.notify_all()    # the next in line becomes the head
                            return now
                        self._cond.wait(min(delay, self._patience_left(now)))
                    else:
                        self._cond.wait(max(0.05, self._patience_left(now)))
            except BaseException:
                if me in self._queue:
                    self._queue.remove(me)
                    heapq.heapify(self._queue)
                    self._cond.notify_all()
                raise

    def served(self, hints: LimitHints | None = None, token_error: float = 0.0) -> None:
        with self._cond:
            self._refused_since = None
            now = self._clock()
            self._replies.append(now)
            self._pacer.served(now, hints, token_error)
            self._cond.notify_all()

    def refused(self, sent_at: float, retry_after: float | None, hints: LimitHints | None = None,
                which: str | None = None, tokens: float = 0.0) -> float:
        """The endpoint answered 429 to the request of about `tokens` tokens sent at `sent_at`;
        `which` is the limit it named ("requests" / "tokens"), if it named one. Returns the seconds
        this caller alone waits before asking again (a rare 429: see Pacer.limited_now)."""
        with self._cond:
            now = self._clock()
            if self._refused_since is None:
                self._refused_since = now
            alone = self._pacer.limited_now(now, sent_at, retry_after, hints, which, tokens)
            self._paced_until = max(self._paced_until, self._pacer.not_before)
            return alone

    def released(self) -> None:
        """A permit was used for a request that got neither a reply nor a 429 (an error)."""
        with self._cond:
            self._cond.notify_all()

    # ------------------------------------------------------------ what it is doing
    def status(self) -> dict:
        """For the console and the summary: 429s, seconds held back, the pace (requests per minute,
        None while unpaced), whether callers are being held back right now."""
        with self._cond:
            now = self._clock()
            rate = self._pacer.rate
            token_rate = self._pacer.token_rate
            return {"endpoint": self.name, "pace_tpm": round(token_rate * 60) if token_rate is not None else None, "rate_limited": self._pacer.limited, "cuts": self._pacer.cuts,
                    "held_s": round(self.held_s, 3), "held_calls": self.waits,
                    "pace_rpm": round(rate * 60, 1) if rate is not None else None,
                    "served_rpm": round(self._pacer.served_rate(now) * 60, 1),
                    "answered_rpm": round(self._answered_rpm(now), 1),
                    "throttling": bool(self._queue) or now < self._paced_until}

    # ------------------------------------------------------------ inside
    def _answered_rpm(self, now: float) -> float:
        """Replies per minute over the last minute (or since the start, when that is shorter)."""
        while self._replies and self._replies[0] < now - ANSWERED_WINDOW_S:
            self._replies.popleft()
        return len(self._replies) * 60.0 / max(1.0, min(ANSWERED_WINDOW_S, now - self._started))

    def _account(self, started: float, now: float) -> None:
        if now > started:
            self.held_s += now - started
            self.waits += 1
            self._paced_until = max(self._paced_until, now + 1.0)

    def _patience_left(self, now: float) -> float:
        if self._refused_since is None:
            return self.patience_s
        return max(0.01, self._refused_since + self.patience_s - now)

    def _check_patience(self, now: float) -> None:
        if self._refused_since is not None and now - self._refused_since >= self.patience_s:
            raise RateLimitedError(
                f"rate limited: {self.name.split('#')[0]} has answered 429 (too many requests) to every "
                f"request for {now - self._refused_since:.0f} s (patience {self.patience_s:g} s); the run can be "
                "resumed once the limit allows (mstar resume), or pace it with --rpm / --tpm")


def limiters_for_roles(backends: dict, pacing: dict[str, tuple],
                       patience_s: float) -> tuple[dict[str, EndpointLimiter], dict[str, EndpointLimiter]]:
    """One limiter per endpoint that has one (an OpenAI-compatible server: base URL + key), shared
    by the roles it serves; the strictest --rpm / --tpm of those roles paces it."""
    by_endpoint: dict[str, list[str]] = {}
    for role, b in backends.items():
        ep = getattr(b, "endpoint", None)
        if isinstance(ep, str):
            by_endpoint.setdefault(ep, []).append(role)
    limiters, of_role = {}, {}
    for ep, roles in by_endpoint.items():
        rpms = [pacing[r][0] for r in roles if r in pacing and pacing[r][0] is not None]
        tpms = [pacing[r][1] for r in roles if r in pacing and pacing[r][1] is not None]
        lim = EndpointLimiter(ep, rpm=min(rpms) if rpms else None, tpm=min(tpms) if tpms else None,
                              patience_s=patience_s)
        limiters[ep] = lim
        for r in roles:
            of_role[r] = lim
    return limiters, of_role


def token_estimate(messages: list[dict], backend) -> float:
    """Tokens a request will cost, before it is sent (for --tpm pacing): its prompt at about four
    characters a token, plus the role's max_tokens or a typical reply; the real count corrects it."""
    params = backend.request_params() if hasattr(backend, "request_params") else {}
    reply = params.get("max_tokens") or params.get("max_completion_tokens") or 256
    return float(estimate_tokens(messages_text(messages)) + int(reply))


def limit_named(message: str) -> str | None:
    """Which limit a 429's message names: OpenAI says "... on tokens per min (TPM)" or "on
    requests per min (RPM)", Azure "token rate limit", Anthropic "request tokens ... per-minute";
    None when it names neither (then both are cut)."""
    text = message.lower()
    tokens = "token" in text or "tpm" in text
    requests = "requests per min" in text or "rpm" in text or "request rate" in text
    if tokens and not requests:
        return "tokens"
    if requests and not tokens:
        return "requests"
    return None


def parse_limit_hints(headers) -> LimitHints | None:
    """`x-ratelimit-*` headers (OpenAI, Azure and many proxies), or None when there are none."""
    if headers is None:
        return None
    get = headers.get
    values = {}
    for field, name in (("limit_requests", "x-ratelimit-limit-requests"),
                        ("remaining_requests", "x-ratelimit-remaining-requests"),
                        ("limit_tokens", "x-ratelimit-limit-tokens"),
                        ("remaining_tokens", "x-ratelimit-remaining-tokens")):
        raw = get(name)
        if raw is not None:
            try:
                v = float(raw)
                if math.isfinite(v) and v >= 0:
                    values[field] = v
            except ValueError:
                pass
    for field, name in (("reset_requests_s", "x-ratelimit-reset-requests"),
                        ("reset_tokens_s", "x-ratelimit-reset-tokens")):
        raw = get(name)
        if raw is not None:
            secs = parse_duration(raw)
            if secs is not None:
                values[field] = secs
    return LimitHints(**values) if values else None


def parse_duration(raw: str) -> float | None:
    """'1s', '6m0s', '20ms', '1h2m3.5s' or a plain number of seconds; None when unreadable."""
    text = str(raw).strip()
    try:
        v = float(text)
        return v if math.isfinite(v) and v >= 0 else None
    except ValueError:
        pass
    total, num, i = 0.0, "", 0
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    matched = False
    while i < len(text):
        ch = text[i]
        if ch.isdigit() or ch == ".":
            num += ch
            i += 1
            continue
        unit = "ms" if text.startswith("ms", i) else ch
        if unit not in units or not num:
            return None
        try:
            total += float(num) * units[unit]
        except ValueError:
            return None
        num, matched = "", True
        i += len(unit)
    if num:                # digits with no unit at the end
        return None
    return total if matched else None

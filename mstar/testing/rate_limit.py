"""The fake server's rate limit: what an ordinary account's endpoint does past its quota.

Token buckets per minute, as providers describe their limits: `rpm` requests and/or `tpm`
tokens, each bucket holding `burst_s` seconds of its rate (a burst of that size goes through
after an idle moment). A request that finds a bucket empty is refused with HTTP 429 and a
Retry-After: whole seconds, rounded up, and a message that names the limit as OpenAI's do ("on
requests per min (RPM)", "on tokens per min (TPM)"), as the HTTP standard writes it (`precise=True` adds a
`retry-after-ms` header, as OpenAI does). With `headers=True` every reply also carries
OpenAI's `x-ratelimit-{limit,remaining,reset}-{requests,tokens}` headers; with
`retry_after=False` a 429 carries no Retry-After at all (some proxies and self-hosted servers
answer so: the client must find its pause by itself). A request is charged
its prompt tokens when it is admitted and its completion tokens when its reply is ready (the
bucket may then go below zero, so the next requests wait longer), roughly as providers count.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass


@dataclass
class RateLimit:
    rpm: float | None = None
    tpm: float | None = None
    burst_s: float = 5.0
    headers: bool = False
    precise: bool = False
    retry_after: bool = True

    def __post_init__(self):
        for name, v in (("rpm", self.rpm), ("tpm", self.tpm)):
            if v is not None and not v > 0:
                raise ValueError(f"rate limit {name} must be positive, got {v}")
        if not self.burst_s > 0:
            raise ValueError(f"rate limit burst_s must be positive, got {self.burst_s}")


class _Bucket:
    def __init__(self, per_minute: float, burst_s: float, now: float) -> None:
        self.rate = per_minute / 60.0
        self.size = max(1.0, self.rate * burst_s)
        self.level, self.at = self.size, now

    def fill(self, now: float) -> None:
        self.level = min(self.size, self.level + (now - self.at) * self.rate)
        self.at = now

    def wait_for(self, amount: float) -> float:
        """Seconds until `amount` is there (0 when it is); call fill() first."""
        need = min(amount, self.size) - self.level
        return 0.0 if need <= 0 else need / self.rate


class Limiter:
    def __init__(self, limit: RateLimit, clock=time.monotonic) -> None:
        self.limit, self._clock = limit, clock
        now = clock()
        self._req = _Bucket(limit.rpm, limit.burst_s, now) if limit.rpm else None
        self._tok = _Bucket(limit.tpm, limit.burst_s, now) if limit.tpm else None
        self._lock = threading.Lock()
        self.refused = 0

    def admit(self, prompt_tokens: int) -> tuple[float | None, dict, str]:
        """(None, headers, "") when the request may go, else (seconds to wait, headers for the
        429, the limit it ran into: "requests" or "tokens")."""
        with self._lock:
            now = self._clock()
            wait, which = 0.0, ""
            for bucket, amount, name in ((self._req, 1.0, "requests"), (self._tok, float(prompt_tokens), "tokens")):
                if bucket is not None:
                    bucket.fill(now)
                    w = bucket.wait_for(amount)
                    if w > wait:
                        wait, which = w, name
            if wait > 0:
                self.refused += 1
                return wait, self._headers(wait), which
            if self._req is not None:
                self._req.level -= 1.0
            if self._tok is not None:
                self._tok.level -= prompt_tokens
            return None, self._headers(None), ""

    def charge(self, completion_tokens: int) -> None:
        if self._tok is not None:
            with self._lock:
                self._tok.fill(self._clock())
                self._tok.level -= completion_tokens

    def _headers(self, wait: float | None) -> dict:
        out: dict[str, str] = {}
        if wait is not None and self.limit.retry_after:
            out["Retry-After"] = str(max(1, math.ceil(wait)))
            if self.limit.precise:
                out["retry-after-ms"] = str(max(1, math.ceil(wait * 1000)))
        if self.limit.headers:
            for name, bucket, per_minute in (("requests", self._req, self.limit.rpm),
                                             ("tokens", self._tok, self.limit.tpm)):
                if bucket is not None:
                    out[f"x-ratelimit-limit-{name}"] = str(int(per_minute))
                    out[f"x-ratelimit-remaining-{name}"] = str(max(0, int(bucket.level)))
                    out[f"x-ratelimit-reset-{name}"] = f"{max(0.0, (bucket.size - bucket.level) / bucket.rate):.3f}s"
        return out

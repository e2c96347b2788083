"""When to try a failed call again, and how long to wait first.

Only `TransientLLMError` is retried (rate limits, 5xx, timeouts, dropped
connections, unreadable replies); authentication and bad-request errors and
empty or truncated completions reach the caller at once. The backends make a
single attempt each (the openai client runs with max_retries=0), so that every
attempt -- and the error that ended it -- is seen here and lands in the ledger.
"""
from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3          # attempts after the first
    backoff_s: float = 1.0        # wait before the first retry; doubles for each later one
    max_delay_s: float = 60.0     # no single wait is longer, whatever Retry-After says

    def __post_init__(self):
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        if self.backoff_s < 0 or self.max_delay_s < 0:
            raise ValueError("backoff_s and max_delay_s must be >= 0")


def retry_delay(policy: RetryPolicy, retry_number: int, retry_after: float | None,
                rng: random.Random | None = None) -> float:
    """Seconds to wait before retry number `retry_number` (1-based).

    Exponential backoff with jitter (0.5x to 1.5x, so that many callers hit by
    the same 429 do not come back in lock-step). A server's Retry-After is a
    floor: we never come back earlier than asked, only a little later.
    """
    rng = rng or random
    backoff = policy.backoff_s * (2 ** (retry_number - 1)) * rng.uniform(0.5, 1.5)
    if retry_after is not None and retry_after >= 0:
        backoff = max(backoff, retry_after * rng.uniform(1.0, 1.1))
    return min(backoff, policy.max_delay_s)


def parse_retry_after(headers) -> float | None:
    """Seconds from `retry-after-ms` or `retry-after` (seconds or an HTTP date); None if absent."""
    if headers is None:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime
    import datetime as _dt
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.timezone.utc)
    return max(0.0, (when - _dt.datetime.now(_dt.timezone.utc)).total_seconds())

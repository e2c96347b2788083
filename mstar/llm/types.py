"""Records that flow through the LLM layer, and the errors it raises."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Protocol


class LLMError(RuntimeError):
    """A call that failed (after its retries, when it had any); the message says why."""


class FatalLLMError(LLMError):
    """A failure no retry and no other prompt can fix: a bad key, no permission, an unknown model
    or base URL, a request the server rejects as malformed. The run stops at once, before any
    further spend, with the message (which names the role, model, base URL and what to fix)."""


class TransientLLMError(LLMError):
    """A failure worth retrying: rate limit, server error, timeout, dropped connection,
    a reply that was not valid JSON. `retry_after` is the server's own hint, in seconds."""

    def __init__(self, message: str, *, retry_after: float | None = None, kind: str = "transient",
                 hints=None, limit: str | None = None):
        super().__init__(message)
        self.retry_after = retry_after
        self.kind = kind
        self.hints = hints          # a 429's x-ratelimit-* headers (mstar.llm.pacer.LimitHints)
        self.limit = limit          # the limit a 429 named: "requests", "tokens" or None


class EmptyCompletionError(TransientLLMError):
    """The server answered, but with no text: retried like other transient faults."""

    def __init__(self, message: str):
        super().__init__(message, kind="empty")


class TruncatedCompletionError(LLMError):
    """The completion was cut off at the token limit (finish_reason=length)."""


class CallCancelled(LLMError):
    """Not sent: the background work the call belonged to is needed no more (llm.scope.Background)."""


@dataclass
class ChatResponse:
    text: str
    model: str
    backend: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str = "stop"     # "length" means the reply was cut off
    cached_tokens: int = 0          # prompt tokens the provider served from its own prompt cache
    cache_hit: bool = False         # served by mstar's response cache, no request was made
    hints: object = field(default=None, repr=False, compare=False)   # the reply's x-ratelimit-* headers
    # A cache hit taken from an identical request already in flight (router.py's single flight):
    # the share of that request's latency this caller waited for it. No request was made, yet the
    # caller waited for a reply: the critical path counts it (evaluation/calls.py).
    flight_wait: float = field(default=0.0, compare=False)

    def to_dict(self) -> dict:
        out = asdict(self)
        out.pop("hints", None)
        out.pop("flight_wait", None)     # this caller's wait, not the reply's: not for the cache
        return out


@dataclass
class UsageRecord:
    """One LLM call as the run's ledger sees it (one line of llm_usage.jsonl).

    Token counts are the response's own figures; on a cache hit they are those of
    the call that filled the cache, `cache_hit` is true and `cost_usd` is 0.
    `retries` counts the extra attempts; `attempt_errors` holds the error of every
    failed attempt, so retries and failures can be audited call by call.
    """

    role: str
    model: str
    backend: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    error: str | None = None
    cached_tokens: int = 0
    cost_usd: float = 0.0
    cache_hit: bool = False
    retries: int = 0
    attempt_errors: list[str] = field(default_factory=list)
    kind: str | None = None          # extract_knowledge_item, formulate_query, answer, reflect, ...
    finish_reason: str | None = None
    at: float = field(default_factory=time.time)
    scope: str | None = None         # what the call was made for: "seed_x", "iter_003", "test" (llm.scope)
    rate_limited: int = 0            # 429 answers the call got (each sent it back to wait; not retries)
    held_s: float = 0.0              # seconds it waited on its endpoint's limiter

    @property
    def billed_tokens(self) -> int:
        """Tokens this call was charged for (none when the cache answered)."""
        return 0 if self.cache_hit else self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "UsageRecord":
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


class Backend(Protocol):
    """Anything that can answer a chat request for one role."""

    name: str
    model: str

    def complete(self, messages: list[dict]) -> ChatResponse: ...


def estimate_tokens(text: str) -> int:
    """Rough token count (about 4 characters per token) for backends that report none."""
    return max(1, len(text) // 4) if text else 0


def messages_text(messages: list[dict]) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages)

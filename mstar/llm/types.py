"""Records that flow through the LLM layer."""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol


class LLMError(RuntimeError):
    """A call that failed after its retries; the message says why."""


@dataclass
class ChatResponse:
    text: str
    model: str
    backend: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    finish_reason: str = "stop"     # "length" means the reply was cut off


@dataclass
class UsageRecord:
    """One LLM call as the run's ledger sees it."""

    role: str
    model: str
    backend: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    error: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


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

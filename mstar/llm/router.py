"""One interface, four roles: who serves each role, and a ledger of every call."""
from __future__ import annotations

import threading
from typing import Callable

from mstar.config import ROLES, LLMConfig
from mstar.llm.types import Backend, ChatResponse, LLMError, UsageRecord


def make_backend(role: str, cfg: LLMConfig, *, seed: int = 0) -> Backend:
    rc = cfg.role(role)
    if rc.backend == "offline":
        from mstar.llm.offline_backend import OfflineBackend
        return OfflineBackend(role, seed=seed)
    if rc.backend == "openai":
        from mstar.llm.openai_backend import OpenAIBackend
        return OpenAIBackend(role, rc)
    raise LLMError(f"role {role!r}: unknown backend {rc.backend!r} (use 'offline' or 'openai')")


class LLMRouter:
    """Routes a call to its role's backend and records its usage.

    Thread-safe: evaluations call the task role from a thread pool.
    `on_usage` lets the run store persist each record as it happens.
    """

    def __init__(self, backends: dict[str, Backend], on_usage: Callable[[UsageRecord], None] | None = None):
        missing = [r for r in ROLES if r not in backends]
        if missing:
            raise ValueError(f"no backend for roles: {', '.join(missing)}")
        self._backends = backends
        self._on_usage = on_usage
        self._lock = threading.Lock()
        self.records: list[UsageRecord] = []

    @classmethod
    def from_config(cls, cfg: LLMConfig, *, seed: int = 0, on_usage=None) -> "LLMRouter":
        return cls({r: make_backend(r, cfg, seed=seed) for r in ROLES}, on_usage=on_usage)

    def describe(self) -> dict[str, str]:
        """Which backend and model serve each role (shown by the CLI)."""
        return {r: f"{b.name}:{b.model}" for r, b in self._backends.items()}

    def call(self, role: str, messages: list[dict]) -> ChatResponse:
        backend = self._backends[role]
        try:
            resp = backend.complete(messages)
        except Exception as exc:
            self._record(UsageRecord(role, backend.model, backend.name, 0, 0, 0.0, error=str(exc)))
            if isinstance(exc, LLMError):
                raise
            raise LLMError(f"role {role!r}: {type(exc).__name__}: {exc}") from exc
        self._record(UsageRecord(role, resp.model, resp.backend, resp.prompt_tokens,
                                 resp.completion_tokens, resp.latency_s))
        return resp

    def text(self, role: str, messages: list[dict]) -> str:
        return self.call(role, messages).text

    def _record(self, rec: UsageRecord) -> None:
        with self._lock:
            self.records.append(rec)
        if self._on_usage is not None:
            self._on_usage(rec)

    def totals(self) -> dict[str, dict[str, int]]:
        """Calls and tokens per role so far."""
        with self._lock:
            recs = list(self.records)
        out: dict[str, dict[str, int]] = {}
        for r in recs:
            t = out.setdefault(r.role, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "errors": 0})
            t["calls"] += 1
            t["prompt_tokens"] += r.prompt_tokens
            t["completion_tokens"] += r.completion_tokens
            t["errors"] += 1 if r.error else 0
        return out

    def mark(self) -> int:
        """Position in the ledger; `since(mark)` sums what happened after it."""
        with self._lock:
            return len(self.records)

    def since(self, mark: int) -> dict[str, int]:
        with self._lock:
            recs = self.records[mark:]
        return {
            "calls": len(recs),
            "prompt_tokens": sum(r.prompt_tokens for r in recs),
            "completion_tokens": sum(r.completion_tokens for r in recs),
        }

"""Who serves each LLM role, and how the router treats its calls (cache mode, concurrency, retries).

`make_backend` builds a role's backend from the configuration (offline, any OpenAI-compatible
endpoint, or a command); `backend_identity` is who answers, as the response cache keys it;
`RolePolicy` and `cache_mode` say how a role's replies are cached and how many of its calls may
be out at once. The router (router.py) puts these together.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mstar.config import LLMConfig, RoleConfig
from mstar.llm.retry import RetryPolicy
from mstar.llm.types import Backend, LLMError

CACHE_MODES = ("reuse", "replay", "off")
BACKENDS = ("offline", "openai", "command")


@dataclass(frozen=True)
class RolePolicy:
    """How the router treats one role's calls.

    cache "reuse": identical requests share one answer (task agent, toolkit, judge:
    an extraction asked again by a child is not paid for twice). "replay": the n-th
    identical request of a run gets the n-th stored answer, so a role that samples
    (the reflector) still gets fresh answers within a run, while re-running a run
    replays it exactly. "off": no cache.
    """

    concurrency: int = 64
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    cache: str = "off"

    def __post_init__(self):
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.cache not in CACHE_MODES:
            raise ValueError(f"cache mode must be one of {', '.join(CACHE_MODES)}, got {self.cache!r}")


def cache_mode(role: str, rc: RoleConfig) -> str:
    """Resolve cache = "auto": the offline backend is deterministic and instant, so caching
    it buys nothing; the reflector replays; every other role reuses."""
    if rc.cache != "auto":
        if rc.cache not in CACHE_MODES:
            raise LLMError(f"role {role!r}: cache must be auto, {', '.join(CACHE_MODES)}; got {rc.cache!r}")
        return rc.cache
    if rc.backend == "offline":
        return "off"
    return "replay" if role == "reflector" else "reuse"


def make_backend(role: str, cfg: LLMConfig, *, seed: int = 0, env: dict | None = None) -> Backend:
    rc = cfg.role(role)
    if rc.backend == "offline":
        from mstar.llm.offline_backend import OfflineBackend
        return OfflineBackend(role, seed=seed)
    if rc.backend == "openai":
        from mstar.llm.openai_backend import OpenAIBackend
        return OpenAIBackend(role, rc, env=env)
    if rc.backend == "command":
        from mstar.llm.command_backend import CommandBackend
        return CommandBackend(role, rc.command, timeout_s=rc.timeout_s, model=rc.model)
    raise LLMError(f"role {role!r}: unknown backend {rc.backend!r} (use {', '.join(BACKENDS)})")


def backend_identity(backend: Backend) -> dict:
    """Who answers: part of the cache key (never the key or the timeout)."""
    return {"backend": backend.name, "model": backend.model,
            "base_url": getattr(backend, "base_url", None), "command": getattr(backend, "argv", None)}

"""One interface, four roles: who serves each role, and how a call survives.

`LLMRouter.call(role, messages)` is the only way the engine talks to a model:
  1. the response cache (when the role uses it) may answer without a request;
  2. otherwise the role's backend is called, at most `concurrency` calls of a
     role at once, with retries and backoff on transient failures (retry.py);
  3. every call -- served, cached or failed -- goes to the ledger (ledger.py),
     which prices it, feeds the budget and appends it to the run's llm_usage.jsonl.
Thread-safe: evaluations call the task role from a thread pool.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from mstar.config import ROLES, LLMConfig, RoleConfig
from mstar.llm.cache import ResponseCache, request_key
from mstar.llm.ledger import Ledger, call_kind
from mstar.llm import scope as llm_scope
from mstar.llm.prices import PriceTable
from mstar.llm.budget import Budget
from mstar.llm.retry import RetryPolicy, retry_delay
from mstar.llm.slots import NORMAL, Slots
from mstar.llm.types import (Backend, ChatResponse, LLMError, TransientLLMError, TruncatedCompletionError,
                             UsageRecord)

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


class LLMRouter:
    def __init__(self, backends: dict[str, Backend], on_usage: Callable[[UsageRecord], None] | None = None, *,
                 policies: dict[str, RolePolicy] | None = None, cache: ResponseCache | None = None,
                 ledger: Ledger | None = None, sleep: Callable[[float], None] = time.sleep):
        missing = [r for r in ROLES if r not in backends]
        if missing:
            raise ValueError(f"no backend for roles: {', '.join(missing)}")
        self._backends = backends
        self._policies = {r: (policies or {}).get(r, RolePolicy()) for r in backends}
        self._slots = {r: Slots(p.concurrency) for r, p in self._policies.items()}
        self.cache = cache
        self.ledger = ledger or Ledger()
        if on_usage is not None:
            self.ledger.on_record = on_usage
        self._sleep = sleep
        self._seen: dict[str, int] = {}          # replay mode: how often each request was asked
        self._asked: list[tuple[str | None, str]] = []   # ... in which order, and in which scope
        self._seen_lock = threading.Lock()
        self._flight = {r: 0 for r in backends}  # calls waiting on each role's backend right now
        self._flight_lock = threading.Lock()
        # Told of every failed attempt, retried or not: (role, kind, message) -- the live progress
        # display counts retries and prints the first error of each kind (mstar.run.eval_progress).
        self.on_attempt_error: Callable[[str, str, str], None] | None = None
        self.eval_progress = None  # a tracker executors report evaluation progress to (set by the CLI)

    @classmethod
    def from_config(cls, cfg: LLMConfig, *, seed: int = 0, on_usage=None,
                    on_warning: Callable[[str], None] | None = None, env: dict | None = None) -> "LLMRouter":
        env = os.environ if env is None else env
        backends = {r: make_backend(r, cfg, seed=seed, env=env) for r in ROLES}
        policies = {}
        for r in ROLES:
            rc = cfg.role(r)
            try:
                policies[r] = RolePolicy(rc.concurrency, RetryPolicy(rc.max_retries, rc.backoff_s),
                                         cache_mode(r, rc))
            except ValueError as exc:
                raise LLMError(f"role {r!r}: {exc}") from None
        try:
            prices = PriceTable(cfg.prices)
            budget = Budget(cfg.max_usd, cfg.max_tokens)
        except ValueError as exc:
            raise LLMError(str(exc)) from None
        if cfg.max_usd is not None:
            unpriced = [(r, b.model) for r, b in backends.items() if prices.lookup(b.model, b.name) is None]
            if unpriced:
                r, m = unpriced[0]
                raise LLMError(f"--max-usd needs a price for model {m!r} (role {r!r}): add "
                               f"[llm.prices.\"{m}\"] with input and output (USD per million tokens) "
                               "to the config file")
        cache = None
        if cfg.cache_dir and any(p.cache != "off" for p in policies.values()):
            cache = ResponseCache(cfg.cache_dir)
        ledger = Ledger(prices, budget=budget, on_warning=on_warning)
        return cls(backends, on_usage=on_usage, policies=policies, cache=cache, ledger=ledger)

    def backend(self, role: str) -> Backend:
        return self._backends[role]

    def policy(self, role: str) -> RolePolicy:
        return self._policies[role]

    def preflight(self, roles=None) -> list:
        """One cheap call to each role served by an endpoint, before a run spends anything
        (mstar/llm/preflight.py): a wrong key or model costs seconds, not a seed evaluation."""
        from mstar.llm.preflight import check_roles
        return check_roles(self, roles)

    def attempt_failed(self, role: str, kind: str, message: str) -> None:
        if self.on_attempt_error is not None:
            self.on_attempt_error(role, kind, message)

    def describe(self) -> dict[str, str]:
        """Which backend and model serve each role (shown by the CLI)."""
        out = {}
        for r, b in self._backends.items():
            where = getattr(b, "base_url", None) or " ".join(getattr(b, "argv", None) or [])
            pol = self._policies[r]
            extra = f" @ {where}" if where else ""
            if b.name != "offline":
                extra += f"  (at most {pol.concurrency} at once, {pol.retry.max_retries} retries, cache {pol.cache})"
            out[r] = f"{b.name}:{b.model}{extra}"
        return out

    # ------------------------------------------------------------ calls
    def call(self, role: str, messages: list[dict], *, allow_truncated: bool = True,
             priority: int = NORMAL) -> ChatResponse:
        """One completion. A truncated reply (finish_reason "length") is returned, flagged, to
        callers that handle it (the reflector's patch parser) and raised for `text()` callers.
        When more calls wait for the role's slots than it may send, `priority` orders them
        (mstar/llm/slots.py: FIRST, NORMAL, LAST)."""
        if role not in self._backends:
            raise LLMError(f"unknown LLM role {role!r}; roles are {', '.join(ROLES)}")
        backend, pol = self._backends[role], self._policies[role]
        kind = call_kind(role, messages)
        key = self._cache_key(backend, pol, messages)
        t0 = time.perf_counter()
        if key is not None:
            hit = self.cache.get(key)
            if hit is not None:
                hit.cache_hit, hit.latency_s = True, time.perf_counter() - t0
                self._record(role, hit, kind, [])
                return hit
        errors: list[str] = []
        resp: ChatResponse | None = None
        for attempt in range(pol.retry.max_retries + 1):
            retry_after = None
            with self._slots[role].held(priority), self._flying(role):
                try:
                    resp = backend.complete(messages)
                except TransientLLMError as exc:
                    errors.append(str(exc))
                    retry_after = exc.retry_after
                    self.attempt_failed(role, exc.kind, str(exc))
                except LLMError as exc:
                    errors.append(str(exc))
                    self.attempt_failed(role, type(exc).__name__, str(exc))
                    self._record_failure(role, backend, kind, str(exc), errors, t0)
                    raise
                except Exception as exc:  # a backend bug or an unexpected client error: no retry
                    err = LLMError(f"role {role!r}: {type(exc).__name__}: {exc}")
                    errors.append(str(err))
                    self._record_failure(role, backend, kind, str(err), errors, t0)
                    raise err from exc
            if resp is not None and resp.finish_reason == "length" and not allow_truncated \
                    and not _at_token_limit(backend, resp):
                # Cut short below the role's own limit: the server's fault, worth another try.
                errors.append(f"role {role!r}: reply cut short (finish_reason=length after "
                              f"{resp.completion_tokens} tokens, below the role's max_tokens)")
                self.attempt_failed(role, "truncated", errors[-1])
                resp = None
            if resp is not None:
                break
            if attempt < pol.retry.max_retries:
                self._sleep(retry_delay(pol.retry, attempt + 1, retry_after))
        if resp is None:
            msg = (f"role {role!r}: gave up after {len(errors)} attempt(s); last error: {errors[-1]}")
            self._record_failure(role, backend, kind, msg, errors, t0)
            raise LLMError(msg)
        resp.latency_s = time.perf_counter() - t0
        if resp.finish_reason == "length" and not allow_truncated:
            msg = (f"role {role!r}: the completion was truncated at the role's token limit "
                   f"(finish_reason=length, {resp.completion_tokens} tokens); raise max_tokens for this role")
            self._record(role, resp, kind, errors, error=msg)
            raise TruncatedCompletionError(msg)
        if key is not None:
            self.cache.put(key, resp, role=role)
        self._record(role, resp, kind, errors)
        return resp

    # ------------------------------------------------------------ in flight
    def _flying(self, role: str):
        router = self

        class _Flying:
            def __enter__(self):
                with router._flight_lock:
                    router._flight[role] += 1

            def __exit__(self, *exc):
                with router._flight_lock:
                    router._flight[role] -= 1
        return _Flying()

    def in_flight(self) -> dict[str, int]:
        """Calls waiting on each role's backend at this moment (for the progress line)."""
        with self._flight_lock:
            return dict(self._flight)

    # ------------------------------------------------------------ replay counters, for resume
    def replay_mark(self) -> int:
        """Position in the list of replay-mode requests; `replay_since(mark)` lists those after it."""
        with self._seen_lock:
            return len(self._asked)

    def replay_since(self, mark: int) -> list[str]:
        """The replay-mode request keys asked since `mark`, in order. The loop stores them in each
        iteration event: a resumed run restores its counters from them (`restore_replay`), so the
        n-th identical prompt still gets the n-th stored reply -- e.g. a compile-fix prompt (which
        does not name its iteration) that an earlier iteration asked too."""
        with self._seen_lock:
            return [key for _, key in self._asked[mark:]]

    def replay_keys(self, scope: str) -> list[str]:
        """The replay-mode request keys asked in `scope` (llm.scope), in order: what one
        iteration asked even while other iterations asked theirs."""
        with self._seen_lock:
            return [key for s, key in self._asked if s == scope]

    def restore_replay(self, keys: list[str]) -> None:
        """Count `keys` as asked already (what completed iterations asked before a crash)."""
        with self._seen_lock:
            for key in keys:
                if isinstance(key, str):
                    self._seen[key] = self._seen.get(key, 0) + 1
                    self._asked.append((None, key))

    def text(self, role: str, messages: list[dict]) -> str:
        return self.call(role, messages, allow_truncated=False).text

    def _cache_key(self, backend: Backend, pol: RolePolicy, messages: list[dict]) -> str | None:
        if self.cache is None or pol.cache == "off":
            return None
        params = backend.request_params() if hasattr(backend, "request_params") else {}
        key = request_key(backend_identity(backend), messages, params)
        if pol.cache == "replay":
            with self._seen_lock:
                n = self._seen.get(key, 0)
                self._seen[key] = n + 1
                self._asked.append((llm_scope.current(), key))
            key = request_key(backend_identity(backend), messages, params, occurrence=n)
        return key

    def _record(self, role: str, resp: ChatResponse, kind: str, errors: list[str], error: str | None = None) -> None:
        self.ledger.add(UsageRecord(
            role, resp.model, resp.backend, resp.prompt_tokens, resp.completion_tokens, round(resp.latency_s, 4),
            error=error, cached_tokens=resp.cached_tokens, cache_hit=resp.cache_hit, retries=len(errors),
            attempt_errors=list(errors), kind=kind, finish_reason=resp.finish_reason, scope=llm_scope.current()))

    def _record_failure(self, role: str, backend: Backend, kind: str, message: str, errors: list[str],
                        t0: float) -> None:
        self.ledger.add(UsageRecord(
            role, backend.model, backend.name, 0, 0, round(time.perf_counter() - t0, 4), error=message,
            retries=max(0, len(errors) - 1), attempt_errors=list(errors), kind=kind, scope=llm_scope.current()))

    # ------------------------------------------------------------ the ledger, for the loop and the CLI
    @property
    def records(self) -> list[UsageRecord]:
        return self.ledger.records

    @property
    def _lock(self):  # older callers extend `records` under this lock
        return self.ledger._lock

    def totals(self) -> dict[str, dict]:
        """Calls, tokens, cost, cache hits, retries and errors per role so far."""
        return self.ledger.totals()

    def mark(self) -> int:
        """Position in the ledger; `since(mark)` sums what happened after it."""
        return self.ledger.mark()

    def since(self, mark: int) -> dict:
        return self.ledger.since(mark)

    def spent_in(self, scope: str) -> dict:
        """The ledger's sums over the calls stamped with `scope` (llm.scope)."""
        return self.ledger.in_scope(scope)

    def report(self) -> dict:
        """The ledger's sums for summary.json, with the response cache's own counters."""
        out = self.ledger.report()
        if self.cache is not None:
            out["cache"] = {"dir": str(self.cache.directory), "hits": self.cache.hits, "misses": self.cache.misses,
                            "stored": self.cache.stores, "errors": list(self.cache.errors)}
        return out

    def stop_reason(self, in_flight: int = 0) -> str | None:
        """Before an iteration starts, `in_flight` others running: why the run must stop (a
        budget, which reserves each of them the largest iteration cost so far), or None."""
        return self.ledger.stop_reason(in_flight)

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()


def _at_token_limit(backend: Backend, resp: ChatResponse) -> bool:
    """Did a finish_reason=length reply really reach the role's max_tokens? (Else the server cut
    it short, which a retry may fix.)"""
    params = backend.request_params() if hasattr(backend, "request_params") else {}
    limit = params.get("max_tokens") or params.get("max_completion_tokens")
    return limit is not None and resp.completion_tokens >= int(limit)

"""One interface, four roles: who serves each role, and how a call survives.

`LLMRouter.call(role, messages)` is the only way the engine talks to a model:
  1. the response cache (when the role uses it) may answer without a request, and an
     identical request already out is waited for instead of sent again (single_flight.py);
  2. otherwise the role's backend is called: at most `concurrency` calls of a role and
     `max_in_flight` calls of the whole run at once (slots.py), each paced by its endpoint's
     shared limiter (limiter.py: a 429 slows every caller of that endpoint, and is a wait, not
     a failure), with retries and backoff on other transient failures (retry.py);
  3. every call -- served, cached or failed -- goes to the ledger (ledger.py),
     which prices it, feeds the budget and appends it to the run's llm_usage.jsonl.
Who serves each role and how its replies are cached: roles.py. Thread-safe: evaluations call
the task role from a thread pool.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Callable

from mstar.config import ROLES, LLMConfig
from mstar.llm.cache import ResponseCache, request_key
from mstar.llm.ledger import Ledger, call_kind
from mstar.llm import scope as llm_scope
from mstar.llm.prices import PriceTable, how_to_price
from mstar.llm.budget import Budget
from mstar.llm.limiter import DEFAULT_PATIENCE_S, limiters_for_roles, token_estimate
from mstar.llm.replay import ReplayCounter
from mstar.llm.roles import BACKENDS, CACHE_MODES, RolePolicy, backend_identity, cache_mode, make_backend  # noqa: F401
from mstar.llm.single_flight import Flights, TakenOver, joined_reply
from mstar.llm.retry import RetryPolicy, retry_delay
from mstar.llm.slots import NORMAL, BackgroundShare, Slots
from mstar.llm.types import (Backend, CallCancelled, ChatResponse, LLMError, TransientLLMError,
                             TruncatedCompletionError, UsageRecord)

class LLMRouter:
    def __init__(self, backends: dict[str, Backend], on_usage: Callable[[UsageRecord], None] | None = None, *,
                 policies: dict[str, RolePolicy] | None = None, cache: ResponseCache | None = None,
                 ledger: Ledger | None = None, sleep: Callable[[float], None] = time.sleep,
                 max_in_flight: int = 64, pacing: dict[str, tuple] | None = None,
                 rate_limit_patience_s: float = DEFAULT_PATIENCE_S):
        missing = [r for r in ROLES if r not in backends]
        if missing:
            raise ValueError(f"no backend for roles: {', '.join(missing)}")
        if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise ValueError(f"--max-in-flight must be a whole number >= 1, got {max_in_flight!r}")
        self._backends = backends
        self._policies = {r: (policies or {}).get(r, RolePolicy()) for r in backends}
        self._slots = {r: Slots(p.concurrency) for r, p in self._policies.items()}
        # One cap over every role and endpoint (the per-role slots above sit inside it): the run
        # never has more than max_in_flight requests out at once.
        self.max_in_flight = max_in_flight
        self._cap = Slots(max_in_flight)
        self.background = BackgroundShare(max_in_flight)   # background work's part of it (slots.py)
        self._flights = Flights()
        self.limiters, self._limiter_of = limiters_for_roles(backends, pacing or {}, rate_limit_patience_s)
        self.cache = cache
        self.ledger = ledger or Ledger()
        if on_usage is not None:
            self.ledger.on_record = on_usage
        self._sleep = sleep
        self._replay = ReplayCounter()           # replay mode: the n-th identical request (replay.py)
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
                raise LLMError(f"--max-usd needs a price for model {m!r} (role {r!r}): give "
                               + how_to_price(m))
        cache = None
        if cfg.cache_dir and any(p.cache != "off" for p in policies.values()):
            cache = ResponseCache(cfg.cache_dir)
        ledger = Ledger(prices, budget=budget, on_warning=on_warning)
        pacing = {r: (cfg.role(r).rpm, cfg.role(r).tpm) for r in ROLES}
        try:
            return cls(backends, on_usage=on_usage, policies=policies, cache=cache, ledger=ledger,
                       max_in_flight=cfg.max_in_flight, pacing=pacing,
                       rate_limit_patience_s=cfg.rate_limit_patience_s)
        except ValueError as exc:
            raise LLMError(str(exc)) from None

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
        if llm_scope.cancelled():
            raise CallCancelled(f"role {role!r}: not sent, its work was cancelled")
        behind = llm_scope.background_priority()
        if behind is not None:   # e.g. a guess at the next iteration's work never delays this iteration's
            priority = behind
        backend = self._backends[role]
        kind = call_kind(role, messages)
        key = self._cache_key(backend, self._policies[role], messages)
        t0 = time.perf_counter()
        if key is None:
            return self._request(role, backend, messages, kind, key, t0, allow_truncated, priority)
        while True:
            hit = self.cache.get(key)
            if hit is not None:
                return self._hit(role, hit, kind, t0)
            # Single flight: an identical request already out is waited for, not sent again.
            # A call more urgent than a leader still waiting for its slots sends it instead.
            leader, flight = self._flights.lead(key, (behind is not None, priority))
            if not leader:
                resp = flight.wait()
            else:
                try:
                    resp = self._request(role, backend, messages, kind, key, t0, allow_truncated, priority, flight)
                except TakenOver:      # a call the run waits on sent it meanwhile (single_flight.py)
                    resp = flight.taken_by.wait()
                    self._flights.land(key, flight, resp)
                except BaseException:
                    self._flights.land(key, flight, None)
                    raise
                else:
                    self._flights.land(key, flight, resp)
                    return resp
            if resp is not None:
                shared = joined_reply(resp, time.perf_counter() - t0)
                if shared.finish_reason != "length" or allow_truncated:
                    return self._hit(role, shared, kind, t0)
            # The request it waited for failed (or was cut short for this caller): ask again.

    def _hit(self, role: str, resp: ChatResponse, kind: str, t0: float) -> ChatResponse:
        resp.cache_hit, resp.latency_s = True, time.perf_counter() - t0
        self._record(role, resp, kind, [])
        return resp

    def _request(self, role: str, backend: Backend, messages: list[dict], kind: str, key: str | None, t0: float,
                 allow_truncated: bool, priority: int, flight=None) -> ChatResponse:
        """Send the request (retries, limiter, slots) and record it; stores a good reply in the cache."""
        pol, limiter = self._policies[role], self._limiter_of.get(role)
        errors: list[str] = []
        resp: ChatResponse | None = None
        refused, held = 0, 0.0
        estimate = token_estimate(messages, backend) if limiter is not None else 0.0
        attempt, alone = 0, 0.0
        while attempt <= pol.retry.max_retries:
            retry_after = None
            if alone > 0:             # a rare 429: this call waits its Retry-After, holding no slot
                self._sleep(alone)
                held += alone
                alone = 0.0
            with self.background.held(llm_scope.background_priority()), self._slots[role].held(priority):
                if llm_scope.cancelled():   # cancelled while it waited for a slot
                    raise CallCancelled(f"role {role!r}: not sent, its work was cancelled")
                if limiter is not None:
                    t_ask = time.monotonic()
                    try:
                        sent_at = limiter.acquire(priority, estimate)
                    except LLMError as exc:     # RateLimitedError: the endpoint refused everything too long
                        errors.append(str(exc))
                        self._record_failure(role, backend, kind, str(exc), errors, t0, refused, held)
                        raise
                    held += sent_at - t_ask
                with self._cap.held(priority), self._flying(role):
                    if flight is not None and not self._flights.sending(flight):
                        if limiter is not None:
                            limiter.released()
                        raise TakenOver()       # a call the run waits on sent it meanwhile
                    try:
                        resp = backend.complete(messages)
                    except TransientLLMError as exc:
                        if exc.kind == "rate_limit" and limiter is not None:
                            # Not a failure: the call waits for its turn again (mstar/llm/limiter.py).
                            alone = limiter.refused(sent_at, exc.retry_after, exc.hints, exc.limit, estimate)
                            refused += 1
                            self.attempt_failed(role, "rate_limit", str(exc))
                            continue
                        errors.append(str(exc))
                        retry_after = exc.retry_after
                        self.attempt_failed(role, exc.kind, str(exc))
                        if limiter is not None:
                            limiter.released()
                    except LLMError as exc:
                        errors.append(str(exc))
                        self.attempt_failed(role, type(exc).__name__, str(exc))
                        self._record_failure(role, backend, kind, str(exc), errors, t0, refused, held)
                        raise
                    except Exception as exc:  # a backend bug or an unexpected client error: no retry
                        err = LLMError(f"role {role!r}: {type(exc).__name__}: {exc}")
                        errors.append(str(err))
                        self._record_failure(role, backend, kind, str(err), errors, t0, refused, held)
                        raise err from exc
                    else:
                        if limiter is not None:
                            limiter.served(resp.hints, resp.prompt_tokens + resp.completion_tokens - estimate)
            attempt += 1
            if resp is not None and resp.finish_reason == "length" and not allow_truncated \
                    and not _at_token_limit(backend, resp):
                # Cut short below the role's own limit: the server's fault, worth another try.
                errors.append(f"role {role!r}: reply cut short (finish_reason=length after "
                              f"{resp.completion_tokens} tokens, below the role's max_tokens)")
                self.attempt_failed(role, "truncated", errors[-1])
                resp = None
            if resp is not None:
                break
            if attempt <= pol.retry.max_retries:
                self._sleep(retry_delay(pol.retry, attempt, retry_after))
        if resp is None:
            msg = (f"role {role!r}: gave up after {len(errors)} attempt(s); last error: {errors[-1]}")
            self._record_failure(role, backend, kind, msg, errors, t0, refused, held)
            raise LLMError(msg)
        resp.latency_s = time.perf_counter() - t0
        if resp.finish_reason == "length" and not allow_truncated:
            msg = (f"role {role!r}: the completion was truncated at the role's token limit "
                   f"(finish_reason=length, {resp.completion_tokens} tokens); raise max_tokens for this role")
            self._record(role, resp, kind, errors, error=msg, refused=refused, held=held)
            raise TruncatedCompletionError(msg)
        if key is not None:
            self.cache.put(key, resp, role=role)
        self._record(role, resp, kind, errors, refused=refused, held=held)
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

    def set_max_in_flight(self, n: int) -> None:
        """A smaller cap for this router, before its first call (the Ray executor gives the rest of
        the run's cap to the cluster's gate: mstar/execution/ray_gate.py)."""
        self.max_in_flight, self._cap, self.background = n, Slots(n), BackgroundShare(n)

    def throttling(self) -> list[dict]:
        """Each endpoint limiter's state (mstar/llm/limiter.py): 429s, seconds held, pace."""
        return [lim.status() for lim in self.limiters.values()]

    def in_flight(self) -> dict[str, int]:
        """Calls waiting on each role's backend at this moment (for the progress line)."""
        with self._flight_lock:
            return dict(self._flight)

    # ------------------------------------------------------------ replay counters, for resume (replay.py)
    def replay_mark(self) -> int:
        return self._replay.mark()

    def replay_since(self, mark: int) -> list[str]:
        """The replay-mode request keys asked since `mark`, in order (stored in iteration events)."""
        return self._replay.since(mark)

    def replay_keys(self, scope: str) -> list[str]:
        return self._replay.keys(scope)

    def restore_replay(self, keys: list[str]) -> None:
        self._replay.restore(keys)

    @property
    def _seen(self) -> dict[str, int]:
        return self._replay.seen

    def text(self, role: str, messages: list[dict]) -> str:
        return self.call(role, messages, allow_truncated=False).text

    def _cache_key(self, backend: Backend, pol: RolePolicy, messages: list[dict]) -> str | None:
        if self.cache is None or pol.cache == "off":
            return None
        params = backend.request_params() if hasattr(backend, "request_params") else {}
        key = request_key(backend_identity(backend), messages, params)
        if pol.cache == "replay":
            key = request_key(backend_identity(backend), messages, params, occurrence=self._replay.ask(key))
        return key

    def _record(self, role: str, resp: ChatResponse, kind: str, errors: list[str], error: str | None = None,
                refused: int = 0, held: float = 0.0) -> None:
        llm_scope.charge(self.ledger.add(UsageRecord(
            role, resp.model, resp.backend, resp.prompt_tokens, resp.completion_tokens, round(resp.latency_s, 4),
            error=error, cached_tokens=resp.cached_tokens, cache_hit=resp.cache_hit, retries=len(errors),
            attempt_errors=list(errors), kind=kind, finish_reason=resp.finish_reason, scope=llm_scope.current(),
            rate_limited=refused, held_s=round(held, 4))))

    def _record_failure(self, role: str, backend: Backend, kind: str, message: str, errors: list[str],
                        t0: float, refused: int = 0, held: float = 0.0) -> None:
        llm_scope.charge(self.ledger.add(UsageRecord(
            role, backend.model, backend.name, 0, 0, round(time.perf_counter() - t0, 4), error=message,
            retries=max(0, len(errors) - 1), attempt_errors=list(errors), kind=kind, scope=llm_scope.current(),
            rate_limited=refused, held_s=round(held, 4))))

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
        out["max_in_flight"] = self.max_in_flight
        out["single_flight_shared"] = self._flights.shared
        if self.limiters:
            out["endpoints"] = [{k: v for k, v in st.items() if k != "throttling"} for st in self.throttling()]
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

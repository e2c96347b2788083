"""One gate for every LLM call a cluster's evaluations make (`--executor ray`).

Each Ray worker process runs its evaluations with a router of its own; left alone, each would
keep its own cap on calls in flight and its own limiter per endpoint, so a cluster of eight
workers could send eight times --max-in-flight at once and hear each 429 eight times apart.
Instead the run starts one `LLMGate` actor (a threaded Ray actor: every call waits in a thread
of its own) that holds the one router every worker's calls go through: one cap, one shared
limiter per endpoint, one single-flight table, one response cache connection. A worker's router
is a `GatedRouter`: it forwards each call to the gate, enters the gate's usage record for it in
its own ledger (which goes back to the driver with the evaluation, as before) and raises the
gate's error as its own.

The driver keeps its own router for the reflector's calls, at most one per iteration in flight:
the gate is given --max-in-flight minus `--parallel` calls and the driver the rest, so the run
as a whole never has more than --max-in-flight out.
"""
from __future__ import annotations

import threading

from mstar.config import LLMConfig, ROLES, RoleConfig
from mstar.llm import scope as llm_scope
from mstar.llm.ledger import Ledger
from mstar.llm.router import LLMRouter
from mstar.llm.slots import NORMAL
from mstar.llm.types import LLMError


def _llm_config(data: dict) -> LLMConfig:
    return LLMConfig(**{k: (RoleConfig(**v) if k in ROLES else v) for k, v in data.items()})


class _HandOn(Ledger):
    """The gate's ledger keeps nothing: each record goes back to the worker that asked (whose
    ledger goes to the driver's), so a long run does not pile records up in the actor."""

    def add(self, rec):
        self.on_record(rec)
        return rec


class LLMGate:
    """The actor's class (made remote by the executor, max_concurrency > its cap)."""

    def __init__(self, llm: dict, seed: int) -> None:
        self.router = LLMRouter.from_config(_llm_config(llm), seed=seed)
        self._mine = threading.local()
        self.router.ledger = _HandOn(on_record=lambda rec: self._mine.records.append(rec))

    def call(self, role: str, messages: list[dict], allow_truncated: bool, priority: int):
        """(reply or None, the usage records of this call, the error or None)."""
        self._mine.records = []
        try:
            return self.router.call(role, messages, allow_truncated=allow_truncated, priority=priority), \
                self._mine.records, None
        except LLMError as exc:
            return None, self._mine.records, exc

    def throttling(self) -> list[dict]:
        return self.router.throttling()


class GatedRouter(LLMRouter):
    """A worker's router: its calls go through the run's gate (attach it with `through`)."""

    gate = None

    def through(self, gate) -> "GatedRouter":
        self.gate = gate
        return self

    def call(self, role: str, messages: list[dict], *, allow_truncated: bool = True, priority: int = NORMAL):
        import ray

        resp, records, error = ray.get(self.gate.call.remote(role, messages, allow_truncated, priority))
        for rec in records:
            rec.scope = llm_scope.current()
            self.ledger.add(rec)
        if error is not None:
            raise error
        return resp

"""Which step of a run an LLM call belongs to, carried in a context variable.

With several iterations in flight at once, "the calls since this iteration began" is no longer
a stretch of the ledger: calls of different iterations interleave. The loop sets the scope
("seed_vector_search", "iter_007", "test") for the work of one step, the router stamps every
call with it, and the ledger sums by scope. Threads do not inherit context variables, so work
handed to a pool goes through `submit` (or `bind`), which carries the caller's scope along.
"""
from __future__ import annotations

import contextvars
from concurrent.futures import Executor, Future
from typing import Any, Callable

_scope: contextvars.ContextVar[str | None] = contextvars.ContextVar("mstar_llm_scope", default=None)
# The next iteration's rotating evaluations run ahead (mstar/rotating_prefetch.py): in no lineage event,
# so what reads spend from the events adds this scope from the ledger (mstar/run/projection.py).
PREFETCH = "prefetch"
# Work that may use only the calls in flight the rest leaves free: the router sends its calls last
# (mstar/llm/slots.py). The prefetch's guesses, the best seed's test while the race runs.
_background: contextvars.ContextVar[bool] = contextvars.ContextVar("mstar_llm_background", default=False)


def current() -> str | None:
    return _scope.get()


def in_background() -> bool:
    return _background.get()


class background:
    """`with background(): ...` -- calls made inside (and in work submitted through `submit`) wait
    behind every other call for the endpoint's slots."""

    def __enter__(self) -> "background":
        self._token = _background.set(True)
        return self

    def __exit__(self, *exc: Any) -> None:
        _background.reset(self._token)


class scoped:
    """`with scoped("iter_003"): ...` -- calls made inside (and in work submitted through
    `submit`) are stamped with the scope."""

    def __init__(self, name: str | None) -> None:
        self.name = name

    def __enter__(self) -> "scoped":
        self._token = _scope.set(self.name)
        return self

    def __exit__(self, *exc: Any) -> None:
        _scope.reset(self._token)


def submit(pool: Executor, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
    """pool.submit that runs `fn` in a copy of the caller's context (its scope included)."""
    return pool.submit(contextvars.copy_context().run, fn, *args, **kwargs)


def bind(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` bound to the caller's context, for pool.map and callbacks."""
    ctx = contextvars.copy_context()
    return lambda *a, **k: ctx.copy().run(fn, *a, **k)


def bind_fallback(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` run in the calling thread's scope when it has one, else in the caller's of `bind_fallback`.
    For a kept knowledge base's toolkit: the sandbox serves a read's LLM requests in the thread
    that waits on that read, so a later evaluation (a parent's rotating batch, the confirmation)
    is charged for the calls it causes, not the evaluation that first built the knowledge base."""
    ctx = contextvars.copy_context()

    def run(*a: Any, **k: Any) -> Any:
        if _scope.get() is not None:
            return fn(*a, **k)
        return ctx.copy().run(fn, *a, **k)
    return run

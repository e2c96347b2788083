"""Which step of a run an LLM call belongs to, carried in a context variable.

With several iterations in flight at once, "the calls since this iteration began" is no longer
a stretch of the ledger: calls of different iterations interleave. The loop sets the scope
("seed_vector_search", "iter_007", "test") for the work of one step, the router stamps every
call with it, and the ledger sums by scope. Threads do not inherit context variables, so work
handed to a pool goes through `submit` (or `bind`), which carries the caller's scope along.
"""
from __future__ import annotations

import contextvars
import threading
from concurrent.futures import Executor, Future
from typing import Any, Callable

from mstar.llm.slots import LAST

_scope: contextvars.ContextVar[str | None] = contextvars.ContextVar("mstar_llm_scope", default=None)
# The next iteration's rotating evaluations run ahead (mstar/iteration/rotating_prefetch.py): in no lineage event,
# so what reads spend from the events adds this scope from the ledger (mstar/run/projection.py).
PREFETCH = "prefetch"
# Work that may use only the calls in flight the rest leaves free: the router sends its calls after
# the others (mstar/llm/slots.py), and never more than half the run's cap at once, so that the calls
# the run waits on find slots free. The prefetch's guesses, tests started before the run's end.
_background: contextvars.ContextVar["Background | None"] = contextvars.ContextVar("mstar_llm_background",
                                                                                  default=None)


class Background:
    """One piece of background work, as its owner steers it: `promote()` once the run waits on it
    (its calls not yet sent go as any other), `cancel()` once it is needed no more (its calls not
    yet sent fail at once with CallCancelled: the work ends in a moment instead of spending on)."""

    def __init__(self, priority: int = LAST) -> None:   # IDLE: work the run needs only at its end
        self.priority = priority
        self.promoted = False
        self.cancelled = False
        # What its calls sent (cache hits and shared flights are not requests): what a guess cost.
        self.requests = self.prompt_tokens = 0
        self._tally = threading.Lock()

    def charge(self, record) -> None:
        """Count one ledger record (a UsageRecord) made by this work's calls."""
        if record.cache_hit:
            return
        with self._tally:
            self.requests += 1 + record.retries
            self.prompt_tokens += record.prompt_tokens

    def promote(self) -> None:
        self.promoted = True

    def cancel(self) -> None:
        self.cancelled = True


def current() -> str | None:
    return _scope.get()


def in_background() -> bool:
    work = _background.get()
    return work is not None and not work.promoted


def background_priority() -> int | None:
    """The priority of this context's calls when they are background work, else None."""
    work = _background.get()
    return work.priority if work is not None and not work.promoted else None


def charge(record) -> None:
    """The router's note of a call it recorded: the background work it was made for counts it
    (promoted or not: a guess the iteration waits on is still the guess's cost)."""
    work = _background.get()
    if work is not None:
        work.charge(record)


def cancelled() -> bool:
    work = _background.get()
    return work is not None and work.cancelled


class background:
    """`with background(): ...` -- calls made inside (and in work submitted through `submit`) wait
    behind every other call for the endpoint's slots. `work`: the handle its owner keeps."""

    def __init__(self, work: Background | None = None) -> None:
        self.work = work or Background()

    def __enter__(self) -> "background":
        self._token = _background.set(self.work)
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

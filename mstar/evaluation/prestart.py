"""A child's worker started while its gates run.

Between the reflector's reply and a child's first write there are two workers to start: the
gates' (load, smoke test) and then the evaluation's own (fork, jail, load: ~40 ms on this
machine, on the critical path of every iteration). The gates' worker cannot serve the
evaluation -- its smoke test wrote into the knowledge base -- so the evaluation's worker is
started at the same time as the gates, and the evaluation takes it when it begins. A child that
fails its gates has its worker closed unused.

Nothing is spent for a child before its gates pass: a program may not call the LLM while it
loads (the sandbox's budget there is 0), and the worker gets the evaluation's toolkit LLM when the
evaluation takes it.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, Callable

from mstar.evaluation.pools import close_later, shared_pool
from mstar.llm import scope as llm_scope
from sandbox.engine.session import ProgramSession


class Prestarts:
    """Workers started ahead of their evaluation, by program text and session options."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[tuple, tuple[object, ProgramSession, Future]] = {}   # (source, options): token, session, start
        self.started = self.taken = 0   # counts, for tests and benchmarks

    def begin(self, source: str, options: tuple, make: Callable[[Any], ProgramSession]) -> object | None:
        """Start a worker for `source` (`make(llm)` builds its session, here without an LLM); a
        token for `drop`, or None when one is already waiting for this program."""
        key = (source, options)
        with self._lock:
            if key in self._by_key:
                return None
            token = object()
            session = make(None)
            starting = llm_scope.submit(shared_pool("llm"), session.start)
            self._by_key[key] = (token, session, starting)
            self.started += 1
            return token

    def take(self, source: str, options: tuple, llm: Callable[[list[dict]], str]) -> tuple[ProgramSession, Future] | None:
        """The waiting worker for `source` (its start as a future), now serving `llm`; or None."""
        with self._lock:
            found = self._by_key.pop((source, options), None)
            self.taken += found is not None
        if found is None:
            return None
        _, session, starting = found
        session.llm = llm   # served from the first op on; loading makes no LLM call
        return session, starting

    def drop(self, token: object) -> None:
        """Close the worker `begin` returned `token` for, unless an evaluation took it."""
        with self._lock:
            key = next((k for k, v in self._by_key.items() if v[0] is token), None)
            found = self._by_key.pop(key) if key is not None else None
        if found is not None:
            close_later(found[1])

    def drop_all(self) -> None:
        with self._lock:
            tokens = [v[0] for v in self._by_key.values()]
        for token in tokens:
            self.drop(token)


PRESTARTS = Prestarts()   # process-wide, like the evaluations' threads (mstar.evaluation.pools)

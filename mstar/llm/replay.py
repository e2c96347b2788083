"""Replay counters: which occurrence of an identical request this is, for the reflector's cache.

In "replay" mode (mstar/llm/router.py, RolePolicy) the n-th identical request of a run gets the
n-th stored reply, so a role that samples still gets fresh replies within a run while a re-run
replays it exactly. The counters are kept here, in the order the requests were asked and with
the scope (llm.scope) that asked each: the loop stores each iteration's keys in its event, and a
resumed run restores the counters from them (`restore`), so a compile-fix prompt that an earlier
iteration asked too still gets the reply it got the first time.
"""
from __future__ import annotations

import threading

from mstar.llm import scope as llm_scope


class ReplayCounter:
    def __init__(self) -> None:
        self.seen: dict[str, int] = {}                  # how often each request was asked
        self._asked: list[tuple[str | None, str]] = []  # ... in which order, and in which scope
        self._lock = threading.Lock()

    def ask(self, key: str) -> int:
        """Count one asking of `key`; returns how often it was asked before (0 the first time)."""
        with self._lock:
            n = self.seen.get(key, 0)
            self.seen[key] = n + 1
            self._asked.append((llm_scope.current(), key))
            return n

    def mark(self) -> int:
        """Position in the list of requests asked; `since(mark)` lists those after it."""
        with self._lock:
            return len(self._asked)

    def since(self, mark: int) -> list[str]:
        with self._lock:
            return [key for _, key in self._asked[mark:]]

    def keys(self, scope: str) -> list[str]:
        """The keys asked in `scope`, in order: what one iteration asked while others asked theirs."""
        with self._lock:
            return [key for s, key in self._asked if s == scope]

    def restore(self, keys: list[str]) -> None:
        """Count `keys` as asked already (what completed iterations asked before a crash)."""
        with self._lock:
            for key in keys:
                if isinstance(key, str):
                    self.seen[key] = self.seen.get(key, 0) + 1
                    self._asked.append((None, key))

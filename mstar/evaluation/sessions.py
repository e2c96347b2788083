"""Ingested knowledge bases kept alive, so a parent's rotating evaluation costs its reads only.

Evaluating a program on the static set builds its knowledge base in a sandbox worker (every
training episode extracted and written). Without this cache the next iteration that picks the
program as parent starts a new worker and writes every episode again before its five reads.
Here the worker stays up after its evaluation, keyed by program and episode set, and the next
evaluation with the same key only reads.

Bounded (least recently used first out) because each kept worker holds a process and its
memory. A kept session is leased: eviction never closes a session another evaluation is reading
from -- it closes when the last lease ends. A session whose worker died is dropped, and the
next evaluation ingests again.

Caveat, also in the README: a program whose read() changes its knowledge base sees, in a
reused session, the changes the earlier evaluation's reads made. Programs whose reads only read
(the contract's intent) cannot tell the difference.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Sequence

from mstar.evaluation.pools import close_later, drain_closes
from sandbox.engine.session import LoadInfo, ProgramSession

DEFAULT_KEEP = 8


def session_key(source: str, episode_ids: Sequence[str]) -> str:
    """Same program text over the same episodes (in order) = the same knowledge base."""
    h = hashlib.sha256(source.encode("utf-8", "surrogatepass"))
    h.update("\x00".join(episode_ids).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


@dataclass
class KeptSession:
    session: ProgramSession
    info: LoadInfo
    writes: list                          # the WriteRecords of its ingestion
    toolkit: object = None                # the toolkit LLM the session was started with
    leases: int = 0
    evicted: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


class SessionCache:
    def __init__(self, keep: int = DEFAULT_KEEP) -> None:
        self.keep = max(0, keep)
        self._kept: OrderedDict[str, KeptSession] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def lease(self, key: str) -> KeptSession | None:
        """A live kept session for `key` (leased: call `release` when done), or None."""
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and not kept.session.alive():
                del self._kept[key]
                kept.evicted = True
                self._close_if_idle(kept)
                kept = None
            if kept is None:
                self.misses += 1
                return None
            self._kept.move_to_end(key)
            kept.leases += 1
            self.hits += 1
            return kept

    def release(self, kept: KeptSession) -> None:
        with self._lock:
            kept.leases -= 1
            self._close_if_idle(kept)

    def put(self, key: str, session: ProgramSession, info: LoadInfo, writes: list, toolkit=None) -> bool:
        """Keep a freshly ingested session (the cache owns it from now on). False -- and the
        session closed -- when nothing is kept or another one with this key is kept already."""
        with self._lock:
            if self.keep == 0 or key in self._kept or not session.alive():
                close_later(session)
                return False
            self._kept[key] = KeptSession(session, info, writes, toolkit)
            while len(self._kept) > self.keep:
                _, old = self._kept.popitem(last=False)
                old.evicted = True
                self._close_if_idle(old)
            return True

    def close(self) -> None:
        with self._lock:
            for kept in self._kept.values():
                kept.evicted = True
                self._close_if_idle(kept)
            self._kept.clear()
        drain_closes()   # every worker of this cache is gone when close() returns

    def __len__(self) -> int:
        return len(self._kept)

    @staticmethod
    def _close_if_idle(kept: KeptSession) -> None:
        if kept.evicted and kept.leases <= 0:
            close_later(kept.session)   # off the caller's path (and out of the cache's lock)


class LoadInfoMemo:
    """What loading a program told the engine (schemas and constants), by program text.

    With it an evaluation can ask its extraction and query-formulation calls before its own
    worker has loaded the program -- the prompts need only the constants and the schemas -- and
    start the worker meanwhile. The gates fill it (they loaded the child a moment ago), and so
    does every evaluation. The worker's own load is still checked against it.
    """

    def __init__(self, keep: int = 256) -> None:
        self.keep = keep
        self._infos: OrderedDict[str, LoadInfo] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, source: str) -> LoadInfo | None:
        with self._lock:
            return self._infos.get(_digest(source))

    def put(self, source: str, info: LoadInfo | None) -> None:
        if info is None:
            return
        with self._lock:
            self._infos[_digest(source)] = info
            while len(self._infos) > self.keep:
                self._infos.popitem(last=False)


def _digest(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()


LOAD_INFO = LoadInfoMemo()   # process-wide: the gates and the evaluations of one engine process

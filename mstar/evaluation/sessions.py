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

A knowledge base being built is announced (`expect`, when the program's evaluation worker is
started ahead: mstar.evaluation.prestart): a guess that wants the same one (the rotating prefetch's
evaluation of the child beside its static evaluation) waits for it instead of writing a second
copy beside it in a second worker -- the same writes on the same 2 cores at the same moment, and
the memory of one more worker. The building evaluation shares it once its writes are done
(`share`: kept, and leased by that evaluation while it reads), not at its end.

The key is the program's writer identity (mstar/evaluation/knowledge_identity.py), not its text:
a child that changed only the prompts the engine builds reads its parent's knowledge base, with
its own prompts (`with_own_constants`); one that changed read() too runs its own read() in the
parent's worker (`fit`: ProgramSession.reader), the first time alone -- a read() that worker has
not run before may kill it, and no other program's evaluation may fail with it.

Caveat, also in the README: a program whose read() changes its knowledge base sees, in a
reused session, the changes the earlier evaluation's reads made (only its own: such a program
never shares another's). Programs whose reads only read (the contract's intent) cannot tell
the difference.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Sequence

from mstar.evaluation.knowledge_identity import knowledge_identity, reader_line_shift, writer_identity
from mstar.evaluation.pools import close_later, drain_closes
from sandbox.engine.session import LoadInfo, ProgramSession, SandboxError

DEFAULT_KEEP = 8
BUILD_WAIT_S = 120.0   # the longest a guess waits for the knowledge base its program's evaluation builds


def session_key(source: str, episode_ids: Sequence[str]) -> str:
    """The same knowledge base: programs of one writer identity (the same text, or texts that differ
    only in what the task agent is told or in read(): mstar.evaluation.knowledge_identity) over the
    same episodes (in order). A lease's LoadInfo is the builder's: `with_own_constants` it for
    another, and `fit` the lease to its read()."""
    h = hashlib.sha256(writer_identity(source).encode("ascii"))
    h.update("\x00".join(episode_ids).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


@dataclass
class KeptSession:
    session: ProgramSession
    info: LoadInfo
    writes: list                          # the WriteRecords of its ingestion
    toolkit: object = None                # the toolkit LLM the session was started with
    write_tokens: int = 0                 # what its writes asked (EvalResult.shared_write_tokens of a reader)
    leases: int = 0
    alone: bool = False                   # leased by a program running its own read() here (`fit`)
    readers: dict = field(default_factory=dict)   # program text -> its read()'s number in the worker
    evicted: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


class SessionCache:
    def __init__(self, keep: int = DEFAULT_KEEP) -> None:
        self.keep = max(0, keep)
        self._kept: OrderedDict[str, KeptSession] = OrderedDict()
        self._lock = threading.Condition()   # notified when a lease ends (`fit` may wait for one)
        self._coming: dict[str, threading.Event] = {}   # knowledge bases being built, by key
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
            if kept is None or kept.alone:
                self.misses += 1
                return None
            self._kept.move_to_end(key)
            kept.leases += 1
            self.hits += 1
            return kept

    def holds(self, key: str) -> bool:
        """Whether a live knowledge base is kept for `key` (an evaluation with this key would only read)."""
        with self._lock:
            kept = self._kept.get(key)
            return kept is not None and kept.session.alive()

    def release(self, kept: KeptSession) -> None:
        with self._lock:
            kept.leases -= 1
            kept.alone = False   # only its holder had it leased
            self._close_if_idle(kept)
            self._lock.notify_all()

    def fit(self, kept: KeptSession, source: str) -> tuple[KeptSession | None, int | None]:
        """A lease made fit for `source`: (kept, None) when `source` reads as the program that built
        it; (kept, its read()'s number) when it reads otherwise -- the first time with the worker
        alone, and its read() made runnable there; after that like any other lease (its read() has
        had that worker to itself once). Else (None, None), the lease released -- another
        evaluation still reads there after as long as writing the knowledge base took, or the
        worker refused the read() -- and `source` builds a knowledge base of its own."""
        if knowledge_identity(kept.session.source) == knowledge_identity(source):
            return kept, None
        number = kept.readers.get(source)
        if number is not None:
            return kept, number
        # Waiting for the other leases to end is worth at most what writing it again would take.
        deadline = time.monotonic() + sum(getattr(w, "seconds", 0.0) for w in kept.writes)
        with self._lock:
            while (kept.leases > 1 or kept.alone) and time.monotonic() < deadline:
                self._lock.wait(deadline - time.monotonic())
            alone = kept.leases == 1 and not kept.alone
            kept.alone = kept.alone or alone
        if alone:
            try:
                shift = reader_line_shift(kept.session.source, source)
                number = kept.readers[source] = kept.session.reader(source, shift)
                return kept, number
            except SandboxError:
                pass
        self.release(kept)
        with self._lock:
            self.hits, self.misses = self.hits - 1, self.misses + 1
        return None, None

    def put(self, key: str, session: ProgramSession, info: LoadInfo, writes: list, toolkit=None,
            write_tokens: int = 0) -> bool:
        """Keep a freshly ingested session (the cache owns it from now on). False -- and the
        session closed -- when nothing is kept or another one with this key is kept already."""
        with self._lock:
            if self.keep == 0 or key in self._kept or not session.alive():
                close_later(session)
                return False
            self._kept[key] = KeptSession(session, info, writes, toolkit, write_tokens)
            self._trim()
            return True

    # ------------------------------------------------------------ knowledge bases being built
    def expect(self, key: str) -> None:
        """An evaluation will build and keep `key`'s knowledge base: others may wait for it."""
        with self._lock:
            if self.keep and key not in self._kept and key not in self._coming:
                self._coming[key] = threading.Event()

    def coming(self, key: str) -> bool:
        with self._lock:
            return key in self._coming

    def built(self, key: str) -> None:
        """The knowledge base expected for `key` is kept, or will not be: its waiters go on."""
        with self._lock:
            event = self._coming.pop(key, None)
        if event is not None:
            event.set()

    def lease_when_built(self, key: str) -> KeptSession | None:
        """`lease(key)` once the knowledge base expected for it is built (at once when none is).
        Waits at most BUILD_WAIT_S: an announcement no evaluation ever answers (the run stopped
        between them) must not hold up whoever waits for the waiter; it then builds its own."""
        with self._lock:
            event = self._coming.get(key)
        if event is not None:
            event.wait(BUILD_WAIT_S)
        return self.lease(key)

    def share(self, key: str, session: ProgramSession, info: LoadInfo, writes: list, toolkit=None,
              write_tokens: int = 0) -> KeptSession | None:
        """Keep a knowledge base whose evaluation still reads from it: leased by that evaluation
        (it calls `release` when done); None when it is not kept (`put`'s conditions). Either way
        its waiters go on."""
        with self._lock:
            kept = None
            if self.keep and key not in self._kept and session.alive():
                kept = self._kept[key] = KeptSession(session, info, writes, toolkit, write_tokens, leases=1)
                self._trim()
        self.built(key)
        return kept

    def _trim(self) -> None:
        while len(self._kept) > self.keep:
            _, old = self._kept.popitem(last=False)
            old.evicted = True
            self._close_if_idle(old)

    def keep_only(self, keys) -> int:
        """Let go of every kept session whose key is not in `keys` (no later evaluation will read
        from it: each holds a worker and its memory); a leased one closes when its lease ends.
        Returns how many were let go."""
        wanted = set(keys)
        with self._lock:
            gone = [k for k in self._kept if k not in wanted]
            for k in gone:
                kept = self._kept.pop(k)
                kept.evicted = True
                self._close_if_idle(kept)
        return len(gone)

    def close(self) -> None:
        with self._lock:
            for kept in self._kept.values():
                kept.evicted = True
                self._close_if_idle(kept)
            self._kept.clear()
            coming, self._coming = list(self._coming.values()), {}
        for event in coming:
            event.set()
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


def load_difference(gated, loaded) -> str:
    """Why two loads of one program text disagree on what the prompts are built from (its
    constants and schemas), or "" when they agree. The prompts of an evaluation were asked with
    the first load's; the second is the knowledge base that answers. A program whose module-level
    values change from load to load (a default of `datetime.now()`, a random constant) cannot be
    scored consistently, so it fails -- and the reflector reads this."""
    def show(value) -> str:
        return _short(json.dumps(value, ensure_ascii=False, default=str), 120)

    found = []
    for name in sorted(set(gated.constants) | set(loaded.constants)):
        if gated.constants.get(name) != loaded.constants.get(name):
            found.append(f"the constant {name}")
    for cls, a, b in (("KnowledgeItem", gated.knowledge_item_schema, loaded.knowledge_item_schema),
                      ("Query", gated.query_schema, loaded.query_schema)):
        by_name = {s.get("name"): s for s in b}
        if [s.get("name") for s in a] != [s.get("name") for s in b]:
            found.append(f"the fields of {cls}")
            continue
        for spec in a:
            other = by_name[spec.get("name")]
            for key in ("type", "description", "required", "default"):
                if spec.get(key) != other.get(key):
                    found.append(f"{cls}.{spec.get('name')} {key} ({show(spec.get(key))}, then {show(other.get(key))})")
    if not found:
        return ""
    return ("the program's schema or constants differ between two loads of the same text: " + "; ".join(found[:5])
            + ". Values computed when the module loads (datetime.now(), random numbers) change every time; compute "
            "them in write() or read(), or use field(default_factory=...) for a default that varies")


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."

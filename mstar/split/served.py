"""Embeddings the engine serves to programs' chroma collections, and the memo behind them.

    ProgramEmbeddings    one model for every worker of this engine process; requests that arrive
                         together encoded as one batch; vectors remembered in a VectorMemo
    SessionEmbeddings    what one ProgramSession is given as `embed=` (ProgramEmbeddings.session())
    VectorMemo           the memo, bounded in bytes and released with its sessions (below)

mstar.split.embed chooses the model (program_embeddings); this module knows nothing of models.

A program decides what its chroma collections embed, so the memo must not let it decide how much
engine memory they take. Keyed by the full texts and capped at 50,000 keys, it held 37,633 texts
of up to 32 KB each -- 1.15 GB -- after three writes, and kept them after the session closed
(issue 30). So here:

  - a key is a 16-byte BLAKE2b digest of the text, never the text itself;
  - the memo is capped in bytes (`max_bytes`, vectors and bookkeeping), least recently used out;
  - every entry is held by the sessions that used it (`owner`), and `release(owner)` -- called
    when a session closes -- drops the entries no live session holds any more. Entries put
    without an owner (a caller outside any session) leave only by the byte cap.

An evaluation's next program reuses the vectors of the episodes the kept sessions of earlier
programs hold; a program that embeds a flood of unique texts evicts its own entries first and
takes them all with it when its session ends.
"""
from __future__ import annotations

import ctypes
import hashlib
import itertools
import threading
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np

ENTRY_OVERHEAD_BYTES = 256   # per entry: the dict slots, the digest object, the array header, the owner set


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class VectorMemo:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = int(max_bytes)
        self.bytes = 0
        self._vectors: OrderedDict[bytes, np.ndarray] = OrderedDict()   # least recently used first
        self._holders: dict[bytes, set[int]] = {}                      # key -> owners holding it
        self._held: dict[int, set[bytes]] = {}                         # owner -> keys it holds
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._vectors)

    def get(self, keys: list[bytes], owner: int | None = None) -> dict[bytes, np.ndarray]:
        """The remembered vectors among `keys`; each becomes the most recent, held by `owner`."""
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            for key in keys:
                vector = self._vectors.get(key)
                if vector is not None:
                    self._vectors.move_to_end(key)
                    found[key] = vector
                    self._hold(key, owner)
        return found

    def put(self, vectors: dict[bytes, np.ndarray], owner: int | None = None) -> None:
        with self._lock:
            for key, vector in vectors.items():
                if key not in self._vectors:
                    self._vectors[key] = vector
                    self._holders[key] = set()
                    self.bytes += vector.nbytes + ENTRY_OVERHEAD_BYTES
                else:
                    self._vectors.move_to_end(key)
                self._hold(key, owner)
            while self.bytes > self.max_bytes and self._vectors:
                self._drop(next(iter(self._vectors)))

    def release(self, owner: int) -> int:
        """`owner` (a session) ended: it holds nothing any more; what nobody holds goes. Returns
        the bytes freed."""
        with self._lock:
            before = self.bytes
            for key in self._held.pop(owner, ()):
                holders = self._holders.get(key)
                if holders is not None:
                    holders.discard(owner)
                    if not holders:
                        self._drop(key)
            return before - self.bytes

    def _hold(self, key: bytes, owner: int | None) -> None:
        if owner is not None:
            self._holders[key].add(owner)
            self._held.setdefault(owner, set()).add(key)

    def _drop(self, key: bytes) -> None:
        vector = self._vectors.pop(key)
        self.bytes -= vector.nbytes + ENTRY_OVERHEAD_BYTES
        for owner in self._holders.pop(key, ()):
            keys = self._held.get(owner)
            if keys is not None:
                keys.discard(key)


class ProgramEmbeddings:
    """The vectors of the programs' chroma collections, served by the engine (ProgramSession's
    `embed=`): one model per engine process for every worker, texts seen before answered from
    a memo (and from the disk cache under `cache_dir`), and the texts of requests that arrive
    together -- concurrent reads -- encoded as one batch.

    The memo (VectorMemo, above) is keyed by digests and capped in bytes, and each session's
    entries go when it closes: give each ProgramSession its own `session()`. Called with a list
    of texts, returns a list of float lists (what the frame pipe carries)."""

    MEMORY_BYTES = 32 * 2**20   # the memo: ~18,000 vectors of 384 floats with their bookkeeping

    def __init__(self, embedder: Any, label: str, memory_bytes: int | None = None) -> None:
        self.embedder, self.label = embedder, label   # embedder: mstar.split.embed.Embedder
        self.name = str(getattr(embedder, "name", type(embedder).__name__))
        self.memo = VectorMemo(memory_bytes or self.MEMORY_BYTES)
        self._owners = itertools.count(1)
        self._cond = threading.Condition()
        self._queue: list[list] = []        # [texts, vectors or None] requests not yet encoded
        self._busy = False
        self.batches = self.texts_encoded = 0

    def session(self) -> "SessionEmbeddings":
        """What one ProgramSession is given as `embed=`: these embeddings, whose memo entries are
        released when that session ends."""
        return SessionEmbeddings(self, next(self._owners))

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        return self.serve(texts)

    def serve(self, texts: Sequence[str], owner: int | None = None) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        texts = [str(t) for t in texts]
        keys = [text_key(t) for t in texts]
        have = self.memo.get(keys, owner)
        missing = {k: t for k, t in zip(keys, texts) if k not in have}
        if missing:
            found = self._encode(list(missing.values()))
            new = {k: found[t] for k, t in missing.items()}
            self.memo.put(new, owner)
            have.update(new)
        return [have[k].tolist() for k in keys]

    def _encode(self, texts: list[str]) -> dict[str, np.ndarray]:
        request: list = [texts, None]
        with self._cond:
            self._queue.append(request)
            while request[1] is None and self._busy:
                self._cond.wait()
            if request[1] is not None:              # another thread encoded it with its own
                return request[1]
            self._busy = True                       # this thread encodes every request waiting
            batch, self._queue = self._queue, []
        try:
            unique = list(dict.fromkeys(t for req in batch for t in req[0]))
            found = dict(zip(unique, np.asarray(self.embedder.embed(unique), dtype=np.float32)))
        except BaseException:
            with self._cond:
                self._busy = False
                self._queue = [r for r in batch if r is not request] + self._queue
                self._cond.notify_all()
            raise
        with self._cond:
            for req in batch:
                req[1] = {t: found[t] for t in req[0]}
            self.batches += 1
            self.texts_encoded += len(unique)
            self._busy = False
            self._cond.notify_all()
        return request[1]


class SessionEmbeddings:
    """ProgramEmbeddings as one session sees them: its lookups hold memo entries, and `close()`
    (ProgramSession calls it when its worker ends) lets them go."""

    def __init__(self, shared: ProgramEmbeddings, owner: int) -> None:
        self.shared, self.owner = shared, owner
        self.label, self.name = shared.label, shared.name

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        return self.shared.serve(texts, self.owner)

    def close(self) -> None:
        if self.shared.memo.release(self.owner) >= TRIM_AFTER_BYTES:
            return_freed_memory()


TRIM_AFTER_BYTES = 1 << 20


def return_freed_memory() -> None:
    """Hand the heap's free pages back to the system (glibc's malloc_trim; elsewhere nothing).
    Freed vectors and the texts that came with them leave holes glibc keeps for reuse: 18,000
    served texts left the engine at 100 MB after its session closed with an empty memo, 41 MB
    after a trim (a few ms)."""
    global _TRIM
    if _TRIM is None:
        try:
            _TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)


_TRIM: Any = None

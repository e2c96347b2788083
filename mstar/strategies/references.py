"""Reference programs shown to the reflector beside the parent (paper Appendix G.2): one that
scores higher, to borrow from, and one that scores lower, to avoid."""
from __future__ import annotations

from typing import Protocol, Sequence

from mstar.pool import PoolEntry


class ReferencePicker(Protocol):
    """Receives the parent and the pool's programs; returns the programs to show, best first."""

    def pick(self, parent: PoolEntry, pool: Sequence[PoolEntry]) -> list[PoolEntry]: ...


class BestAndWorst:
    """The pool's best program if it beats the parent, and its worst if the parent beats it."""

    def pick(self, parent: PoolEntry, pool: Sequence[PoolEntry]) -> list[PoolEntry]:
        others = sorted((e for e in pool if e.program_id != parent.program_id), key=lambda e: e.static_score)
        if not others:
            return []
        picks = [others[-1]] if others[-1].static_score > parent.static_score else []
        if others[0].static_score < parent.static_score and others[0] not in picks:
            picks.append(others[0])
        return picks

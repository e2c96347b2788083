"""Whether an evaluated child becomes a candidate parent.

The paper adds every child that passes its gates to the pool, whatever its score (Algorithm 1a:
"add unconditionally"); selection pressure comes from the softmax alone. A policy only answers;
the loop records every child in the lineage either way.
"""
from __future__ import annotations

from typing import Protocol

from mstar.pool import PoolEntry


class AcceptancePolicy(Protocol):
    """Receives the evaluated child and its parent; True when the child may be chosen as a parent."""

    def accept(self, child: PoolEntry, parent: PoolEntry) -> bool: ...


class AcceptAll:
    """The paper's rule: every child that passed its gates."""

    def accept(self, child: PoolEntry, parent: PoolEntry) -> bool:
        return True

"""The program pool and its lineage: every evaluated program with its parent and scores."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class PoolEntry:
    program_id: str
    parent_id: str | None
    iteration: int
    source: str
    static_score: float
    title: str = ""                    # commit title ("seed: <name>" for seeds)
    per_category: dict[str, float] = field(default_factory=dict)
    no_change: bool = False            # answered every static item as its parent did (mstar.iteration.behaviour)

    def to_dict(self) -> dict:
        return asdict(self)


class Pool:
    """Programs in the order they entered. The loop is the only writer."""

    def __init__(self) -> None:
        self.entries: list[PoolEntry] = []
        self._by_id: dict[str, PoolEntry] = {}

    def add(self, entry: PoolEntry) -> None:
        if entry.program_id in self._by_id:
            raise ValueError(f"program id {entry.program_id!r} is already in the pool")
        self.entries.append(entry)
        self._by_id[entry.program_id] = entry

    def get(self, program_id: str) -> PoolEntry:
        return self._by_id[program_id]

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, program_id: object) -> bool:
        return program_id in self._by_id

    def scores(self) -> list[float]:
        return [e.static_score for e in self.entries]

    def best(self) -> PoolEntry:
        """Highest static score; ties go to the earlier program (stable, reproducible)."""
        if not self.entries:
            raise ValueError("the pool is empty")
        return max(self.entries, key=lambda e: (e.static_score, -self.entries.index(e)))

    def best_seed(self) -> PoolEntry | None:
        """The best seed by static score (ties: the earlier), None before any seed is scored."""
        seeds = [e for e in self.entries if e.parent_id is None]
        return max(seeds, key=lambda e: (e.static_score, -seeds.index(e))) if seeds else None

    def ancestors(self, program_id: str) -> list[PoolEntry]:
        """Oldest first, ending with the program itself."""
        chain = []
        cur: str | None = program_id
        while cur is not None and cur in self._by_id:
            e = self._by_id[cur]
            chain.append(e)
            cur = e.parent_id
        return list(reversed(chain))

    def children(self, program_id: str) -> list[PoolEntry]:
        return [e for e in self.entries if e.parent_id == program_id]

    def lineage_lines(self, program_id: str) -> list[str]:
        """Commit-style history of a program: its ancestors' changes and its children's,
        each with the score delta against its parent; regressions are marked so the
        reflector does not repeat them."""
        lines = []
        for e in self.ancestors(program_id):
            lines.append(self._line(e, "ancestor" if e.program_id != program_id else "current"))
        for c in self.children(program_id):
            lines.append(self._line(c, "child"))
        return lines

    def _line(self, e: PoolEntry, kind: str) -> str:
        if e.parent_id is None or e.parent_id not in self._by_id:
            return f"- [{kind}] {e.program_id}: {e.title} (score {e.static_score:.3f})"
        delta = e.static_score - self._by_id[e.parent_id].static_score
        mark = " \u2190 REGRESSION" if delta < 0 else ""
        return (f"- [{kind}] {e.program_id}: {e.title} (score {e.static_score:.3f}, "
                f"\u0394 {delta:+.3f}){mark}")

"""Who enters the confirmation's race (issue 44): every program the run's evidence cannot rule out.

The static set alone chose the racers before: the `--confirm-top` best static scores. On offline
LoCoMo that set is 25 items whose scores (0.03-0.15) say little, and in 5 of 5 runs of a study on
a new split the program that was best on test never raced: its static score was below the cut.
Yet by the end of a run each program carries more than its static score:

- its static cases, and every rotating batch it was scored on as a parent (fresh items);
- the paired differences with its parent on the static set: a child that answers like its parent
  is about as good as its parent, whose own estimate may rest on many rotating items.

So each program gets an estimate of its validation mean with a standard error, the better of:

    own         the mean of its own items (static and rotating), se = s / sqrt(n)
    via parent  the parent's estimate plus the mean paired difference on the static items both
                have, se = sqrt(se_parent^2 + s_d^2 / n_d)

where s is the item spread (never below the spread of all the programs' items pooled: 25 equal
scores say nothing about the next item) and s_d the spread of the paired differences (0 for a
child that changed no static answer: it inherits its parent's estimate and standard error).
The two share the static items, so they are not averaged; the one with the smaller error counts.

The leader is the best pessimistic estimate (mean - ENTRY_Z se); a program enters when its
optimistic estimate (mean + ENTRY_Z se) reaches the leader's pessimistic one: the evidence does
not rule it out at one standard error each side. Entrants are taken best optimistic estimate
first while the race's allowance can pay each one's knowledge base and MIN_FRESH paired items
with the leader (mstar/final/race_budget.py: a racer that cannot get that far cannot earn a verdict).
The first `--confirm-top` by optimistic estimate (the leader counted) enter whatever the rule
says, if the allowance pays for them too: a racer whose knowledge base must be written again
(~320k tokens on offline LoCoMo) can take the whole allowance and leave the race nothing to buy
(seed 54 of the issue-44 study: 0 items). When the allowance cannot pay even the leader's items,
they enter all the same, for a look at the evidence they have (free), and nothing is bought.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

ENTRY_Z = 1.0      # one standard error each side: wide enough to let a program the static set underrates in


@dataclass(frozen=True)
class Estimate:
    mean: float
    se: float
    n: int            # items behind it (own, or the parent's plus the paired ones)
    basis: str        # "own" | "parent"

    def low(self, z: float = ENTRY_Z) -> float:
        return self.mean - z * self.se

    def high(self, z: float = ENTRY_Z) -> float:
        return self.mean + z * self.se

    def to_dict(self) -> dict:
        return {"mean": round(self.mean, 6), "se": round(self.se, 6), "n": self.n, "basis": self.basis}


def _sd(x: list[float]) -> float:
    if len(x) < 2:
        return 0.0
    m = sum(x) / len(x)
    return math.sqrt(sum((v - m) ** 2 for v in x) / (len(x) - 1))


def estimates(entries: list, evidence: dict[str, dict], static_ids: set) -> dict[str, Estimate]:
    """Each program's estimate (entries: PoolEntry in pool order, parents before children;
    evidence: program id -> {query id: score}, static and rotating)."""
    pooled = _sd([s for ev in evidence.values() for s in ev.values()])
    out: dict[str, Estimate] = {}
    for e in entries:
        own = evidence.get(e.program_id, {})
        scores = list(own.values())
        if scores:
            s = max(_sd(scores), pooled)
            best = Estimate(sum(scores) / len(scores), s / math.sqrt(len(scores)), len(scores), "own")
        else:
            best = Estimate(e.static_score, math.inf, 0, "own")
        parent = out.get(e.parent_id or "")
        if parent is not None:
            theirs = evidence.get(e.parent_id, {})
            d = [own[q] - theirs[q] for q in own if q in theirs and q in static_ids]
            if d:
                se = math.sqrt(parent.se ** 2 + _sd(d) ** 2 / len(d))
                via = Estimate(parent.mean + sum(d) / len(d), se, parent.n + len(d), "parent")
                if via.se < best.se:
                    best = via
        out[e.program_id] = best
    return out


def entrants(entries: list, est: dict[str, Estimate], top: int, afford=None) -> list[str]:
    """The racers, leader first, then by optimistic estimate (equal: the earlier program).
    `afford(ids)`: whether the race's allowance pays for these racers' first MIN_FRESH items
    (None: no limit)."""
    index = {e.program_id: n for n, e in enumerate(entries)}
    leader = max(est, key=lambda p: (est[p].low(), -index[p]))
    bar = est[leader].low()
    ranked = sorted((p for p in est if p != leader), key=lambda p: (-est[p].high(), index[p]))
    chosen = [leader]
    # With nothing to buy at all, the first `top` still get a look at the evidence they have (free).
    free_look = afford is not None and not afford([leader])
    for n, p in enumerate(ranked):
        forced = n + 1 < max(1, top)
        if free_look:
            if forced:
                chosen.append(p)
        elif (forced or est[p].high() >= bar) and (afford is None or afford(chosen + [p])):
            chosen.append(p)
    return chosen

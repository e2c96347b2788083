"""Which of the parent's cases the reflector sees as failures.

The paper draws 2 failed cases (score < 1) by Efraimidis-Spirakis weighted sampling without
replacement, weight 1 - score, so the worst failures are the likeliest but not the only ones.
"""
from __future__ import annotations

import math
from typing import Protocol, Sequence

import numpy as np


class FailureSampler(Protocol):
    """Receives the parent's case records (dicts with a "score") in query order, how many to
    show, and the iteration's random generator; returns the cases to show, in order."""

    def sample(self, cases: Sequence[dict], k: int, rng) -> list[dict]: ...


def efraimidis_spirakis(weights: Sequence[float], k: int, rng, *, include_zero: bool = False) -> list[int]:
    """Weighted sampling of k distinct indices without replacement (Efraimidis & Spirakis 2006).

    Each positive-weight item gets the key u^(1/w), u ~ U(0, 1]; the k largest keys win (compared
    in log-log space so tiny weights cannot overflow). Returned in draw order (largest key first).

    Zero weights mean "never pick": such items are excluded, so fewer than k indices come back
    when fewer than k weights are positive. With include_zero=True they instead fill the
    remaining slots in uniformly random order, after every positive-weight item.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1:
        raise ValueError("efraimidis_spirakis: weights must be a 1-d sequence")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"efraimidis_spirakis: weights must be finite and >= 0, got {w.tolist()}")
    if int(k) != k or k < 0:
        raise ValueError(f"efraimidis_spirakis: k must be a non-negative integer, got {k!r}")
    ranked = []
    for i in np.flatnonzero(w > 0):           # index order, so a seed always gives the same draw
        u = 1.0 - float(rng.random())           # in (0, 1]
        # Largest u^(1/w)  <=>  smallest log(-log u) - log w; finite even for subnormal weights.
        rank = -math.inf if u == 1.0 else math.log(-math.log(u)) - math.log(float(w[i]))
        ranked.append((rank, int(i)))
    ranked.sort()
    chosen = [i for _, i in ranked[:k]]
    if include_zero and len(chosen) < k:
        zeros = [int(i) for i in np.flatnonzero(w == 0)]
        for j in range(len(zeros) - 1, 0, -1):   # Fisher-Yates with the caller's rng
            r = int(float(rng.random()) * (j + 1))
            zeros[j], zeros[r] = zeros[r], zeros[j]
        chosen += zeros[: k - len(chosen)]
    return chosen


class WeightedFailures:
    """Failed cases (score < 1) by Efraimidis-Spirakis with weight 1 - score. When nothing
    failed, the first k cases, so the reflector still has something to read."""

    def sample(self, cases: Sequence[dict], k: int, rng) -> list[dict]:
        failed = [c for c in cases if c["score"] < 1.0]
        if not failed:
            return list(cases[:k])
        picks = efraimidis_spirakis([1.0 - c["score"] for c in failed], min(k, len(failed)), rng)
        return [failed[i] for i in picks]

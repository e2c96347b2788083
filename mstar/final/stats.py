"""Paired evidence: is program A better than program B on the same items, or is it luck?

Two programs scored on the same queries give paired scores; the mean of the differences with a
bootstrap interval (resampling items, 10,000 times by default) says how sure the gain is. Pure
numpy, seeded: the same scores give the same interval.
"""
from __future__ import annotations

from mstar.tasks.model import case_scored

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PairedDiff:
    mean: float          # mean of (a - b) over the paired items
    low: float           # the interval's ends (95% by default)
    high: float
    n: int               # paired items

    @property
    def significant(self) -> bool:
        """The interval excludes zero."""
        return self.low > 0 or self.high < 0

    def text(self) -> str:
        return f"{self.mean:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"

    def to_dict(self) -> dict:
        return {"mean": self.mean, "low": self.low, "high": self.high, "n": self.n,
                "significant": self.significant}


def paired_bootstrap(a, b, *, resamples: int = 10_000, confidence: float = 0.95, seed: int = 0) -> PairedDiff:
    """Mean difference a - b over paired items with a percentile bootstrap interval."""
    x = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError("paired_bootstrap: a and b must be 1-d and of the same length")
    n = len(x)
    if n == 0:
        return PairedDiff(0.0, 0.0, 0.0, 0)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, 1000):   # in blocks: resamples x n can be large
        k = min(1000, resamples - start)
        means[start:start + k] = x[rng.integers(0, n, size=(k, n))].mean(axis=1)
    tail = (1.0 - confidence) / 2
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return PairedDiff(round(float(x.mean()), 6), round(float(low), 6), round(float(high), 6), n)


def paired_scores(cases_a: list, cases_b: list) -> tuple[list[float], list[float]]:
    """Scores of the items both evaluations scored (matched by query id; cases whose LLM calls
    failed and corrupt games are left out), in the order of `cases_a`."""
    def scored(cases):
        out = {}
        for c in cases:
            get = c.get if isinstance(c, dict) else (lambda k, c=c: getattr(c, k, None))
            if case_scored(c):   # failed LLM calls, corrupt games, scorer errors are not scored
                out[get("query_id")] = float(get("score"))
        return out
    sa, sb = scored(cases_a), scored(cases_b)
    ids = [q for q in sa if q in sb]
    return [sa[q] for q in ids], [sb[q] for q in ids]

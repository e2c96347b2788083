"""The confirmation's stopping rule: when a race between the best programs may stop buying
validation items, and how often its verdicts are wrong (issue 28). Pure functions over paired
scores; mstar/final/champion.py runs the race.

The leader L is the first racer in static order until the racers share ten fresh items (bought
or rotating); then a racer whose mean on all the items they share is ahead of L's by more than
one standard error takes the lead (`leader_of`). One look compares L with each challenger C on
the items both were scored on (static, rotating, bought): the
differences d_i = L_i - C_i have mean d, standard deviation s and count n. The normal interval
d +- z * s / sqrt(n) uses z at a two-sided alpha / looks (Bonferroni over the race's looks), so
that over a whole race a challenger is wrongly declared behind with probability at most alpha
(5%), however many looks it takes. Per challenger:

    behind    the interval is above zero: L is significantly better; C leaves the race.
    tied      no verdict is in reach: with the m paired items the race may still buy (what the
              item cap and the budget allow), the chance that the interval comes to exclude zero
              -- either way, the m new differences following the trend of the pair's fresh items
              so far (conditional power) -- is below `futility` (20%). C leaves the race and no
              claim is made; L stays the leader on the evidence. Judged only once the pair
              shares MIN_FRESH (10) fresh items (bought, or rotating): the static set chose the
              candidates, so its differences lean to the leader, and two programs that answer
              its items alike (a no-change child and its parent) may still differ elsewhere.
    ahead     the interval is below zero: C is significantly better than L (the leader is the
              best mean on the shared items, so this happens only with uneven evidence).
    racing    otherwise: worth another batch.

A race stops when no challenger is racing. Ties where every score is equal (a task on which the
top programs all score 0) are "tied" after the first batch: no difference, no trend, no power.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

ALPHA = 0.05          # a wrong "behind" verdict, over the whole race
FUTILITY = 0.2        # below this conditional power, buying more is not worth it
MIN_FRESH = 10        # fresh paired items before a tie is judged: the trend of fewer says little
_N = NormalDist()


@dataclass(frozen=True)
class Gap:
    """The leader's paired lead over one challenger at one look."""
    mean: float
    low: float
    high: float
    n: int
    power: float | None = None    # conditional power of the items still affordable (None: not judged)
    verdict: str = "racing"       # "behind" | "tied" | "ahead" | "racing"

    @property
    def significant(self) -> bool:
        return self.low > 0 or self.high < 0

    def to_dict(self) -> dict:
        return {"mean": round(self.mean, 6), "low": round(self.low, 6), "high": round(self.high, 6), "n": self.n,
                "significant": self.significant,
                "power": None if self.power is None else round(self.power, 4), "verdict": self.verdict}


def z_for(looks: int, alpha: float = ALPHA) -> float:
    """The two-sided normal quantile of one look when `looks` looks share `alpha` (Bonferroni)."""
    return _N.inv_cdf(1.0 - alpha / (2 * max(1, looks)))


def conditional_power(total_sum: float, n: int, sd: float, more: int, trend: float, trend_sd: float,
                      z: float) -> float:
    """P(the final interval excludes zero) after `more` paired items whose differences follow the
    trend of the fresh items so far (mean `trend`, spread `trend_sd`), on top of the `n` seen
    (sum of differences `total_sum`, spread `sd`). 0 when nothing more can be bought."""
    if more <= 0 or n <= 0:
        return 0.0
    final = n + more
    bar = z * max(sd, trend_sd) * math.sqrt(final)     # the final sum must pass this, either way
    expected = total_sum + more * trend
    if trend_sd <= 0:      # every fresh difference equal: the future sum is what the trend says
        return 1.0 if abs(expected) > bar else 0.0
    spread = trend_sd * math.sqrt(more)
    return _N.cdf((expected - bar) / spread) + _N.cdf((-expected - bar) / spread)


def _mean_sd(x: list[float]) -> tuple[float, float]:
    n = len(x)
    mean = sum(x) / n
    return mean, (math.sqrt(sum((v - mean) ** 2 for v in x) / (n - 1)) if n > 1 else 0.0)


def gap(leader: list[float], challenger: list[float], *, z: float, more: int, fresh: list[bool] | None = None,
        futility: float = FUTILITY) -> Gap:
    """The verdict on one pair from their paired scores (same items, same order). `fresh` marks
    the items outside the static set: the ones a tie is judged on, and whose trend predicts the
    items still to buy (the static set chose the racers, so its differences lean to the leader
    there); with fewer than MIN_FRESH, no tie is judged."""
    d = [a - b for a, b in zip(leader, challenger)]
    n = len(d)
    if n == 0:
        return Gap(0.0, -math.inf, math.inf, 0)
    mean, sd = _mean_sd(d)
    half = z * sd / math.sqrt(n) if n > 1 else math.inf
    low, high = mean - half, mean + half
    new = [x for x, f in zip(d, fresh or [False] * n) if f]
    power = None
    # With nothing left to buy the race ends on its budget or cap: that is no tie.
    if len(new) >= MIN_FRESH and more > 0:
        trend, trend_sd = _mean_sd(new)
        power = conditional_power(sum(d), n, sd, more, trend, trend_sd, z)
    if low > 0:
        verdict = "behind"
    elif high < 0:
        verdict = "ahead"
    elif power is not None and power < futility:
        verdict = "tied"
    else:
        verdict = "racing"
    return Gap(mean, low, high, n, power, verdict)


def leader_of(evidence: dict[str, dict], order: list[str], static: set | frozenset = frozenset(),
              current: str | None = None) -> str:
    """The leader after a look. `order` is the racers in static ranking; `current` the leader so
    far (at first the static best, `order[0]`). Until the racers share MIN_FRESH fresh items (not
    in `static`) the static ranking stands: a handful of items says too little to overturn it.
    Then the racer with the best mean on all the items they share takes the lead, if its paired
    lead over the current leader there is more than one standard error: the lead does not change
    hands on noise (on the 30-session LoCoMo workload 15 items put a program 0.003 ahead that was
    0.005 behind on all 191). Equal means: the earlier in `order`."""
    current = current if current in order else order[0]
    shared = set.intersection(*(set(evidence[p]) for p in order)) if order else set()
    if len(shared - set(static)) < MIN_FRESH:
        return current

    def mean(p: str) -> float:
        return sum(evidence[p][q] for q in shared) / len(shared)
    best = max(order, key=lambda p: (mean(p), -order.index(p)))
    if best == current:
        return current
    lead, sd = _mean_sd([evidence[best][q] - evidence[current][q] for q in shared])
    return best if lead > sd / math.sqrt(len(shared)) else current

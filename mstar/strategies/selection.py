"""Parent selection: which program of the pool the next iteration mutates.

The paper samples by softmax over static scores, P(i) ∝ exp(s_i / τ) with τ = 0.15 (§3.3, Table 7);
its Table 2 ablates that against always taking the best ("max") and against linear search
(always the newest program, "latest"). Each rule is one small class with one method.
"""
from __future__ import annotations

import math
from typing import Protocol, Sequence

import numpy as np

from mstar.pool import PoolEntry

SELECTIONS = ("softmax", "max", "latest")


class ParentSelector(Protocol):
    """Receives the programs that may be chosen (in pool order, never empty) and the
    iteration's random generator; returns one of them."""

    def select(self, candidates: Sequence[PoolEntry], rng) -> PoolEntry: ...


def softmax_probabilities(scores: Sequence[float], tau: float) -> np.ndarray:
    """P(i) = exp(s_i/τ) / Σ_j exp(s_j/τ), computed stably (shifted by the max score)."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or s.size == 0:
        raise ValueError("softmax: need a non-empty 1-d list of scores")
    if not np.all(np.isfinite(s)):
        raise ValueError(f"softmax: scores must be finite, got {s.tolist()}")
    if not (isinstance(tau, (int, float)) and math.isfinite(tau) and tau > 0):
        raise ValueError(f"softmax: temperature must be a positive finite number, got {tau!r}")
    w = np.exp((s - s.max()) / tau)  # the best score maps to 1; very low ones underflow to 0
    return w / w.sum()


def softmax_sample(scores: Sequence[float], tau: float, rng) -> int:
    """Index drawn with P(i) ∝ exp(scores[i] / tau). Small tau -> (nearly) always the best."""
    p = softmax_probabilities(scores, tau)
    cum = np.cumsum(p)
    u = float(rng.random()) * cum[-1]
    # side="right": zero-probability entries (flat stretches of cum) can never be hit.
    return int(min(np.searchsorted(cum, u, side="right"), len(p) - 1))


class SoftmaxSelection:
    """The paper's rule: a draw with P(i) ∝ exp(score_i / tau)."""

    def __init__(self, tau: float = 0.15) -> None:
        softmax_probabilities([0.0], tau)  # validates tau once, here, not at the first iteration
        self.tau = tau

    def select(self, candidates: Sequence[PoolEntry], rng) -> PoolEntry:
        return candidates[softmax_sample([e.static_score for e in candidates], self.tau, rng)]


class MaxScoreSelection:
    """Always the best static score; ties go to the earlier program. Draws nothing."""

    def select(self, candidates: Sequence[PoolEntry], rng) -> PoolEntry:
        return max(candidates, key=lambda e: (e.static_score, -candidates.index(e)))


class LatestSelection:
    """Linear search: always the newest program (the last to enter the pool)."""

    def select(self, candidates: Sequence[PoolEntry], rng) -> PoolEntry:
        return candidates[-1]


def make_selector(name: str, tau: float = 0.15) -> ParentSelector:
    if name == "softmax":
        return SoftmaxSelection(tau)
    if name == "max":
        return MaxScoreSelection()
    if name == "latest":
        return LatestSelection()
    raise ValueError(f"unknown parent selection {name!r}; choose one of {', '.join(SELECTIONS)}")

"""Hard budgets on a run's spend and warnings on the way (the whole run's projected spend is
mstar/run/projection.py's).

A budget counts dollars (from the price table) and billed tokens (prompt +
completion of calls that reached a server; cache hits are free). The loop asks
`stop_reason()` at every iteration boundary -- calls in flight are never cut --
and stops when a limit is reached, or when the next iteration could cross it: each
iteration about to start, and each still in flight, is reserved the largest cost an
iteration has had so far. Not the average: iterations differ several-fold (one whose
parent is the LLM summariser costs ~3x one whose parent is vector search), and at
the average a resumed run with --max-tokens 500000 stopped at 529,666 (issue 30).
Only an iteration costlier than every one before it can still overshoot, and none
can before the first iteration has been seen. Warnings fire once each at 50% and 80%.

A resumed run restores the spend so far (the ledger) and primes the iteration costs with the
iterations done before (`prime`), so it stops where the first process would have stopped:
a resume never spends past the budget that stopped the run unless a larger one is given.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

WARN_AT = (0.5, 0.8)
FLAGS = ("--max-usd", "--max-tokens")


def budget_flag(reason: str | None) -> str | None:
    """The flag a budget stop reason names (see Budget.stop_reason), or None."""
    for flag in FLAGS:
        if reason and flag in reason:
            return flag
    return None


@dataclass
class Budget:
    max_usd: float | None = None
    max_tokens: int | None = None
    spent_usd: float = 0.0
    spent_tokens: int = 0
    warnings: list[str] = field(default_factory=list)
    _crossed: set = field(default_factory=set, repr=False)
    _boundaries: list[tuple[float, int]] = field(default_factory=list, repr=False)
    _prior_steps: list[tuple[float, int]] = field(default_factory=list, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self):
        if self.max_usd is not None and not self.max_usd > 0:
            raise ValueError(f"--max-usd must be a positive number of dollars, got {self.max_usd}")
        if self.max_tokens is not None and not self.max_tokens > 0:
            raise ValueError(f"--max-tokens must be a positive number of tokens, got {self.max_tokens}")

    @property
    def active(self) -> bool:
        return self.max_usd is not None or self.max_tokens is not None

    def observe(self, cost_usd: float, tokens: int) -> list[str]:
        """Account one call; returns the warnings this call triggered (each fires once)."""
        with self._lock:
            self.spent_usd += cost_usd
            self.spent_tokens += tokens
            new = []
            for what, spent, limit, fmt in self._limits():
                for frac in WARN_AT + (1.0,):
                    if spent >= frac * limit and (what, frac) not in self._crossed:
                        self._crossed.add((what, frac))
                        new.append(f"budget: {fmt(spent)} of {fmt(limit)} {what} spent ({frac:.0%})"
                                   + ("; the run stops at the next iteration boundary" if frac >= 1.0 else ""))
            self.warnings.extend(new)
            return new

    def _limits(self):
        out = []
        if self.max_usd is not None:
            out.append(("--max-usd", self.spent_usd, self.max_usd, lambda v: f"${v:.4f}"))
        if self.max_tokens is not None:
            out.append(("--max-tokens", self.spent_tokens, self.max_tokens, lambda v: f"{int(v):,} tokens"))
        return out

    def prime(self, steps: list[tuple[float, int]]) -> None:
        """What earlier iterations of this run cost, (usd, billed tokens) each: a resumed run
        estimates its next iteration from them before it has one of its own."""
        with self._lock:
            self._prior_steps = [(float(u), int(t)) for u, t in steps]

    def stop_reason(self, in_flight: int = 0) -> str | None:
        """Called before an iteration starts, while `in_flight` others still run: why the run
        should stop now, or None."""
        with self._lock:
            self._boundaries.append((self.spent_usd, self.spent_tokens))
            return self._reason(in_flight)

    def check(self) -> str | None:
        """What `stop_reason` would say now, without counting a boundary."""
        with self._lock:
            return self._reason()

    def _reason(self, in_flight: int = 0) -> str | None:
        steps = self._prior_steps + [(b[0] - a[0], b[1] - a[1])
                                     for a, b in zip(self._boundaries, self._boundaries[1:])]
        for what, spent, limit, fmt in self._limits():
            if spent >= limit:
                return f"budget reached: {fmt(spent)} spent, {what} is {fmt(limit)}"
            if steps:
                largest = max(s[0 if what == "--max-usd" else 1] for s in steps)
                if spent + largest * (1 + max(0, in_flight)) > limit:
                    running = f", and {in_flight} more in flight" if in_flight > 0 else ""
                    return (f"budget nearly reached: {fmt(spent)} spent, {what} is {fmt(limit)}, "
                            f"and an iteration may cost {fmt(largest)} (the largest so far){running}")
        return None

    def to_dict(self) -> dict:
        return {"max_usd": self.max_usd, "max_tokens": self.max_tokens,
                "spent_usd": round(self.spent_usd, 6), "spent_tokens": self.spent_tokens,
                "warnings": list(self.warnings)}

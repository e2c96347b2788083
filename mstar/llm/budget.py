"""Hard budgets on a run's spend, warnings on the way, and a cost estimate.

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

import math
import threading
from dataclasses import dataclass, field

from mstar.llm.types import UsageRecord, estimate_tokens

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


# ---------------------------------------------------------------- estimate

@dataclass
class RunEstimate:
    seeds_usd: float
    iteration_usd: float
    test_usd: float
    total_usd: float
    seeds_tokens: int
    iteration_tokens: int
    test_tokens: int
    total_tokens: int
    iterations: int

    def line(self) -> str:
        return (f"estimate whole run ~${self.total_usd:.2f}, ~{self.total_tokens:,} tokens "
                f"(seeds ${self.seeds_usd:.2f} + {self.iterations} iterations x ~${self.iteration_usd:.3f} "
                f"+ test ~${self.test_usd:.3f}; before cache savings)")


def estimate_run(seed_records: list[UsageRecord], cost_of, *, n_seeds: int, iterations: int,
                 train_episodes: int, static_size: int, rotating_size: int, test_episodes: int,
                 test_queries: int, reflector_cost: tuple[float, int]) -> RunEstimate:
    """Project a whole run from its seed evaluations.

    The seeds give a cost per episode written (extraction calls) and per question
    asked (query, answer, toolkit and judge calls). An iteration evaluates the
    parent on the rotating batch and the child on the static set, each writing the
    training episodes, plus ~1.5 reflector calls (compile-fix rounds included); the
    test evaluation writes every episode and asks the test questions. Cache hits
    are priced as misses, so this is what the run costs before the cache helps.
    `cost_of(record) -> usd` prices a record as if it had gone to the server.
    """
    n_evals = max(n_seeds, 1)
    ext = [r for r in seed_records if r.kind == "extract_knowledge_item"]
    rest = [r for r in seed_records if r.kind != "extract_knowledge_item"]
    per_episode = (sum(map(cost_of, ext)) / (n_evals * max(train_episodes, 1)),
                   sum(r.prompt_tokens + r.completion_tokens for r in ext) / (n_evals * max(train_episodes, 1)))
    per_query = (sum(map(cost_of, rest)) / (n_evals * max(static_size, 1)),
                 sum(r.prompt_tokens + r.completion_tokens for r in rest) / (n_evals * max(static_size, 1)))

    def evaluation(episodes: int, queries: int) -> tuple[float, float]:
        return (episodes * per_episode[0] + queries * per_query[0],
                episodes * per_episode[1] + queries * per_query[1])

    rot, child = evaluation(train_episodes, rotating_size), evaluation(train_episodes, static_size)
    refl_usd, refl_tokens = reflector_cost
    it_usd = rot[0] + child[0] + 1.5 * refl_usd
    it_tok = rot[1] + child[1] + 1.5 * refl_tokens
    test = evaluation(test_episodes, test_queries) if test_queries else (0.0, 0.0)
    seeds_usd = sum(r.cost_usd for r in seed_records)
    seeds_tok = sum(r.billed_tokens for r in seed_records)
    return RunEstimate(seeds_usd, it_usd, test[0], seeds_usd + iterations * it_usd + test[0],
                       seeds_tok, math.ceil(it_tok), math.ceil(test[1]),
                       math.ceil(seeds_tok + iterations * it_tok + test[1]), iterations)


def reflector_prompt_tokens(seed_sources: list[str], read_max_chars: int, prompt_budget: int) -> int:
    """A reflection prompt holds the program, a better and a worse reference program and two
    failed cases (question, answer, retrieved memory) plus fixed instructions."""
    longest = max((estimate_tokens(s) for s in seed_sources), default=1500)
    guess = 3 * longest + 2 * (read_max_chars // 4 + 300) + 1500
    return min(guess, prompt_budget)

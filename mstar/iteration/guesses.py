"""What a look-ahead guess is worth and what it cost (mstar/iteration/rotating_prefetch.py sends them).

The odds that a program is the next parent (`draw_odds`), the rule that prices a guess before it
is sent (`worth_sending`; the rule's terms and the reasons for them are in rotating_prefetch's
docstring), what the rule reads from the ledger (`reply_latency`, `batch_tokens`), and a guess's
own account: its requests and prompt tokens (its calls are charged to its llm.scope.Background)
and whether it was used (`Guess`, `tally`).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from mstar.llm import scope as llm_scope
from mstar.pool import PoolEntry

GAIN = 0.05            # "joins as the best": this far above the pool's best static score


def draw_odds(select, seen: list[PoolEntry], parent: PoolEntry, child: PoolEntry, rng_for,
              gains: list[float | None] = ()) -> list[tuple[PoolEntry, float]]:
    """The programs the next iteration's draw picks under the outcomes that decide it, each with
    the probability that it is picked: the share of the outcomes that pick it. The outcomes: the
    child does not join, joins at its parent's score, joins as the best -- and one more for each
    earlier child of the run, at its own gain over its parent (`gains`; None: it did not join).
    `select(candidates, rng)`: the run's parent selection; `rng_for()`: a new instance of the next
    iteration's generator; `child`: the child being evaluated (its score is each outcome's)."""
    base = [e for e in seen if not e.no_change] or list(seen)   # as the loop filters them
    best = max(e.static_score for e in seen)
    scores = [None, parent.static_score, best + GAIN] + [None if g is None else parent.static_score + g for g in gains]
    picked: dict[str, list] = {}
    for score in scores:
        candidates = base if score is None else base + [replace(child, static_score=score)]
        entry = select(candidates, rng_for())
        picked.setdefault(entry.program_id, [entry, 0.0])[1] += 1 / len(scores)
    return [(entry, odds) for entry, odds in picked.values()]


def next_parents(select, seen: list[PoolEntry], parent: PoolEntry, child: PoolEntry, rng_for) -> list[PoolEntry]:
    """The programs of `draw_odds`, without their odds."""
    return [entry for entry, _ in draw_odds(select, seen, parent, child, rng_for)]


def worth_sending(odds: float, chain: float, latency_s: float, tokens: float, worth: float) -> bool:
    """The rule of the module docstring: the expected seconds a guess saves, priced at `worth`
    tokens a second, against the expected tokens it wastes."""
    return odds * chain * latency_s * worth >= (1.0 - odds) * tokens


@dataclass
class Guess:
    """One program evaluated (or its formulations asked) ahead on a later iteration's batch."""
    iteration: int            # the iteration whose batch it is
    program_id: str
    odds: float               # the probability, when it was sent, that its program is that iteration's parent
    kind: str                 # "evaluation" | "formulations"
    work: llm_scope.Background = field(default_factory=llm_scope.Background, repr=False)
    chain: int | None = None  # its evaluation's replies in a row, once it has run
    used: bool | None = None  # its program became the parent (None: that iteration has not drawn yet)

    def to_dict(self) -> dict:
        return {"iteration": self.iteration, "program_id": self.program_id, "odds": round(self.odds, 3),
                "kind": self.kind, "used": self.used, "requests": self.work.requests,
                "prompt_tokens": self.work.prompt_tokens}


def tally(guesses: list[Guess], declined: int = 0) -> dict:
    """Guesses used / sent and what they cost (summary.json's "guesses", an iteration's timing)."""
    return {"sent": len(guesses), "used": sum(1 for g in guesses if g.used), "declined": declined,
            "requests": sum(g.work.requests for g in guesses),
            "prompt_tokens": sum(g.work.prompt_tokens for g in guesses)}


def reply_latency(records) -> float:
    """The endpoint's seconds per reply: the lower quartile of the task role's replies (a reply that
    also waited for a slot took longer than the endpoint did)."""
    replies = sorted(r.latency_s for r in records if r.role == "task" and not r.cache_hit and not r.error)
    return replies[len(replies) // 4] if replies else 0.0


def batch_tokens(records, entry: PoolEntry, formulations_only: bool, questions: int, batch: int) -> float:
    """The prompt tokens a batch of `entry`'s questions costs, from its static evaluation of
    `questions` items in the ledger (a seed's scope, or a child's iteration after its reflector's
    last call), answered from the cache or not. Extractions are writes, not a question's prompts."""
    scoped = entry.program_id if entry.parent_id is None else f"iter_{entry.iteration:03d}"
    recs = [r for r in records if r.scope == scoped]
    if entry.parent_id is not None:
        recs = recs[1 + max((i for i, r in enumerate(recs) if r.role == "reflector"), default=-1):]
    # Cache hits count: a child's reads ask the toolkit what its parent's asked (hits in its static
    # evaluation), but on a new batch every question's prompts are new.
    tokens = sum(r.prompt_tokens for r in recs if r.role != "reflector" and r.kind != "extract_knowledge_item"
                 and (not formulations_only or r.kind == "formulate_query"))
    return tokens / max(1, questions) * batch

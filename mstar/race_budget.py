"""What the confirmation's race may spend, and what its next batch will cost (issue 28).

The allowance is a share (`--confirm-budget`, default 10%) of what the run spent before the
confirmation: dollars when any call was priced, else billed tokens (cache hits are free). It
counts the race's questions -- query, answer, toolkit and judge calls. Before a batch is bought
its cost is estimated (new items x what one question costs: the costliest seed's until the race
has bought some, then the race's own average) and the batch is cut to what fits, so a race stays
within its share.

Writing a racer's knowledge base again (when the executor no longer keeps it) is not counted:
every racer was scored on the same training episodes before, so those are the extraction
prompts the run already paid for, and the response cache answers them. Without a cache (the
offline backend, `--no-cache`) they are spent again; the confirmation event reports them apart
(`budget.writes`).
"""
from __future__ import annotations

import math

SCOPE = "confirm"
EXTRACT = "extract_knowledge_item"


class RaceBudget:
    def __init__(self, router, share: float | None):
        self.router, self.share = router, share
        self.unit, self.allowance, self.question = "items", math.inf, 0.0
        if router is None or share is None:
            return
        before = router.since(0)
        self.unit = "usd" if before.get("cost_usd", 0) > 0 else "tokens"
        self.allowance = share * self._amount(before)
        self.question = self._seed_question()

    def _amount(self, sums: dict) -> float:
        if self.unit == "usd":
            return float(sums.get("cost_usd", 0.0))
        return float(sums.get("prompt_tokens", 0) + sums.get("completion_tokens", 0))

    def _cost(self, records) -> float:
        paid = [r for r in records if not r.cache_hit]
        return sum(r.cost_usd for r in paid) if self.unit == "usd" else \
            float(sum(r.prompt_tokens + r.completion_tokens for r in paid))

    def _seed_question(self) -> float:
        """One question of the costliest seed: the racers are mostly its descendants (an
        LLM-summariser seed pays for every stored text at each question)."""
        by_seed: dict[str, list] = {}
        for r in self.router.ledger.snapshot():
            if (r.scope or "").startswith("seed_") and r.role != "reflector" and r.kind != EXTRACT:
                by_seed.setdefault(r.scope, []).append(r)
        costs = [self._cost(recs) / asked for recs in by_seed.values()
                 if (asked := sum(1 for r in recs if r.kind == "answer"))]
        return max(costs, default=0.0)

    def _race_calls(self, writes: bool) -> list:
        return [r for r in self.router.ledger.snapshot() if r.scope == SCOPE and (r.kind == EXTRACT) == writes]

    @property
    def limited(self) -> bool:
        return not math.isinf(self.allowance)

    def spent(self) -> float:
        """The race's questions so far (its writes apart)."""
        return self._cost(self._race_calls(writes=False)) if self.limited else 0.0

    def left(self) -> float:
        return self.allowance - self.spent()

    def per_question(self, evaluated: int) -> float:
        """One racer's one new item: measured once the race has bought some."""
        if not self.limited:
            return 0.0
        return self.spent() / evaluated if evaluated else self.question

    def batch_cost(self, items: int, evaluated: int) -> float:
        """`items`: new racer-items in the batch."""
        return items * self.per_question(evaluated) if self.limited else 0.0

    def pair_items(self, evaluated: int) -> float:
        """About how many more items two racers could both be scored on (inf without a budget)."""
        each = 2 * self.per_question(evaluated)
        if not self.limited or each <= 0:
            return math.inf
        return max(0.0, self.left() / each)

    def to_dict(self) -> dict:
        if not self.limited:
            return {"unit": self.unit, "share": self.share, "allowance": None, "spent": 0.0, "writes": 0.0}
        return {"unit": self.unit, "share": self.share, "allowance": round(self.allowance, 6),
                "spent": round(self.spent(), 6), "writes": round(self._cost(self._race_calls(writes=True)), 6)}

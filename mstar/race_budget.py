"""How much the confirmation's race may buy (issue 28): a share of the questions the run asked.

The allowance is `--confirm-budget` (default 0.2) times the questions the run had scored before
the confirmation -- every seed's and child's static set, every rotating batch, every static set
scored again after a run-time fix -- counted from the lineage. The race spends one per racer
and new item. Questions are what a race buys, and at a similar cost per question 10% of them is
about 10% of the run's answering spend (its writes apart: every racer was scored on the same
training episodes before, so writing its knowledge base again asks extraction prompts the run
paid for once, which the response cache answers). Counted in questions rather than in dollars
or tokens, the race buys the same items in a run that was resumed after a crash -- whose ledger
counts a redone step twice -- as in one that never stopped, so both end with the same lineage.
The run's own `--max-usd` / `--max-tokens` still stop it (mstar/champion.py). A batch is cut to
what is left, so the race never passes its allowance.
"""
from __future__ import annotations

import math

from mstar.run import events as ev_types


def questions_asked(events: list, static_size: int) -> int:
    """The questions the seeds and iterations of these lineage events scored."""
    n = 0
    for ev in events:
        if isinstance(ev, ev_types.SeedEvent):
            n += static_size
        elif isinstance(ev, ev_types.IterationEvent):
            n += len(ev.rotating_batch)
            if ev.added_child or ev.runtime_fixes:    # the child was scored (again after each fix)
                n += static_size * (1 + sum(1 for fix in ev.runtime_fixes if "static_score" in fix))
    return n


class RaceBudget:
    def __init__(self, share: float | None, asked_before: int):
        self.share = share
        self.allowance = math.inf if share is None else share * asked_before
        self.used = 0                                  # racer-items bought

    @property
    def limited(self) -> bool:
        return not math.isinf(self.allowance)

    def left(self) -> float:
        return self.allowance - self.used

    def pair_items(self) -> float:
        """About how many more items two racers could both be scored on."""
        return max(0.0, self.left() / 2)

    def to_dict(self) -> dict:
        return {"unit": "questions", "share": self.share,
                "allowance": round(self.allowance, 3) if self.limited else None, "spent": self.used}

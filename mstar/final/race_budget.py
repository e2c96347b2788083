"""How much the confirmation's race may buy (issue 28): a share of the tokens the run asked.

The allowance is `--confirm-budget` (default 0.1) times the tokens the run's seeds and iterations
asked before the confirmation -- prompt and completion, sent or answered by the response cache,
from their lineage events -- less what writing a parent's knowledge base again cost an
iteration's rotating evaluation (`rewrite_tokens`: a kept knowledge base costs nothing, a lost
one is written again, and which happens depends on the process, not on the run). A racer's item
is priced at what its static evaluation's questions asked per question (EvalResult.question_tokens:
formulation, the read's toolkit calls, answer, judging; not the writes, which a racer does not pay
again). So the race buys fewer items between costly programs than between cheap ones: on the
30-session LoCoMo workload an LLM summariser's child, whose read hands every stored text to the
toolkit, costs ~8.9k tokens a question against ~1.0k for a vector-search child. Counted in
questions (the rule before), the race there bought 15 items for four racers, 135k prompt tokens,
11% on top of the run without it; priced in tokens it buys 10 items, 89k prompt tokens sent, 7%.

Everything is counted from the lineage and the racers' cases files, with what the cache answered
counted as asked: a run resumed after a crash -- whose ledger counts a redone step twice and whose
knowledge bases are written again -- prices and buys exactly what an uninterrupted one does, and
both end with the same lineage (tests/test_resume.py kills runs at random points to check it).
When a racer's cases file predates these counts, the race counts questions: one per racer and
item, the share times the questions asked. The run's own `--max-usd` / `--max-tokens` still stop
it (mstar/final/champion.py). A batch is cut to what is left, so the race never passes its allowance.
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


def tokens_asked(events: list) -> int:
    """The tokens the seeds and iterations of these lineage events asked, sent or cached, less
    what writing a parent's knowledge base again cost."""
    n = 0
    for ev in events:
        if isinstance(ev, (ev_types.SeedEvent, ev_types.IterationEvent)):
            llm = ev.llm or {}
            n += sum(int(llm.get(k, 0)) for k in ("prompt_tokens", "completion_tokens", "saved_tokens")) \
                - int(llm.get("rewrite_tokens", 0))
    return n


def question_cost(static) -> float | None:
    """Tokens one more question costs a program, from its static evaluation (None: not counted)."""
    if static is None or not getattr(static, "question_tokens", 0) or not static.cases:
        return None
    return static.question_tokens / len(static.cases)


class RaceBudget:
    """`costs`: each racer's price of an item, in `unit`s; `allowance`: share x what was asked."""

    def __init__(self, share: float | None, asked_before: float, costs: dict[str, float] | None = None,
                 unit: str = "questions"):
        self.share, self.unit = share, unit
        self.costs = dict(costs or {})
        self.allowance = math.inf if share is None else share * asked_before
        self.used = 0.0                                # what the items bought so far cost
        self.racer_items = 0                           # racers scored on an item, over all batches

    @classmethod
    def for_race(cls, share: float | None, events: list, static_size: int, statics: dict) -> "RaceBudget":
        """The race's budget: in tokens when every racer's static evaluation counted its
        questions' tokens (`statics`: racer id -> its static EvalResult), else in questions."""
        costs = {pid: question_cost(res) for pid, res in statics.items()}
        if costs and all(c is not None for c in costs.values()):
            return cls(share, tokens_asked(events), costs, "tokens")
        return cls(share, questions_asked(events, static_size), {pid: 1.0 for pid in statics}, "questions")

    @property
    def limited(self) -> bool:
        return not math.isinf(self.allowance)

    def cost(self, need: dict[str, list]) -> float:
        """What scoring each racer on its items costs."""
        return sum(len(items) * self.costs.get(p, 1.0) for p, items in need.items())

    def buy(self, need: dict[str, list]) -> None:
        self.used += self.cost(need)
        self.racer_items += sum(len(items) for items in need.values())

    def left(self) -> float:
        return self.allowance - self.used

    def pair_items(self, racers: list[str]) -> float:
        """About how many more items two of `racers` could both be scored on."""
        price = sum(self.costs.get(p, 1.0) for p in racers) / max(1, len(racers))
        return max(0.0, self.left() / (2 * price)) if price > 0 else math.inf

    def to_dict(self) -> dict:
        rnd = (lambda x: round(x)) if self.unit == "tokens" else (lambda x: round(x, 3))  # noqa: E731
        return {"unit": self.unit, "share": self.share,
                "allowance": rnd(self.allowance) if self.limited else None, "spent": rnd(self.used),
                "racer_items": self.racer_items}

"""How much the confirmation's race may buy (issues 28 and 44): a share of the tokens the run asked.

The allowance is `--confirm-budget` (default 0.1) times the tokens the run's seeds and iterations
asked before the confirmation -- prompt and completion, sent or answered by the response cache,
from their lineage events -- less what writing a parent's knowledge base again cost an
iteration's rotating evaluation (`rewrite_tokens`: whether one was kept depends on the process).

What the race spends counts every token it causes (issue 44): its questions' calls as they were
asked (EvalResult.question_tokens: formulation, the read's toolkit calls, answer, judging) and the
writing of each racer's knowledge base. Counted on the questions alone (the rule before), the
race's own ledger went over its allowance in 3 of 5 offline LoCoMo runs (864,249 tokens against
570,549 allowed): most of what it asked was knowledge bases written again. A write is charged at
what the racer's static evaluation's writes asked (EvalResult.write_tokens: the same episodes, the
same program), in the racer's first batch, and in every batch when more programs race than the
executor keeps knowledge bases for (`keep_sessions`); charged whether or not the executor still
had the knowledge base, so that what the race buys does not depend on the process: a run resumed
after a crash prices and buys what an uninterrupted one does. So `--keep-sessions` changes what the
race may buy (a kept knowledge base is not paid for again) and may change its verdict; the seeds'
and iterations' decisions do not depend on it. A batch is cut so that its price
(the writes, and each racer's items at the dearer of its static and its race price per question
so far) fits what is left; what the race's ledger scope asks therefore stays within the allowance.

When a racer's cases file predates these counts, the race counts questions: one per racer and
item, the share times the questions asked. The run's own `--max-usd` / `--max-tokens` still stop
it (mstar/final/champion.py).
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
    what writing a parent's knowledge base again cost, and with what writing a child's cost when
    it read a knowledge base another program of its knowledge identity built (`shared_write_tokens`:
    whether one was kept depends on the process, mstar/evaluation/knowledge_identity.py)."""
    n = 0
    for ev in events:
        if isinstance(ev, (ev_types.SeedEvent, ev_types.IterationEvent)):
            llm = ev.llm or {}
            n += sum(int(llm.get(k, 0)) for k in ("prompt_tokens", "completion_tokens", "saved_tokens",
                                                  "shared_write_tokens")) - int(llm.get("rewrite_tokens", 0))
    return n


def write_cost(static) -> float:
    """Tokens writing the program's knowledge base asked in its static evaluation, or in the one
    that built the knowledge base it read (0: not counted)."""
    if static is None:
        return 0.0
    return float((getattr(static, "write_tokens", 0) or 0) + (getattr(static, "shared_write_tokens", 0) or 0))


def question_cost(static) -> float | None:
    """Tokens one more question costs a program, from its static evaluation (None: not counted)."""
    if static is None or not getattr(static, "question_tokens", 0) or not static.cases:
        return None
    return static.question_tokens / len(static.cases)


PRICE_MARGIN = 0.2     # a batch must fit with its questions this much dearer than their average so far


class Kept:
    """The knowledge bases the executor keeps, as the lineage tells it: least recently used out."""

    HELD_BACK = 2          # places the prefetch's guesses (evaluations no event records) may take

    def __init__(self, keep: int | None) -> None:
        self.size = max(0, (keep or 0) - self.HELD_BACK)
        self.order: list[str] = []

    @classmethod
    def from_events(cls, events: list, keep: int | None) -> "Kept":
        kept = cls(keep)
        for ev in events:
            if isinstance(ev, ev_types.SeedEvent):
                kept.use(ev.program_id)
            elif isinstance(ev, ev_types.IterationEvent):
                if ev.rotating_batch:
                    kept.use(ev.parent_id)
                if ev.program_id:
                    kept.use(ev.program_id)
                elif ev.status != "ok" or ev.runtime_fixes:
                    kept.use(f"{ev.iteration}:discarded")      # an evaluated child that did not join
        return kept

    def holds(self, pid: str) -> bool:
        return pid in self.order

    def use(self, pid: str) -> None:
        if self.size <= 0:
            return
        if pid in self.order:
            self.order.remove(pid)
        self.order.append(pid)
        del self.order[:max(0, len(self.order) - self.size)]


class RaceBudget:
    """`costs`: each racer's price of an item, in `unit`s; `writes`: of its knowledge base;
    `allowance`: share x what was asked; `keep`: knowledge bases the executor keeps."""

    def __init__(self, share: float | None, asked_before: float, costs: dict[str, float] | None = None,
                 unit: str = "questions", writes: dict[str, float] | None = None, kept: Kept | None = None):
        self.share, self.unit = share, unit
        self.costs = dict(costs or {})
        self.writes = dict(writes or {})
        self.kept = kept or Kept(0)
        self.allowance = math.inf if share is None else share * asked_before
        self.used = 0.0                                # what the race's batches cost so far
        self.write_used = 0.0                          # ... of which knowledge bases written
        self.racer_items = 0                           # racers scored on an item, over all batches
        self._asked: dict[str, list[float]] = {}       # racer -> [question tokens, questions] in the race

    @classmethod
    def for_race(cls, share: float | None, events: list, static_size: int, statics: dict,
                 keep: int | None = None) -> "RaceBudget":
        """The race's budget: in tokens when every racer's static evaluation counted its
        questions' tokens (`statics`: program id -> its static EvalResult), else in questions."""
        costs = {pid: question_cost(res) for pid, res in statics.items()}
        if costs and all(c is not None for c in costs.values()):
            writes = {pid: write_cost(res) for pid, res in statics.items()}
            return cls(share, tokens_asked(events), costs, "tokens", writes, Kept.from_events(events, keep))
        return cls(share, questions_asked(events, static_size), {pid: 1.0 for pid in statics}, "questions")

    @property
    def limited(self) -> bool:
        return not math.isinf(self.allowance)

    def price(self, p: str) -> float:
        """One more item for racer `p`: the dearer of its static and its race price so far."""
        asked = self._asked.get(p)
        seen = asked[0] / asked[1] if asked and asked[1] else 0.0
        return max(self.costs.get(p, 1.0), seen)

    def _write_due(self, p: str, racers: int) -> bool:
        return self.writes.get(p, 0.0) > 0 and (not self.kept.holds(p) or racers > self.kept.size)

    def cost(self, need: dict[str, list]) -> float:
        """What scoring each racer on its items may cost, its knowledge base written included: the
        questions at their price plus PRICE_MARGIN (items differ in price; a batch priced at the
        average went 0.3% over its allowance on the offline sample)."""
        racers = sum(1 for items in need.values() if items)
        margin = 1 + PRICE_MARGIN if self.unit == "tokens" else 1.0     # a question is a question
        return sum(len(items) * self.price(p) * margin
                   + (self.writes.get(p, 0.0) if self._write_due(p, racers) else 0.0)
                   for p, items in need.items() if items)

    def entry_cost(self, racers: list[str], items: int) -> float:
        """What `items` paired items for each of `racers` cost at the least (written once if not kept)."""
        return sum(items * self.price(p) + (self.writes.get(p, 0.0) if self._write_due(p, len(racers)) else 0.0)
                   for p in racers)

    def buy(self, need: dict[str, list], results: dict | None = None) -> None:
        """Charge a batch: the writes due, and the questions as the results counted them (their
        price when an evaluation did not count its tokens)."""
        racers = sum(1 for items in need.values() if items)
        due = {p: self._write_due(p, racers) for p, items in need.items() if items}
        for p, items in need.items():
            if not items:
                continue
            if due[p]:
                self.used += self.writes[p]
                self.write_used += self.writes[p]
            self.kept.use(p)
            got = int(getattr((results or {}).get(p), "question_tokens", 0) or 0)
            asked = self._asked.setdefault(p, [0.0, 0])
            self.used += got if got else len(items) * self.price(p)
            if got:
                asked[0] += got
                asked[1] += len(items)
            self.racer_items += len(items)

    def left(self) -> float:
        return self.allowance - self.used

    def pair_items(self, racers: list[str]) -> float:
        """About how many more items two of `racers` could both be scored on."""
        price = sum(self.price(p) for p in racers) / max(1, len(racers))
        return max(0.0, self.left() / (2 * price)) if price > 0 else math.inf

    def to_dict(self) -> dict:
        rnd = (lambda x: round(x)) if self.unit == "tokens" else (lambda x: round(x, 3))  # noqa: E731
        out = {"unit": self.unit, "share": self.share,
               "allowance": rnd(self.allowance) if self.limited else None, "spent": rnd(self.used),
               "racer_items": self.racer_items}
        if self.unit == "tokens":
            out["writes"] = rnd(self.write_used)
        return out


def with_shared_writes(llm: dict, res) -> dict:
    """A seed's or iteration's `llm` spend plus what the writes of its static evaluation would have
    asked when it read a shared knowledge base (EvalResult.shared_write_tokens; see tokens_asked)."""
    if not getattr(res, "shared_write_tokens", 0):
        return llm
    return {**llm, "shared_write_tokens": int(llm.get("shared_write_tokens", 0)) + res.shared_write_tokens}

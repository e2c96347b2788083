"""Whether a run with a spend cap (--max-usd / --max-tokens) can afford its end: the race and the
held-out tests.

The loop checks the budget before each iteration starts (mstar/llm/budget.py). After the last one
nothing did: a run whose last iteration crossed the limit, or whose tests cost more than was
left, raced and tested anyway and exited 0 -- a run capped at 900,000 tokens ended at 1,650,293,
its two tests of 151 questions ~1M of it. The end now asks first, before the race starts the tests
beside it:

    spent + the race's allowance (its share of the spend so far) + the tests' cost  <=  the limit

each test priced from its program's own static evaluation in the ledger: its questions' calls per
question, its episodes' extractions per episode (a child that read its parent's knowledge base
wrote none: the nearest ancestor's), scaled to the test's questions and every episode -- cache
hits priced as sent, since the test's questions are new. When the end would not fit, the run
stops as at an iteration boundary (resumable: `mstar resume RUN --max-tokens LARGER` races and
tests), naming what the end would cost.
"""
from __future__ import annotations

from mstar.pool import PoolEntry

EXTRACT = "extract_knowledge_item"


def _scope(entry: PoolEntry) -> str:
    return entry.program_id if entry.parent_id is None else f"iter_{entry.iteration:03d}"


def _static_records(records, entry: PoolEntry) -> list:
    """The calls of `entry`'s static evaluation: a seed's scope; a child's iteration after the
    reflector's last call (before it: the parent on its rotating batch)."""
    recs = [r for r in records if r.scope == _scope(entry) and not r.error]
    if entry.parent_id is not None:
        recs = recs[1 + max((i for i, r in enumerate(recs) if r.role == "reflector"), default=-1):]
    return recs


def cost_of_test(evo, entry: PoolEntry) -> tuple[float, int]:
    """(dollars, tokens) `entry`'s held-out test is likely to cost (see the module docstring)."""
    ledger = evo.router.ledger
    records = ledger.snapshot()
    price = (lambda recs: (sum(ledger.cost_of(r) for r in recs),
                           sum(r.prompt_tokens + r.completion_tokens for r in recs)))
    questions = price([r for r in _static_records(records, entry) if r.kind != EXTRACT and r.role != "reflector"])
    writes, cur = [], entry
    while cur is not None and not writes:
        writes = [r for r in _static_records(records, cur) if r.kind == EXTRACT]
        cur = evo.pool.get(cur.parent_id) if cur.parent_id else None
    episodes = price(writes)
    per_q, per_e = len(evo.static) or 1, len(evo.train) or 1
    n_q, n_e = len(evo.task.test), len(evo.task.episodes)
    return (questions[0] / per_q * n_q + episodes[0] / per_e * n_e,
            int(questions[1] / per_q * n_q + episodes[1] / per_e * n_e))


def unaffordable(evo, tested: list[PoolEntry], race_share: float) -> str | None:
    """Why the run cannot afford its end under its cap (None when it can, or has no cap)."""
    budget = evo.router.ledger.budget
    if not budget.active:
        return None
    costs = [cost_of_test(evo, e) for e in tested] if evo.task.test else []
    end_usd = budget.spent_usd * race_share + sum(c[0] for c in costs)
    end_tokens = budget.spent_tokens * race_share + sum(c[1] for c in costs)
    for flag, spent, limit, end, fmt in (
            ("--max-usd", budget.spent_usd, budget.max_usd, end_usd, lambda v: f"${v:.4f}"),
            ("--max-tokens", budget.spent_tokens, budget.max_tokens, end_tokens, lambda v: f"{int(v):,} tokens")):
        if limit is None:
            continue
        if spent >= limit:
            return f"budget reached: {fmt(spent)} spent, {flag} is {fmt(limit)}; the race and the test were not run"
        if spent + end > limit:
            return (f"budget nearly reached: {fmt(spent)} spent, {flag} is {fmt(limit)}, and the race and the "
                    f"held-out tests may cost ~{fmt(end)}; they were not run")
    return None

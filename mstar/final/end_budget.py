"""Whether a run with a spend cap (--max-usd / --max-tokens) can afford its end: the race and the
held-out tests.

The loop checks the budget before each iteration starts (mstar/llm/budget.py). After the last one
nothing did: a run whose last iteration crossed the limit, or whose tests cost more than was
left, raced and tested anyway and exited 0 -- a run capped at 900,000 tokens ended at 1,650,293,
its two tests of 151 questions ~1M of it. The end now asks first, before the race starts the tests
beside it:

    spent + the race's allowance (its share of the spend so far) + the tests' cost  <=  the limit

each test priced as the race prices its racers (race_budget.py, `question_cost`, `write_cost`):
the tokens its static evaluation's questions asked, per question, and what writing its knowledge
base asked (in the evaluation that built it, for a child that read its parent's) -- sent or cached,
since the test's questions are new -- scaled to the test's questions and every episode; dollars
at the run's own dollars per token so far. When the end would not fit, the run stops as at an
iteration boundary (resumable: `mstar resume RUN --max-tokens LARGER` races and tests), naming
what the end would cost.
"""
from __future__ import annotations

from mstar.final.race_budget import question_cost, write_cost
from mstar.pool import PoolEntry


def tokens_of_test(evo, entry: PoolEntry) -> float:
    """The tokens `entry`'s held-out test is likely to ask (see the module docstring)."""
    static = evo.static_result(entry.program_id)
    per_question = question_cost(static) or 0.0
    per_episode = write_cost(static) / max(1, len(evo.train))
    return per_question * len(evo.task.test) + per_episode * len(evo.task.episodes)


def unaffordable(evo, tested: list[PoolEntry], race_share: float) -> str | None:
    """Why the run cannot afford its end under its cap (None when it can, or has no cap)."""
    budget = evo.router.ledger.budget
    if not budget.active:
        return None
    tests = sum(tokens_of_test(evo, e) for e in tested) if evo.task.test else 0.0
    end_tokens = budget.spent_tokens * race_share + tests
    end_usd = end_tokens * budget.spent_usd / max(1, budget.spent_tokens)
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

"""Prices, the ledger's sums, budgets (warnings, stop reasons, resume)."""
import pytest

from mstar.llm.budget import Budget
from mstar.llm.ledger import Ledger, summarize
from mstar.llm.prices import Price, PriceTable
from mstar.llm.types import UsageRecord


def rec(pt=1000, ct=100, model="gpt-4o-mini", hit=False, kind="answer", role="task", backend="openai", **kw):
    return UsageRecord(role, model, backend, pt, ct, 0.1, cache_hit=hit, kind=kind, **kw)


def test_prices_per_million_with_dated_names_and_overrides():
    table = PriceTable({"my-model": {"input": 1.0, "output": 2.0}})
    assert table.lookup("gpt-4o-mini-2024-07-18") == table.lookup("gpt-4o-mini")  # longest prefix
    assert table.lookup("gpt-4o-2024-08-06").input == 2.50                       # not gpt-4o-mini
    assert table.lookup("my-model").cost(1_000_000, 500_000) == pytest.approx(2.0)
    assert table.lookup("unknown-model") is None
    assert table.lookup("anything", backend="offline").cost(10**6, 10**6) == 0.0
    # provider-side cached prompt tokens at their own rate
    assert Price(1.0, 0.0, 0.25).cost(1_000_000, 0, cached_tokens=400_000) == pytest.approx(0.6 + 0.1)
    with pytest.raises(ValueError, match="missing"):
        PriceTable({"x": {"input": 1.0}})
    with pytest.raises(ValueError, match="unknown keys"):
        PriceTable({"x": {"input": 1.0, "output": 1.0, "per_call": 3}})


def test_ledger_prices_calls_and_counts_cache_hits_as_savings():
    seen, warnings = [], []
    ledger = Ledger(on_record=seen.append, on_warning=warnings.append)
    ledger.add(rec(retries=2, attempt_errors=["HTTP 429", "HTTP 500"]))
    ledger.add(rec(hit=True))
    ledger.add(rec(model="mystery-model"))
    t = summarize(ledger.snapshot(), ledger.cost_of)
    one = (1000 * 0.15 + 100 * 0.60) / 1e6
    assert t["cost_usd"] == pytest.approx(one) and t["saved_usd"] == pytest.approx(one)
    assert t["calls"] == 3 and t["api_calls"] == (1 + 2) + 1 and t["cache_hits"] == 1 and t["retries"] == 2
    assert t["prompt_tokens"] == 2000 and t["saved_tokens"] == 1100
    assert len(seen) == 3 and seen[1].cost_usd == 0.0
    assert any("no price for model 'mystery-model'" in w for w in warnings)
    report = ledger.report()
    assert report["cache_reuse"] == {"answer": {"cache_hits": 1, "saved_tokens": 1100, "saved_usd": round(one, 6)}}
    assert report["unpriced_models"] == ["mystery-model"]


def test_budget_warns_at_50_and_80_percent_once_and_stops_at_the_limit():
    warnings = []
    ledger = Ledger(PriceTable({"m": {"input": 1000.0, "output": 0.0}}), budget=Budget(max_usd=1.0),
                    on_warning=warnings.append)
    for _ in range(4):                       # $0.20 each
        ledger.add(rec(pt=200, ct=0, model="m"))
    assert ledger.stop_reason() is None
    ledger.add(rec(pt=200, ct=0, model="m"))  # $1.00
    assert [w.split("(")[1].split(")")[0] for w in warnings] == ["50%", "80%", "100%"]
    assert "budget reached" in ledger.stop_reason()


def test_budget_stops_before_an_iteration_that_would_cross_it():
    b = Budget(max_tokens=1000)
    assert b.stop_reason() is None           # after the seeds: no iteration cost known yet
    b.observe(0.0, 300)                      # iteration 1 costs 300 tokens
    assert b.stop_reason() is None           # 300 + 300 <= 1000
    b.observe(0.0, 300)
    assert b.stop_reason() is None           # 600 + 300 <= 1000
    b.observe(0.0, 300)
    reason = b.stop_reason()                 # 900 + 300 > 1000: stop before crossing
    assert reason and "nearly reached" in reason and "--max-tokens" in reason


def test_budget_rejects_nonsense_limits():
    with pytest.raises(ValueError, match="--max-usd"):
        Budget(max_usd=0)
    with pytest.raises(ValueError, match="--max-tokens"):
        Budget(max_tokens=-5)


def test_records_of_a_resumed_run_count_against_the_budget():
    ledger = Ledger(budget=Budget(max_tokens=5000))
    ledger.records.extend([rec(pt=3000, ct=0), rec(pt=2500, ct=0)])   # what resume.py does
    assert "budget reached" in ledger.stop_reason()
    other = Ledger(budget=Budget(max_tokens=5000))
    assert other.restore([rec(pt=6000, ct=0).to_dict()]) == 1
    assert "budget reached" in other.stop_reason()

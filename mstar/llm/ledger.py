"""The run's ledger: every LLM call, what it cost, and sums of it.

The router hands each finished call (served, cached or failed) to `add`, which
prices it, feeds the budget and passes it on (the run store appends it to
llm_usage.jsonl). Everything else here is a read-only view over the records.
"""
from __future__ import annotations

import re
import threading
from typing import Callable, Iterable

from mstar.llm.budget import Budget
from mstar.llm.prices import PriceTable, how_to_price
from mstar.llm.types import UsageRecord

_TASK_TAG = re.compile(r"<task>\s*([a-z_]+)\s*</task>")


def call_kind(role: str, messages: list[dict]) -> str:
    """What a call is for: the task agent's and reflector's prompts open with a
    <task> tag (mstar/agent.py, mstar/iteration/reflect.py); toolkit and judge calls are free-form."""
    if role in ("toolkit", "judge"):
        return role
    text = str(messages[-1].get("content", "")) if messages else ""
    m = _TASK_TAG.search(text[:2000])
    if role == "reflector":
        return "compile_fix" if m and m.group(1) == "compile_fix" else "reflect"
    return m.group(1) if m else role


def _zero() -> dict:
    return {"calls": 0, "api_calls": 0, "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0,
            "cached_tokens": 0, "saved_tokens": 0, "cost_usd": 0.0, "saved_usd": 0.0,
            "retries": 0, "errors": 0, "rate_limited": 0, "held_s": 0.0}


def summarize(records: Iterable[UsageRecord], cost_of: Callable[[UsageRecord], float]) -> dict:
    """Sums over records. Token and dollar figures count what was billed; what the
    response cache served is in saved_tokens / saved_usd."""
    t = _zero()
    for r in records:
        t["calls"] += 1
        t["retries"] += r.retries
        t["errors"] += 1 if r.error else 0
        t["rate_limited"] += r.rate_limited
        t["held_s"] += r.held_s
        if r.cache_hit:
            t["cache_hits"] += 1
            t["saved_tokens"] += r.prompt_tokens + r.completion_tokens
            t["saved_usd"] += cost_of(r)
            continue
        t["api_calls"] += 1 + r.retries + r.rate_limited
        t["prompt_tokens"] += r.prompt_tokens
        t["completion_tokens"] += r.completion_tokens
        t["cached_tokens"] += r.cached_tokens
        t["cost_usd"] += r.cost_usd
    t["cost_usd"] = round(t["cost_usd"], 6)
    t["saved_usd"] = round(t["saved_usd"], 6)
    t["held_s"] = round(t["held_s"], 3)
    return t


class Ledger:
    def __init__(self, prices: PriceTable | None = None, *, budget: Budget | None = None,
                 on_record: Callable[[UsageRecord], None] | None = None,
                 on_warning: Callable[[str], None] | None = None):
        self.prices = prices or PriceTable()
        self.budget = budget or Budget()
        self.on_record = on_record
        self.on_warning = on_warning
        self.records: list[UsageRecord] = []
        self.unpriced: set[str] = set()
        self._counted = 0   # records the budget has seen
        self._restored: set[int] = set()   # ids of the records `restore` loaded (kept alive by `records`)
        self._lock = threading.Lock()

    def cost_of(self, rec: UsageRecord) -> float:
        """What the call costs (or would cost, for a cache hit) at the table's prices."""
        price = self.prices.lookup(rec.model, rec.backend)
        if price is None:
            return 0.0
        return price.cost(rec.prompt_tokens, rec.completion_tokens, rec.cached_tokens)

    def add(self, rec: UsageRecord) -> UsageRecord:
        rec.cost_usd = 0.0 if rec.cache_hit else self.cost_of(rec)
        warnings: list[str] = []
        with self._lock:
            if not rec.cache_hit and self.prices.lookup(rec.model, rec.backend) is None \
                    and rec.model not in self.unpriced:
                self.unpriced.add(rec.model)
                warnings.append(f"no price for model {rec.model!r}: its calls count as $0 "
                                f"(give it one: {how_to_price(rec.model)})")
            self.records.append(rec)
            warnings += self._catch_up()
        if self.on_record is not None:
            self.on_record(rec)
        if self.on_warning is not None:
            for w in warnings:
                self.on_warning(w)
        return rec

    def _catch_up(self) -> list[str]:
        """Feed the budget every record it has not seen yet -- including records a resumed
        run put into `records` directly -- so it always counts the whole run. Holds _lock."""
        new: list[str] = []
        for r in self.records[self._counted:]:
            new += self.budget.observe(r.cost_usd, r.billed_tokens)
        self._counted = len(self.records)
        return new

    def restore(self, records: Iterable[dict]) -> int:
        """Load an earlier part of this run (resume) so totals and the budget include it;
        nothing is re-written."""
        recs = [UsageRecord.from_dict(d) for d in records]
        with self._lock:
            self.records.extend(recs)
            self._restored.update(map(id, recs))
            self._catch_up()
        return len(recs)

    def stop_reason(self, in_flight: int = 0) -> str | None:
        with self._lock:
            self._catch_up()
        return self.budget.stop_reason(in_flight)

    # ------------------------------------------------------------ views
    def snapshot(self, start: int = 0) -> list[UsageRecord]:
        with self._lock:
            return self.records[start:]

    def mark(self) -> int:
        with self._lock:
            return len(self.records)

    def since(self, mark: int) -> dict:
        return summarize(self.snapshot(mark), self.cost_of)

    def in_scope(self, scope: str) -> dict:
        """This process's calls stamped with `scope`. Restored records are left out: an iteration
        a resumed run redoes has the calls of its interrupted first attempt among them, which the
        resume's progress line counted already (its spend so far), and counting them again made
        the console say 852 calls where the run had recorded 847 (issue 30)."""
        return summarize((r for r in self.snapshot() if r.scope == scope and id(r) not in self._restored),
                         self.cost_of)

    def totals(self) -> dict[str, dict]:
        by_role: dict[str, list[UsageRecord]] = {}
        for r in self.snapshot():
            by_role.setdefault(r.role, []).append(r)
        return {role: summarize(recs, self.cost_of) for role, recs in by_role.items()}

    def by_kind(self) -> dict[str, dict]:
        by: dict[str, list[UsageRecord]] = {}
        for r in self.snapshot():
            by.setdefault(r.kind or r.role, []).append(r)
        return {k: summarize(recs, self.cost_of) for k, recs in sorted(by.items())}

    def spend_line(self) -> str:
        """One line for the progress display: spend per role, calls, cache hits, retries."""
        totals = self.totals()
        all_ = summarize(self.snapshot(), self.cost_of)
        roles = " ".join(f"{role} ${t['cost_usd']:.4f}" for role, t in totals.items())
        budget = ""
        if self.budget.max_usd is not None:
            budget += f" of ${self.budget.max_usd:.2f}"
        if self.budget.max_tokens is not None:
            budget += f" | {self.budget.spent_tokens:,} of {self.budget.max_tokens:,} tokens"
        limited = f", {all_['rate_limited']} answered 429 (waited, not failed)" if all_["rate_limited"] else ""
        return (f"spend ${all_['cost_usd']:.4f}{budget} [{roles}] | {all_['calls']} calls, "
                f"{all_['cache_hits']} cached, {all_['retries']} retries, {all_['errors']} failed{limited}")

    def report(self) -> dict:
        """For summary.json: totals, per role and per kind of call, what the cache saved, budget."""
        reuse = {k: {"cache_hits": v["cache_hits"], "saved_tokens": v["saved_tokens"], "saved_usd": v["saved_usd"]}
                 for k, v in self.by_kind().items() if v["cache_hits"]}
        return {"total": summarize(self.snapshot(), self.cost_of), "per_role": self.totals(),
                "per_kind": self.by_kind(), "cache_reuse": reuse, "budget": self.budget.to_dict(),
                "unpriced_models": sorted(self.unpriced)}

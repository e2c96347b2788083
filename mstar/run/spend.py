"""What a run spent on LLM calls, per role, from its llm_usage.jsonl records.

Tokens are always known (reported by the server, or estimated by the offline backend); money
only when the LLM layer priced a call (a `cost_usd` field on its usage record). A reply served
from the response cache (`cache_hit`) was not paid for: it counts as a call and a cache hit, and
its tokens as saved, not spent.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable


@dataclass
class RoleSpend:
    role: str
    calls: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None        # None: no call of this role was priced
    models: tuple[str, ...] = ()
    cache_hits: int = 0
    saved_tokens: int = 0                # what the cache hits would have cost

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict:
        return {**asdict(self), "tokens": self.tokens, "models": list(self.models)}

    def add(self, other: "RoleSpend") -> None:
        """Count `other`'s calls in this one's (its models are not merged: the caller decides)."""
        self.calls += other.calls
        self.errors += other.errors
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cache_hits += other.cache_hits
        self.saved_tokens += other.saved_tokens
        if other.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + other.cost_usd


def spend_by_role(records: Iterable[dict]) -> dict[str, RoleSpend]:
    """Roles in the order they first appear."""
    out: dict[str, RoleSpend] = {}
    for r in records:
        s = out.setdefault(str(r.get("role", "?")), RoleSpend(str(r.get("role", "?"))))
        s.calls += 1
        s.errors += 1 if r.get("error") else 0
        if r.get("cache_hit"):
            s.cache_hits += 1
            s.saved_tokens += int(r.get("prompt_tokens") or 0) + int(r.get("completion_tokens") or 0)
        else:
            s.prompt_tokens += int(r.get("prompt_tokens") or 0)
            s.completion_tokens += int(r.get("completion_tokens") or 0)
        if r.get("cost_usd") is not None:
            s.cost_usd = (s.cost_usd or 0.0) + float(r["cost_usd"])
        model = f"{r.get('backend', '?')}:{r.get('model', '?')}"
        if model not in s.models:
            s.models = s.models + (model,)
    return out


def total(spend: dict[str, RoleSpend]) -> RoleSpend:
    t = RoleSpend("total")
    for s in spend.values():
        t.add(s)
    return t

"""A run's llm_usage.jsonl, read incrementally: spend per role, activity over time, the last minute.

A real run writes one record per LLM call, so the file grows to tens of megabytes while the live
view asks about it every few seconds. `UsageTail.refresh` reads only the bytes appended since its
last look (a line without its newline yet is left for the next look), keeps a compact tuple per
call rather than the record, and adds the new records to the per-role totals with the project's
own accounting (mstar.run.spend: cache hits are calls, not spent tokens). A file that shrank
(`mstar resume` cuts a partial last line) is read again from the start.
"""
from __future__ import annotations

import dataclasses
import json
import math
import threading
from dataclasses import dataclass
from pathlib import Path

from mstar.run.spend import RoleSpend, spend_by_role, total


@dataclass(frozen=True, slots=True)
class Call:
    """What the time series need from one usage record."""
    at: float | None          # epoch seconds when the call ended (older runs: None)
    role: str
    tokens: int               # prompt + completion; 0 for a cache hit (nothing was spent)
    cost: float               # dollars, 0 when unpriced
    error: bool
    retries: int
    rate_limited: int         # 429 answers this call met
    held_s: float             # seconds it waited on the endpoint's limiter
    scope: str | None         # what the loop was doing: a seed or iteration id, "confirm", "test"


def _call(r: dict) -> Call:
    hit = bool(r.get("cache_hit"))
    tokens = 0 if hit else int(r.get("prompt_tokens") or 0) + int(r.get("completion_tokens") or 0)
    at = r.get("at")
    return Call(float(at) if isinstance(at, (int, float)) else None, str(r.get("role", "?")), tokens,
                float(r.get("cost_usd") or 0.0), bool(r.get("error")), int(r.get("retries") or 0),
                int(r.get("rate_limited") or 0), float(r.get("held_s") or 0.0),
                str(r["scope"]) if r.get("scope") is not None else None)


def _merge(into: dict[str, RoleSpend], new: dict[str, RoleSpend]) -> None:
    for role, s in new.items():
        t = into.setdefault(role, RoleSpend(role))
        t.calls += s.calls
        t.errors += s.errors
        t.prompt_tokens += s.prompt_tokens
        t.completion_tokens += s.completion_tokens
        t.cache_hits += s.cache_hits
        t.saved_tokens += s.saved_tokens
        if s.cost_usd is not None:
            t.cost_usd = (t.cost_usd or 0.0) + s.cost_usd
        t.models = t.models + tuple(m for m in s.models if m not in t.models)


class UsageTail:
    """One run's usage file, read as it grows. Safe to share between request threads."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self.offset = 0
        self.calls: list[Call] = []
        self.by_role: dict[str, RoleSpend] = {}
        self.bad_lines = 0

    def refresh(self) -> "UsageTail":
        with self._lock:
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                self._reset()
                return self
            if size < self.offset:
                self._reset()
            if size == self.offset:
                return self
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read(size - self.offset)
            end = chunk.rfind(b"\n") + 1          # whole lines only; a half-written one waits
            records = []
            for line in chunk[:end].split(b"\n"):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    self.bad_lines += 1
                    continue
                if isinstance(rec, dict):
                    records.append(rec)
            self.offset += end
            self.calls.extend(_call(r) for r in records)
            _merge(self.by_role, spend_by_role(records))
            return self

    # ------------------------------------------------------------ questions the views ask
    def spend(self) -> tuple[dict[str, RoleSpend], RoleSpend]:
        with self._lock:
            roles = {k: dataclasses.replace(v) for k, v in self.by_role.items()}  # copies, not the live totals
        return roles, total(roles)

    def last(self) -> Call | None:
        with self._lock:
            return self.calls[-1] if self.calls else None

    def window(self, now: float, seconds: float = 60.0) -> dict:
        """Calls, errors, 429s and seconds held in the last `seconds` (by the records' `at`)."""
        since = now - seconds
        out = {"seconds": seconds, "calls": 0, "errors": 0, "retries": 0, "rate_limited": 0, "held_s": 0.0}
        with self._lock:
            for c in reversed(self.calls):
                if c.at is None or c.at < since:
                    break                         # records are appended in time order (near enough)
                out["calls"] += 1
                out["errors"] += c.error
                out["retries"] += c.retries
                out["rate_limited"] += c.rate_limited
                out["held_s"] += c.held_s
        out["held_s"] = round(out["held_s"], 3)
        return out

    def series(self, buckets: int = 60) -> dict:
        """Per-role tokens, cost and calls, and errors / retries / 429s / seconds held, in equal
        time buckets from the first call to the last (at most `buckets` of them)."""
        with self._lock:
            calls = [c for c in self.calls if c.at is not None]
        roles = list(dict.fromkeys(c.role for c in calls))
        if not calls:
            return {"start": None, "width_s": 0, "roles": roles, "buckets": []}
        start, end = min(c.at for c in calls), max(c.at for c in calls)
        width = max(1.0, math.ceil((end - start) / buckets)) if end > start else 1.0
        n = int((end - start) // width) + 1
        rows = [{"tokens": {r: 0 for r in roles}, "cost": {r: 0.0 for r in roles}, "calls": {r: 0 for r in roles},
                 "errors": 0, "retries": 0, "rate_limited": 0, "held_s": 0.0} for _ in range(n)]
        for c in calls:
            b = rows[min(n - 1, int((c.at - start) // width))]
            b["tokens"][c.role] += c.tokens
            b["cost"][c.role] += c.cost
            b["calls"][c.role] += 1
            b["errors"] += c.error
            b["retries"] += c.retries
            b["rate_limited"] += c.rate_limited
            b["held_s"] += c.held_s
        for b in rows:
            b["held_s"] = round(b["held_s"], 3)
            b["cost"] = {r: round(v, 6) for r, v in b["cost"].items()}
        return {"start": start, "width_s": width, "roles": roles, "buckets": rows}


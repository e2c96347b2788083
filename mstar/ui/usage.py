"""A run's llm_usage.jsonl: read incrementally for spend over time; its end alone for the last minute.

A real run writes one record per LLM call, so the file grows to tens of megabytes while the live
view asks about it every few seconds. `UsageTail.refresh` reads only the bytes appended since its
last look (a line without its newline yet is left for the next look), keeps a compact tuple per
call rather than the record, and adds the new records to the per-role totals with the project's
own accounting (mstar.run.spend: cache hits are calls, not spent tokens). A file that shrank
(`mstar resume` cuts a partial last line) is read again from the start. The live panel needs
only the last minute: `recent` reads the file's end backwards and nothing else.
"""
from __future__ import annotations

import dataclasses
import json
import math
import threading
from pathlib import Path
from typing import NamedTuple

from mstar.run.spend import RoleSpend, spend_by_role, total


class Call(NamedTuple):
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
    get = r.get
    tokens = 0 if get("cache_hit") else (get("prompt_tokens") or 0) + (get("completion_tokens") or 0)
    at, scope = get("at"), get("scope")
    return Call(at if isinstance(at, (int, float)) else None, str(get("role", "?")), int(tokens),
                float(get("cost_usd") or 0.0), bool(get("error")), int(get("retries") or 0),
                int(get("rate_limited") or 0), float(get("held_s") or 0.0), None if scope is None else str(scope))


def parse_lines(data: bytes) -> tuple[list[dict], int]:
    """The JSON objects of whole lines, and how many lines were not one. One parse for the
    whole chunk (a JSON array of its lines) when every line is sound, line by line otherwise."""
    lines = [ln for ln in data.split(b"\n") if ln.strip()]
    try:
        records = json.loads(b"[" + b",".join(lines) + b"]")
        if all(isinstance(r, dict) for r in records):
            return records, 0
    except ValueError:
        pass
    out, bad = [], 0
    for ln in lines:
        try:
            rec = json.loads(ln)
        except ValueError:
            rec = None
        if isinstance(rec, dict):
            out.append(rec)
        else:
            bad += 1
    return out, bad


def recent(path: Path, now: float, seconds: float = 60.0, block: int = 64 * 1024) -> tuple[list[Call], Call | None]:
    """The calls of the last `seconds` and the last call, read from the end of the file backwards
    (a block at a time) without reading the rest: what the live panel asks on every refresh of a
    run whose usage file may be tens of megabytes."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return [], None
    with fh:
        end = fh.seek(0, 2)
        data, pos = b"", end
        while pos > 0:
            pos = max(0, pos - block)
            fh.seek(pos)
            data = fh.read(end - pos)
            first = data.find(b"\n") + 1 if pos > 0 else 0     # the first line may be cut: skip it
            whole = data[first:data.rfind(b"\n") + 1]
            records, _ = parse_lines(whole)
            calls = [_call(r) for r in records]
            if pos == 0 or (calls and (calls[0].at is None or calls[0].at < now - seconds)):
                break                                    # reached the minute's start (or times are not recorded)
            block *= 2
        else:
            calls = []
    last = calls[-1] if calls else None
    return [c for c in calls if c.at is not None and c.at >= now - seconds], last


def window(calls: list[Call], seconds: float = 60.0) -> dict:
    """Calls, errors, retries, 429s and seconds held over `calls` (those of the last `seconds`)."""
    return {"seconds": seconds, "calls": len(calls), "errors": sum(c.error for c in calls),
            "retries": sum(c.retries for c in calls), "rate_limited": sum(c.rate_limited for c in calls),
            "held_s": round(sum(c.held_s for c in calls), 3)}


def _merge(into: dict[str, RoleSpend], new: dict[str, RoleSpend]) -> None:
    for role, s in new.items():
        t = into.setdefault(role, RoleSpend(role))
        t.add(s)
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
            records, bad = parse_lines(chunk[:end])
            self.bad_lines += bad
            self.offset += end
            self.calls.extend(_call(r) for r in records)
            _merge(self.by_role, spend_by_role(records))
            return self

    # ------------------------------------------------------------ questions the views ask
    def spend(self) -> tuple[dict[str, RoleSpend], RoleSpend]:
        with self._lock:
            roles = {k: dataclasses.replace(v) for k, v in self.by_role.items()}  # copies, not the live totals
        return roles, total(roles)

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


from __future__ import annotations

import json
import re
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Optional

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Split what was said into three kinds of memory: facts (stable facts about people), "
    "events (things that happened, with when if known) and plans (things someone intends to do). "
    "Each entry is one sentence that names the person. Also give the session date if shown."
)
INSTRUCTION_QUERY = (
    "Classify the question as one of: when, who, where, count, plan, other. "
    "Give the keywords and the person the question is about."
)
INSTRUCTION_RESPONSE = "Answer using the section that matches the question type first."
ALWAYS_ON_KNOWLEDGE = "Memory is organised in FACTS, EVENTS and PLANS sections."

QUESTION_TYPES = ("when", "who", "where", "count", "plan", "other")
ROUTES: dict[str, tuple[str, ...]] = {
    "when": ("events", "plans", "facts"),
    "who": ("facts", "events"),
    "where": ("facts", "events"),
    "count": ("events", "facts"),
    "plan": ("plans", "events"),
    "other": ("facts", "events", "plans"),
}
_TYPE_HINTS = [
    (re.compile(r"^\s*(when|what (?:day|date|year|month|time))\b", re.I), "when"),
    (re.compile(r"^\s*how (?:many|much|often|long)\b", re.I), "count"),
    (re.compile(r"^\s*where\b", re.I), "where"),
    (re.compile(r"^\s*who\b", re.I), "who"),
    (re.compile(r"\b(plan|going to|will|intend|next)\b", re.I), "plan"),
]
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")


@dataclass
class KnowledgeItem:
    facts: list[str] = field(default_factory=list, metadata={"description": "Stable facts about people, one sentence each"})
    events: list[str] = field(default_factory=list, metadata={"description": "Things that happened, one sentence each"})
    plans: list[str] = field(default_factory=list, metadata={"description": "Things someone plans to do"})
    session_date: Optional[str] = field(default=None, metadata={"description": "Session date YYYY-MM-DD"})


@dataclass
class Query:
    question_type: str = field(default="other", metadata={"description": "One of: when, who, where, count, plan, other"})
    keywords: str = field(default="", metadata={"description": "Keywords of the question"})
    person: Optional[str] = field(default=None, metadata={"description": "Person the question is about"})


class _Store:
    """Base class: one chroma collection plus bookkeeping shared by all stores."""

    kind = "base"

    def __init__(self, toolkit: Any, name: str) -> None:
        self.toolkit = toolkit
        self.collection = toolkit.chroma.get_or_create_collection(name)
        self.count = 0
        self._people: dict[str, int] = defaultdict(int)

    def _id(self) -> str:
        self.count += 1
        return f"{self.kind}-{self.count:04d}"

    def add(self, texts: list[str], people: list[str], date: Optional[str], session: int) -> int:
        texts = [t.strip() for t in texts if t and t.strip()]
        if not texts:
            return 0
        ids, metas = [], []
        for text in texts:
            person = next((p for p in people if p.lower() in text.lower()), "")
            self._people[person] += 1
            ids.append(self._id())
            metas.append(self.metadata(text, person, date, session))
        self.collection.upsert(ids=ids, documents=texts, metadatas=metas)
        return len(ids)

    def metadata(self, text: str, person: str, date: Optional[str], session: int) -> dict:
        return {"person": person, "session": session, "date": date or ""}

    def search(self, text: str, person: Optional[str], k: int) -> list[tuple[float, str, dict]]:
        if self.count == 0:
            return []
        where = {"person": person} if person and self._people.get(person) else None
        res = self.collection.query(query_texts=[text or "memory"], n_results=min(k, self.count),
                                    where=where, include=["documents", "metadatas", "distances"])
        docs = res["documents"][0] if res.get("documents") else []
        out = [(1.0 - d, doc, meta or {}) for d, doc, meta in zip(res["distances"][0], docs, res["metadatas"][0])]
        self.toolkit.logger.debug(f"{self.kind}: {len(out)} hits (where={where})")
        return out

    def render(self, hit: tuple[float, str, dict]) -> str:
        return "- " + hit[1]


class EventStore(_Store):
    kind = "events"

    def metadata(self, text: str, person: str, date: Optional[str], session: int) -> dict:
        meta = super().metadata(text, person, date, session)
        explicit = _DATE.search(text)
        meta["date"] = explicit.group(0) if explicit else (date or "")
        try:
            meta["ordinal"] = datetime.strptime(meta["date"], "%Y-%m-%d").toordinal() if meta["date"] else 0
        except ValueError:
            meta["ordinal"] = 0
        return meta

    def render(self, hit: tuple[float, str, dict]) -> str:
        when = hit[2].get("date") or "undated"
        return f"- [{when}] {hit[1]}"


class PlanStore(_Store):
    kind = "plans"

    def render(self, hit: tuple[float, str, dict]) -> str:
        return f"- (planned in session {hit[2].get('session', '?')}) {hit[1]}"


class FactStore(_Store):
    kind = "facts"

    def add(self, texts: list[str], people: list[str], date: Optional[str], session: int) -> int:
        # facts are stable: drop exact repeats before they reach the collection
        existing = set()
        if self.count:
            got = self.collection.get(where_document={"$contains": " "}, include=["documents"])
            existing = {d.strip().lower() for d in got.get("documents") or []}
        fresh = [t for t in texts if t and t.strip().lower() not in existing]
        return super().add(fresh, people, date, session)


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.stores: dict[str, _Store] = {
            "facts": FactStore(toolkit, "mem_facts"),
            "events": EventStore(toolkit, "mem_events"),
            "plans": PlanStore(toolkit, "mem_plans"),
        }
        self.session = 0
        self.people: list[str] = []
        self.sql = toolkit.db
        self.sql.row_factory = sqlite3.Row
        self.sql.execute("CREATE TABLE IF NOT EXISTS routing_log (session INTEGER, qtype TEXT, hits INTEGER)")

    def _people_in(self, raw_text: str) -> list[str]:
        found = re.findall(r"^(?:\[[^\]]+\]\s*)?([A-Z][a-z]+):", raw_text, re.M)
        for name in found:
            if name not in self.people:
                self.people.append(name)
        return list(dict.fromkeys(found)) or self.people[-2:]

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.session += 1
        people = self._people_in(raw_text)
        date = item.session_date
        if not date and (m := _DATE.search(raw_text)):
            date = m.group(0)
        counts = {kind: self.stores[kind].add(list(getattr(item, kind)), people, date, self.session)
                  for kind in ("facts", "events", "plans")}
        if not any(counts.values()):  # extraction gave nothing: keep the raw lines as events
            lines = [ln.split(":", 1)[-1].strip() for ln in raw_text.splitlines() if ":" in ln]
            counts["events"] = self.stores["events"].add(lines, people, date, self.session)
        self.toolkit.logger.debug(f"session {self.session} stored {json.dumps(counts)}")

    def _classify(self, query: Query) -> str:
        declared = (query.question_type or "").strip().lower()
        if declared in QUESTION_TYPES and declared != "other":
            return declared
        for pattern, qtype in _TYPE_HINTS:
            if pattern.search(query.keywords or ""):
                return qtype
        return "other"

    def read(self, query: Query) -> str:
        qtype = self._classify(query)
        person = (query.person or "").strip() or None
        sections, total = [], 0
        for rank, kind in enumerate(ROUTES[qtype]):
            k = 6 if rank == 0 else 3
            hits = self.stores[kind].search(query.keywords, person, k)
            if kind == "events" and qtype == "when":
                hits.sort(key=lambda h: (-h[0], h[2].get("ordinal", 0)))
            total += len(hits)
            if hits:
                sections.append(kind.upper() + ":\n" + "\n".join(self.stores[kind].render(h) for h in hits))
        self.sql.execute("INSERT INTO routing_log VALUES (?, ?, ?)", (self.session, qtype, total))
        self.toolkit.logger.debug(f"routed {qtype!r} person={person!r} -> {total} hits")
        if not sections:
            return "Nothing stored yet."
        return f"(question type: {qtype})\n" + "\n\n".join(sections)[:2900]

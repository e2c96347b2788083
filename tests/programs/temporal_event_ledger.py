"""Temporal event ledger: every session becomes dated events in SQLite with full-text search.

Design notes (as an evolving model would leave them):
- Each knowledge item carries the session date and a list of atomic events. Relative
  expressions ("yesterday", "last week", "two days ago") are resolved against the session
  date at write time so that later questions about *when* something happened can be answered
  with an absolute date.
- Events are stored in an FTS5 table for BM25 ranking plus a plain table for metadata.
- read() ranks by BM25, boosts events whose date matches a date mentioned in the question,
  and prints a compact timeline.
"""
from __future__ import annotations

import re
import json
import math
import sqlite3
import hashlib
import datetime as dt
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Optional

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Read the conversation session. Record the session date (YYYY-MM-DD) if it is shown, "
    "the people who speak, and every concrete event as a short sentence that names who did "
    "what. Keep relative time words (yesterday, last week) inside the event sentence."
)
INSTRUCTION_QUERY = (
    "Rewrite the question as search keywords. If the question asks when something happened, "
    "set wants_date to true. Put the main person's name in person."
)
INSTRUCTION_RESPONSE = (
    "Answer with the shortest phrase that answers the question. For 'when' questions give the "
    "date exactly as written in the memory."
)
ALWAYS_ON_KNOWLEDGE = "Dates in the memory are absolute (YYYY-MM-DD) and already resolved."

_WORD = re.compile(r"[A-Za-z][A-Za-z'\-]+|\d+")
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_BRACKET_DATE = re.compile(r"^\[(\d{4}-\d{2}-\d{2})\]")
_STOP = frozenset(
    "the a an and or but of to in on at for with from by is are was were be been did do does "
    "what when where who which how why i you he she they we it my your his her their our".split()
)
_RELATIVE = {
    "yesterday": -1,
    "today": 0,
    "tonight": 0,
    "last night": -1,
    "two days ago": -2,
    "a few days ago": -3,
    "last week": -7,
    "last weekend": -7,
    "last month": -30,
    "last year": -365,
}
_DATE_FORMATS = ("%Y-%m-%d", "%d %B %Y", "%B %d, %Y", "%d/%m/%Y", "%Y/%m/%d", "%d %b %Y")


@dataclass
class KnowledgeItem:
    session_date: Optional[str] = field(
        default=None, metadata={"description": "Date of the session as YYYY-MM-DD, if shown"})
    speakers: list[str] = field(
        default_factory=list, metadata={"description": "Names of the people who speak"})
    events: list[str] = field(
        default_factory=list,
        metadata={"description": "Concrete events, one short sentence each, naming who did what"})
    topic: str = field(default="", metadata={"description": "A few words on what the session is about"})


@dataclass
class Query:
    keywords: str = field(default="", metadata={"description": "Search keywords"})
    person: Optional[str] = field(default=None, metadata={"description": "Main person asked about"})
    wants_date: bool = field(default=False, metadata={"description": "True when the question asks when"})


@dataclass
class _Event:
    """One stored event; `when` is the resolved date (None if unknown)."""

    text: str
    speaker: Optional[str] = None
    when: Optional[dt.date] = None
    session_id: int = 0
    tokens: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.text = " ".join(self.text.split())
        if not self.tokens:
            self.tokens = [t for t in _tokens(self.text) if t not in _STOP]

    @property
    def when_text(self) -> str:
        return self.when.isoformat() if self.when else "date unknown"


def _tokens(text: str) -> list[str]:
    return [m.group(0).lower() for m in _WORD.finditer(text or "")]


def _parse_date(value: Optional[str]) -> Optional[dt.date]:
    """Parse the many date shapes extraction models produce; None when hopeless."""
    if not value:
        return None
    value = value.strip().strip("[]")
    try:
        return dt.date.fromisoformat(value[:10])
    except ValueError:
        pass
    for fmt in _DATE_FORMATS:
        try:
            return dt.datetime.strptime(value, fmt).date()
        except ValueError:
            continue
    if (m := _ISO_DATE.search(value)) is not None:
        y, mo, d = (int(g) for g in m.groups())
        try:
            return dt.date(y, mo, d)
        except ValueError:
            return None
    return None


class KnowledgeBase:
    """SQLite ledger of dated events with FTS5 search and a Python fallback index."""

    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.db = toolkit.db
        self.db.row_factory = sqlite3.Row
        self.db.executescript(
            """
            CREATE TABLE IF NOT EXISTS sessions (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                session_date TEXT,
                topic TEXT,
                speakers TEXT
            );
            CREATE TABLE IF NOT EXISTS events (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                session_id INTEGER REFERENCES sessions(id),
                text TEXT NOT NULL,
                speaker TEXT,
                event_date TEXT,
                digest TEXT UNIQUE
            );
            CREATE INDEX IF NOT EXISTS idx_events_date ON events(event_date);
            """
        )
        self.fts_ok = True
        try:
            self.db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS events_fts USING fts5(text, content='')")
        except sqlite3.Error as exc:  # FTS5 missing: fall back to the Python index
            self.fts_ok = False
            self.toolkit.logger.debug(f"fts5 unavailable: {exc}")
        self.db.commit()
        self._postings: dict[str, set[int]] = defaultdict(set)
        self._doc_freq: Counter[str] = Counter()
        self._events: dict[int, _Event] = {}
        self.speaker_counts: Counter[str] = Counter()
        self.n_sessions = 0

    # ------------------------------------------------------------------ write path
    def _resolve_relative(self, text: str, anchor: Optional[dt.date]) -> Optional[dt.date]:
        if anchor is None:
            return _parse_date(text)
        lowered = text.lower()
        for phrase, delta in sorted(_RELATIVE.items(), key=lambda kv: -len(kv[0])):
            if phrase in lowered:
                return anchor + dt.timedelta(days=delta)
        explicit = _parse_date(text)
        return explicit or anchor

    def _speaker_of(self, event: str, speakers: list[str]) -> Optional[str]:
        lowered = event.lower()
        hits = [s for s in speakers if s and s.lower() in lowered]
        return hits[0] if hits else (speakers[0] if len(speakers) == 1 else None)

    def _events_from_raw(self, raw_text: str) -> list[str]:
        lines = []
        for line in raw_text.splitlines():
            line = _BRACKET_DATE.sub("", line).strip()
            if len(line) > 25:
                lines.append(line)
        return lines[:12]

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        anchor = _parse_date(item.session_date)
        if anchor is None and (m := _BRACKET_DATE.search(raw_text.strip())):
            anchor = _parse_date(m.group(1))
        speakers = [s.strip() for s in item.speakers if s and s.strip()]
        cur = self.db.execute(
            "INSERT INTO sessions (session_date, topic, speakers) VALUES (?, ?, ?)",
            (anchor.isoformat() if anchor else None, item.topic, json.dumps(speakers, ensure_ascii=False)),
        )
        session_id = cur.lastrowid
        self.n_sessions += 1
        events = [e for e in item.events if e and e.strip()] or self._events_from_raw(raw_text)
        stored = 0
        for text in events:
            event = _Event(text=text, speaker=self._speaker_of(text, speakers),
                           when=self._resolve_relative(text, anchor), session_id=session_id)
            digest = hashlib.sha1(event.text.lower().encode("utf-8")).hexdigest()
            try:
                cur = self.db.execute(
                    "INSERT INTO events (session_id, text, speaker, event_date, digest) VALUES (?, ?, ?, ?, ?)",
                    (session_id, event.text, event.speaker, event.when.isoformat() if event.when else None, digest),
                )
            except sqlite3.IntegrityError:
                self.toolkit.logger.debug(f"duplicate event skipped: {event.text[:40]!r}")
                continue
            event_id = cur.lastrowid
            if self.fts_ok:
                self.db.execute("INSERT INTO events_fts (rowid, text) VALUES (?, ?)", (event_id, event.text))
            self._events[event_id] = event
            for tok in set(event.tokens):
                self._postings[tok].add(event_id)
                self._doc_freq[tok] += 1
            if event.speaker:
                self.speaker_counts[event.speaker] += 1
            stored += 1
        self.db.commit()
        self.toolkit.logger.debug(
            "session {} ({}): stored {}/{} events".format(session_id, anchor, stored, len(events)))

    # ------------------------------------------------------------------ read path
    def _idf(self, token: str) -> float:
        n = max(1, len(self._events))
        return math.log(1.0 + (n - self._doc_freq[token] + 0.5) / (self._doc_freq[token] + 0.5))

    def _python_scores(self, q_tokens: list[str]) -> dict[int, float]:
        scores: dict[int, float] = defaultdict(float)
        avg_len = sum(len(e.tokens) for e in self._events.values()) / max(1, len(self._events))
        for tok in q_tokens:
            for event_id in self._postings.get(tok, ()):
                event = self._events[event_id]
                tf = event.tokens.count(tok)
                norm = tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * len(event.tokens) / max(avg_len, 1.0)))
                scores[event_id] += self._idf(tok) * norm
        return scores

    def _fts_scores(self, q_tokens: list[str]) -> dict[int, float]:
        if not self.fts_ok or not q_tokens:
            return {}
        match = " OR ".join(f'"{t}"' for t in q_tokens if t.isalnum())
        if not match:
            return {}
        try:
            rows = self.db.execute(
                "SELECT rowid, bm25(events_fts) AS rank FROM events_fts WHERE events_fts MATCH ? "
                "ORDER BY rank LIMIT 40", (match,)).fetchall()
        except sqlite3.OperationalError as exc:
            self.toolkit.logger.debug(f"fts query failed ({exc}); using the python index")
            return {}
        return {row["rowid"]: -float(row["rank"]) for row in rows}

    def read(self, query: Query) -> str:
        if not self._events:
            return "No events recorded yet."
        q_tokens = [t for t in _tokens(query.keywords) if t not in _STOP]
        if query.person:
            q_tokens += [t for t in _tokens(query.person) if t not in _STOP]
        scores = self._fts_scores(q_tokens) or self._python_scores(q_tokens)
        asked_dates = {d for d in (_parse_date(m.group(0)) for m in _ISO_DATE.finditer(query.keywords)) if d}
        ranked = []
        for event_id, score in scores.items():
            event = self._events.get(event_id)
            if event is None:
                continue
            if query.person and event.speaker and event.speaker.lower() == query.person.lower():
                score *= 1.3
            if event.when and event.when in asked_dates:
                score *= 1.5
            ranked.append((score, event_id, event))
        ranked.sort(key=lambda t: (-t[0], t[1]))
        if not ranked:  # nothing matched: show the most recent events instead
            recent = sorted(self._events.items(), key=lambda kv: kv[0], reverse=True)[:5]
            ranked = [(0.0, i, e) for i, e in recent]
        lines = []
        for score, event_id, event in ranked[:8]:
            who = f"{event.speaker}: " if event.speaker else ""
            date_part = f"[{event.when_text}] " if query.wants_date or event.when else ""
            lines.append(f"{date_part}{who}{event.text} (score {score:.2f})")
        header = ""
        if self.speaker_counts:
            top = ", ".join(f"{name} ({n})" for name, n in self.speaker_counts.most_common(3))
            header = f"People: {top}\n"
        self.toolkit.logger.debug(f"read: {len(q_tokens)} tokens, {len(ranked)} candidates")
        return (header + "\n".join(lines))[:3000]

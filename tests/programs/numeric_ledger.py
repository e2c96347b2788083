"""Numeric ledger: counts, amounts and durations pulled out of conversations.

Questions like "how many students came to the first class" or "how much did the bike cost"
fail with plain retrieval because the number is buried in a long turn. This program extracts
(person, quantity, unit, context) records with regexes (digits and number words), stores them
in SQLite and answers count/amount questions with the matching records, aggregated per week.
Everything else falls back to a keyword search over the stored sentences.
"""
import re
import math
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Dict, List, Optional, Tuple

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Copy every sentence that contains a number, an amount of money, a count of people or "
    "things, or a duration. Also give the session date as YYYY-MM-DD and the speakers."
)
INSTRUCTION_QUERY = "Give the keywords; set is_quantity to true if the question asks how many, how much or how long."
INSTRUCTION_RESPONSE = "Give the number with its unit. If several records match, use the most recent."
ALWAYS_ON_KNOWLEDGE = "Numbers in the memory were normalised to digits."

NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
    "hundred": 100, "a dozen": 12, "dozen": 12, "a couple": 2, "couple": 2, "a few": 3,
}
_WORD_NUMBER = re.compile(r"\b(" + "|".join(sorted(map(re.escape, NUMBER_WORDS), key=len, reverse=True)) + r")\b", re.I)
_QUANTITY = re.compile(
    r"(?P<currency>[$€£])?\s?(?P<value>\d+(?:[.,]\d+)?)\s*(?P<unit>%|percent|dollars?|euros?|hours?|days?|"
    r"weeks?|months?|years?|miles?|km|kilometers?|students?|people|kids|children|books?|times|pounds?)?", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_SPEAKER = re.compile(r"^(?:\[[^\]]*\]\s*)?([A-Z][a-z]+):\s*(.*)$")
_WORD = re.compile(r"[a-z]+")
_QUANTITY_QUESTION = re.compile(r"\bhow (many|much|long|often|old)\b", re.I)


@dataclass
class KnowledgeItem:
    number_sentences: List[str] = field(default_factory=list, metadata={
        "description": "Sentences with numbers, amounts, counts or durations, copied"})
    session_date: Optional[str] = field(default=None, metadata={"description": "Session date YYYY-MM-DD"})
    speakers: List[str] = field(default_factory=list, metadata={"description": "Speakers of the session"})


@dataclass
class Query:
    keywords: str = field(default="", metadata={"description": "Keywords of the question"})
    is_quantity: bool = field(default=False, metadata={"description": "True for how many / how much / how long"})


@dataclass(frozen=True)
class Quantity:
    value: float
    unit: str
    currency: str = ""

    def __str__(self) -> str:
        number = f"{self.value:g}" if self.value != int(self.value) else f"{int(self.value)}"
        if self.currency:
            return f"{self.currency}{number}"
        return f"{number} {self.unit}".strip()


UNIT_ALIASES = {
    "dollar": "dollars", "euro": "euros", "hour": "hours", "day": "days", "week": "weeks",
    "month": "months", "year": "years", "mile": "miles", "kilometer": "km", "kilometers": "km",
    "student": "students", "book": "books", "percent": "%", "pound": "pounds", "kids": "children",
}
DAYS_PER_UNIT = {"days": 1, "weeks": 7, "months": 30, "years": 365}


def canonical_unit(unit: str) -> str:
    unit = (unit or "").lower()
    return UNIT_ALIASES.get(unit, unit)


def as_days(q: "Quantity") -> Optional[float]:
    """Durations in days, so 'two weeks' and '14 days' compare equal."""
    factor = DAYS_PER_UNIT.get(canonical_unit(q.unit))
    return q.value * factor if factor else None


def words_to_digits(text: str) -> str:
    return _WORD_NUMBER.sub(lambda m: str(NUMBER_WORDS[m.group(1).lower()]), text)


def quantities(text: str) -> List[Quantity]:
    found = []
    for m in _QUANTITY.finditer(words_to_digits(text)):
        raw = m.group("value").replace(",", ".")
        try:
            value = float(raw)
        except ValueError:
            continue
        unit = canonical_unit(m.group("unit") or "")
        currency = m.group("currency") or ""
        if not unit and not currency and 1900 <= value <= 2100:
            continue  # a year, not a quantity
        found.append(Quantity(value, unit, currency))
    return found


def week_of(day: Optional[str]) -> str:
    if not day:
        return "undated"
    try:
        year, week, _ = datetime.strptime(day[:10], "%Y-%m-%d").date().isocalendar()
    except ValueError:
        return "undated"
    return f"{year}-W{week:02d}"


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.db = toolkit.db
        self.db.row_factory = sqlite3.Row
        self.db.executescript("""
            CREATE TABLE IF NOT EXISTS sentences (
                id INTEGER PRIMARY KEY, session INTEGER, speaker TEXT, day TEXT, text TEXT);
            CREATE TABLE IF NOT EXISTS amounts (
                id INTEGER PRIMARY KEY, sentence_id INTEGER, value REAL, unit TEXT, currency TEXT,
                week TEXT);
        """)
        self.session = 0
        self.vocab: Dict[str, int] = defaultdict(int)

    def _store_sentence(self, speaker: str, day: Optional[str], text: str) -> int:
        sid = self.db.execute("INSERT INTO sentences (session, speaker, day, text) VALUES (?, ?, ?, ?)",
                              (self.session, speaker, day, text)).lastrowid
        for w in set(_WORD.findall(text.lower())):
            self.vocab[w] += 1
        stored = 0
        for q in quantities(text):
            self.db.execute("INSERT INTO amounts (sentence_id, value, unit, currency, week) VALUES (?, ?, ?, ?, ?)",
                            (sid, q.value, q.unit, q.currency, week_of(day)))
            stored += 1
        return stored

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.session += 1
        day = item.session_date
        if not day and (m := re.search(r"\d{4}-\d{2}-\d{2}", raw_text)):
            day = m.group(0)
        n_amounts = 0
        for sentence in item.number_sentences:
            n_amounts += self._store_sentence(item.speakers[0] if item.speakers else "", day, sentence)
        for line in raw_text.splitlines():
            m = _SPEAKER.match(line.strip())
            speaker, body = (m.group(1), m.group(2)) if m else ("", line.strip())
            for sentence in _SENTENCE.split(body):
                if sentence and sentence not in item.number_sentences:
                    n_amounts += self._store_sentence(speaker, day, sentence)
        self.db.commit()
        self.toolkit.logger.debug(f"session {self.session} ({day}): {n_amounts} amounts stored")

    def _keyword_rows(self, keywords: str, limit: int = 8) -> List[Tuple[float, sqlite3.Row]]:
        terms = [w for w in _WORD.findall(keywords.lower()) if len(w) > 2]
        if not terms:
            return []
        total = max(1, self.db.execute("SELECT count(*) AS n FROM sentences").fetchone()["n"])
        scored = []
        for row in self.db.execute("SELECT * FROM sentences").fetchall():
            present = set(_WORD.findall(row["text"].lower()))
            score = sum(math.log(1 + total / (1 + self.vocab[t])) for t in terms if t in present)
            if score > 0:
                scored.append((score, row))
        scored.sort(key=lambda pair: (pair[0], pair[1]["id"]), reverse=True)
        return scored[:limit]

    def read(self, query: Query) -> str:
        wants_number = query.is_quantity or bool(_QUANTITY_QUESTION.search(query.keywords))
        hits = self._keyword_rows(query.keywords)
        lines = []
        if wants_number and hits:
            ids = [row["id"] for _, row in hits]
            marks = ",".join("?" * len(ids))
            rows = self.db.execute(
                f"SELECT a.value, a.unit, a.currency, a.week, s.text, s.speaker, s.day, "
                f"row_number() OVER (PARTITION BY a.week ORDER BY s.id DESC) AS rn "
                f"FROM amounts a JOIN sentences s ON s.id = a.sentence_id WHERE s.id IN ({marks}) "
                f"ORDER BY s.id DESC", ids).fetchall()
            for row in rows[:8]:
                amount = Quantity(row["value"], row["unit"] or "", row["currency"] or "")
                who = f"{row['speaker']}: " if row["speaker"] else ""
                lines.append(f"* {amount} ({row['day'] or 'undated'}, week {row['week']}) - {who}{row['text']}")
            totals = self.db.execute(
                f"SELECT unit, sum(value) AS total, count(*) AS n FROM amounts WHERE sentence_id IN ({marks}) "
                f"GROUP BY unit ORDER BY n DESC", ids).fetchall()
            durations = [d for d in (as_days(Quantity(r["value"], r["unit"] or "")) for r in rows) if d]
            if len(durations) > 1:
                lines.append(f"Durations span {min(durations):g} to {max(durations):g} days")
            per_person = self.db.execute(
                f"SELECT s.speaker AS who, count(*) AS n, max(a.value) AS top FROM amounts a "
                f"JOIN sentences s ON s.id = a.sentence_id WHERE s.id IN ({marks}) AND s.speaker != '' "
                f"GROUP BY s.speaker ORDER BY n DESC", ids).fetchall()
            if per_person:
                lines.append("By person: " + ", ".join(f"{r['who']} ({r['n']}, max {r['top']:g})" for r in per_person))
            if totals:
                lines.append("Totals: " + "; ".join(f"{r['total']:g} {r['unit'] or 'units'} over {r['n']} mentions"
                                                    for r in totals))
        for score, row in hits[:6]:
            lines.append(f"- [{row['day'] or '?'}] {row['speaker'] or 'someone'}: {row['text']}")
        if not lines:
            recent = self.db.execute("SELECT * FROM sentences ORDER BY id DESC LIMIT 4").fetchall()
            lines = [f"- {r['text']}" for r in recent] or ["Nothing stored."]
        self.toolkit.logger.debug(f"read number={wants_number} hits={len(hits)}")
        return "\n".join(dict.fromkeys(lines))[:3000]

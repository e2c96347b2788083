"""A realistic evolved-style memory program (test fixture, not a seed).

Written the way LLM-evolved programs look: private helpers, counters, regex
tokeniser, sqlite with row_factory, Optional fields with default_factory,
augmented assignment on attributes and items, a helper class, a fallback path
around the toolkit LLM. The loader must accept all of it.
"""
import json
import re
import math
import hashlib
import sqlite3
from collections import Counter, defaultdict, deque, namedtuple
from dataclasses import dataclass, field
from datetime import datetime
from typing import Dict, List, Optional
import textwrap

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Extract the key facts from the conversation. Put each fact in its own sentence, "
    "name the people involved, and give the date if one is mentioned."
)
INSTRUCTION_QUERY = "Rewrite the question as keywords; name the person and the time period if any."
INSTRUCTION_RESPONSE = "Answer in one short sentence using only the retrieved memory."
ALWAYS_ON_KNOWLEDGE = "\n".join([
    "When dates are relative (yesterday, last week), resolve them against the session date.",
    "Prefer the most recent fact when two facts disagree.",
])

_STOPWORDS = frozenset("a an the of to in on at for and or is are was were be with by it this that".split())
_TOKEN_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_DATE_RE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")

Hit = namedtuple("Hit", ["score", "fact_id", "text"])


@dataclass
class KnowledgeItem:
    summary: str = field(default="", metadata={"description": "One-paragraph summary of the session"})
    facts: List[str] = field(default_factory=list, metadata={"description": "Atomic facts, one per entry"})
    people: list[str] = field(default_factory=list, metadata={"description": "Names of people mentioned"})
    session_date: Optional[str] = field(default=None, metadata={"description": "Session date as YYYY-MM-DD, if known"})
    importance: int = field(default=1, metadata={"description": "1 (trivial) to 5 (crucial)"})
    confidence: float = field(default=0.5, metadata={"description": "How sure the extraction is, 0..1"})
    is_update: bool = field(default=False, metadata={"description": "True when the text corrects an earlier fact"})


@dataclass
class Query:
    keywords: str = field(default="", metadata={"description": "Keywords to search for"})
    person: str | None = field(default=None, metadata={"description": "Person the question is about, if any"})
    top_k: int = field(default=5, metadata={"description": "How many facts to return"})


class _Index:
    """Inverted index with document frequencies, kept in plain dicts."""

    def __init__(self):
        self._postings = defaultdict(set)
        self._df = Counter()
        self.n_docs = 0

    def add(self, doc_id, tokens):
        self.n_docs += 1
        for tok in set(tokens):
            self._postings[tok].add(doc_id)
            self._df[tok] += 1

    def idf(self, tok):
        return math.log((1 + self.n_docs) / (1 + self._df[tok])) + 1.0

    def candidates(self, tokens):
        found = set()
        for tok in tokens:
            found |= self._postings.get(tok, set())
        return found

    def __len__(self):
        return self.n_docs


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self._db = toolkit.db
        self._db.row_factory = sqlite3.Row
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS facts (id INTEGER PRIMARY KEY, text TEXT, person TEXT, "
            "date TEXT, importance INTEGER, digest TEXT UNIQUE)")
        self._db.commit()
        self._index = _Index()
        self._tokens_by_id = {}
        self.n_writes = 0
        self.stats = {"duplicates": 0, "facts": 0}
        self._recent = deque(maxlen=20)
        self._person_counts = Counter()

    # ---------------------------------------------------------------- helpers
    @staticmethod
    def _tokenize(text):
        return [t for t in _TOKEN_RE.findall(text.lower()) if t not in _STOPWORDS]

    def _digest(self, text):
        return hashlib.sha1(text.strip().lower().encode("utf-8")).hexdigest()[:16]

    def _date_of(self, item, raw_text):
        if item.session_date:
            return item.session_date
        m = _DATE_RE.search(raw_text)
        if m:
            y, mo, d = m.groups()
            return f"{y}-{mo}-{d}"
        return None

    def _store_fact(self, text, person, date, importance):
        digest = self._digest(text)
        try:
            cur = self._db.execute(
                "INSERT INTO facts (text, person, date, importance, digest) VALUES (?, ?, ?, ?, ?)",
                (text, person, date, importance, digest))
        except sqlite3.IntegrityError:
            self.stats["duplicates"] += 1
            return None
        fact_id = cur.lastrowid
        tokens = self._tokenize(text)
        self._tokens_by_id[fact_id] = tokens
        self._index.add(fact_id, tokens)
        self.stats["facts"] += 1
        return fact_id

    # ---------------------------------------------------------------- contract
    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.n_writes += 1
        date = self._date_of(item, raw_text)
        people = [p.strip() for p in item.people if p and p.strip()]
        for p in people:
            self._person_counts[p.lower()] += 1
        facts = list(item.facts) or [s for s in re.split(r"(?<=[.!?])\s+", raw_text) if len(s) > 20][:10]
        person = people[0] if people else None
        for fact in facts:
            fact_id = self._store_fact(fact, person, date, max(1, min(5, item.importance)))
            if fact_id is not None:
                self._recent.append(fact_id)
        if item.summary:
            self._store_fact("Summary: " + item.summary, person, date, 1)
        self._db.commit()
        self.toolkit.logger.debug("write #{}: {} facts, date={}".format(self.n_writes, len(facts), date))

    def _score(self, fact_id, q_tokens, row):
        tokens = self._tokens_by_id.get(fact_id, [])
        tf = Counter(tokens)
        score = 0.0
        for tok in q_tokens:
            if tf[tok]:
                score += (1 + math.log(tf[tok])) * self._index.idf(tok)
        score *= 1.0 + 0.1 * (row["importance"] or 1)
        return score

    def read(self, query: Query) -> str:
        if len(self._index) == 0:
            return "No information stored."
        q_tokens = self._tokenize(query.keywords)
        if query.person:
            q_tokens += self._tokenize(query.person)
        hits = []
        for fact_id in self._index.candidates(q_tokens):
            row = self._db.execute("SELECT * FROM facts WHERE id = ?", (fact_id,)).fetchone()
            if row is None:
                continue
            score = self._score(fact_id, q_tokens, row)
            hits.append(Hit(score, fact_id, row["text"]))
        hits.sort(key=lambda h: (-h.score, h.fact_id))
        k = max(1, min(query.top_k or 5, 10))
        lines = []
        for i, hit in enumerate(hits[:k], start=1):
            row = self._db.execute("SELECT date, person FROM facts WHERE id = ?", (hit.fact_id,)).fetchone()
            when = f" ({row['date']})" if row["date"] else ""
            lines.append(f"{i}. {hit.text}{when}")
        if not lines:
            recent = list(self._recent)[-3:]
            lines = [self._db.execute("SELECT text FROM facts WHERE id = ?", (i,)).fetchone()["text"]
                     for i in recent]
        top_people = ", ".join(name for name, _ in self._person_counts.most_common(3))
        header = "Known people: %s" % top_people if top_people else ""
        body = "\n".join(lines)
        summary = ""
        if len(body) > 1500:
            try:
                summary = self.toolkit.llm_completion([
                    {"role": "user", "content": "Condense these facts:\n" + body[:6000]}])
            except Exception as exc:
                self.toolkit.logger.debug(f"llm failed: {type(exc).__name__}: {exc}")
        out = "\n".join(part for part in (header, summary or body) if part)
        meta = json.dumps({"hits": len(hits), "stats": self.stats, "at": datetime(2024, 1, 1).isoformat()})
        self.toolkit.logger.debug(meta)
        return textwrap.shorten(out, width=3000, placeholder=" ...") if len(out) > 3000 else out

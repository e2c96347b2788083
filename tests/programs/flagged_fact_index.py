"""Flagged fact index: facts in sqlite with typed flags, plus a chroma index for recall.

Written the way models write schemas once they go past plain strings: an Optional[bool] flag the
agent may leave out, line numbers as List[int], free-form attributes as Dict[str, Any], an
Optional[float] confidence, and a Query that carries a numeric-answer flag and filters.
"""
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Summarise what the speakers said. Set is_plan to true when someone talks about something "
    "they will do, false when it already happened, or leave it out when unsure. Put any other "
    "useful detail (topic, mood, amounts) into attributes."
)
INSTRUCTION_QUERY = (
    "Restate the question. Set need_numeric to true when the answer is a number or an amount. "
    "Name the person asked about, if any."
)
INSTRUCTION_RESPONSE = "Answer in a few words, using the facts below."
ALWAYS_ON_KNOWLEDGE = "Dates in the facts are the dates of the conversations."

_WORD = re.compile(r"[a-z0-9']+")
_NUMBER = re.compile(r"\$?\d+(?:[.,]\d+)?|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\b",
                     re.IGNORECASE)
_STOP = frozenset("the a an and or to of in on at for with is was were did do does what when where who how "
                  "many much after before about his her their my your i you he she it they we".split())


@dataclass
class KnowledgeItem:
    summary: str = field(default="", metadata={"description": "What was said, in one or two sentences"})
    speakers: List[str] = field(default_factory=list, metadata={"description": "Who spoke"})
    session_date: Optional[str] = field(default=None, metadata={"description": "Date of the conversation"})
    is_plan: Optional[bool] = field(default=None, metadata={"description": "True for future plans"})
    line_numbers: List[int] = field(default_factory=list, metadata={"description": "Lines the facts come from"})
    attributes: Dict[str, Any] = field(default_factory=dict, metadata={"description": "Other details"})
    confidence: Optional[float] = field(default=None, metadata={"description": "How sure the summary is, 0-1"})


@dataclass
class Query:
    question: str = field(default="", metadata={"description": "The question, restated"})
    need_numeric: Optional[bool] = field(default=None, metadata={"description": "True if the answer is a number"})
    person: Optional[str] = field(default=None, metadata={"description": "Person asked about"})
    filters: Dict[str, str] = field(default_factory=dict, metadata={"description": "Attribute filters"})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.db = toolkit.db
        self.logger = toolkit.logger
        self.db.execute(
            "CREATE TABLE facts (id TEXT PRIMARY KEY, speaker TEXT, day TEXT, text TEXT, "
            "is_plan INTEGER, confidence REAL, attrs TEXT)")
        self.db.commit()
        self.collection = toolkit.chroma.get_or_create_collection("flagged_facts")
        self._doc_freq: Counter = Counter()
        self._count = 0

    # -------------------------------------------------------------------- write
    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        day = item.session_date or self._date_in(raw_text)
        lines = [line.strip() for line in raw_text.splitlines() if line.strip()]
        wanted = set(item.line_numbers or [])
        stored = 0
        for number, line in enumerate(lines, 1):
            if wanted and number not in wanted and len(lines) > len(wanted) + 4:
                continue  # the agent pointed at some lines; keep those (and all of short texts)
            speaker, text = self._split_speaker(line)
            fact_id = hashlib.sha1(f"{day}|{speaker}|{text}".encode()).hexdigest()[:16]
            plan = None if item.is_plan is None else int(bool(item.is_plan))
            self.db.execute(
                "INSERT OR REPLACE INTO facts VALUES (?, ?, ?, ?, ?, ?, ?)",
                (fact_id, speaker, day, text, plan, item.confidence, json.dumps(item.attributes, default=str)))
            self.collection.upsert(ids=[fact_id], documents=[f"{speaker}: {text}"],
                                   metadatas=[{"speaker": speaker or "?", "day": day or ""}])
            self._doc_freq.update(set(self._words(text)))
            self._count += 1
            stored += 1
        self.db.commit()
        self.logger.debug(f"stored {stored} facts for {day}; plan={item.is_plan} attrs={sorted(item.attributes)}")

    # -------------------------------------------------------------------- read
    def read(self, query: Query) -> str:
        if not self._count:
            return "No facts stored yet."
        words = [w for w in self._words(query.question) if w not in _STOP]
        rows = self.db.execute("SELECT id, speaker, day, text, is_plan, attrs FROM facts").fetchall()
        scored = []
        for fact_id, speaker, day, text, is_plan, attrs in rows:
            score = self._score(words, text, speaker, query)
            if query.need_numeric and _NUMBER.search(text):
                score += 1.5  # a numeric question wants the lines that carry numbers
            if not self._passes(query.filters, attrs):
                continue
            if score > 0:
                scored.append((score, fact_id, speaker, day, text, is_plan))
        scored.sort(key=lambda row: (-row[0], row[1]))
        picked = scored[:6]
        if len(picked) < 3:  # few lexical hits: let the vector index add its nearest facts
            picked += self._semantic(query.question, {row[1] for row in picked})
        if self._asks_about_plans(words):
            # Plans first when the question is about the future; stable order otherwise.
            picked.sort(key=lambda row: 0 if row[5] == 1 else 1)
        self.logger.debug(f"read: {len(scored)} lexical hits, {len(picked)} shown, numeric={query.need_numeric}")
        out = []
        for _, _, speaker, day, text, is_plan in picked:
            tag = " (plan)" if is_plan == 1 else ""
            out.append(f"[{day or 'undated'}] {speaker}: {text}{tag}")
        if query.need_numeric:
            numbers = self._numbers_near(words, picked)
            if numbers:
                out.append("Numbers mentioned: " + ", ".join(numbers))
        topics = self._topics([row[1] for row in picked])
        if topics:
            out.append("Topics: " + ", ".join(topics))
        return "\n".join(out)[:3000] or "Nothing relevant found."

    @staticmethod
    def _asks_about_plans(words: List[str]) -> bool:
        return any(w in ("plan", "plans", "planning", "will", "going", "next", "future") for w in words)

    @staticmethod
    def _numbers_near(words: List[str], picked: list) -> List[str]:
        """Numbers in the shown facts, those in facts sharing more question words first."""
        ranked = []
        for row in picked:
            text = row[4]
            overlap = len(set(words) & set(_WORD.findall(text.lower())))
            for match in _NUMBER.finditer(text):
                ranked.append((-overlap, match.start(), match.group(0)))
        ranked.sort()
        seen: List[str] = []
        for _, _, number in ranked:
            if number.lower() not in (n.lower() for n in seen):
                seen.append(number)
        return seen[:5]

    def _topics(self, fact_ids: List[str]) -> List[str]:
        """The most common 'topic' attributes among the shown facts (what the agent tagged)."""
        if not fact_ids:
            return []
        marks = ",".join("?" for _ in fact_ids)
        rows = self.db.execute(f"SELECT attrs FROM facts WHERE id IN ({marks})", tuple(fact_ids)).fetchall()
        counts: Counter = Counter()
        for (attrs_json,) in rows:
            try:
                topic = json.loads(attrs_json or "{}").get("topic")
            except (ValueError, AttributeError):
                continue
            if isinstance(topic, str) and topic.strip():
                counts[topic.strip().lower()] += 1
        return [topic for topic, _ in counts.most_common(3)]

    def _semantic(self, question: str, seen: set) -> list:
        found = self.collection.query(query_texts=[question], n_results=min(4, self._count))
        extra = []
        for fact_id, meta, doc in zip(found["ids"][0], found["metadatas"][0], found["documents"][0]):
            if fact_id in seen:
                continue
            speaker, text = self._split_speaker(doc)
            extra.append((0.0, fact_id, meta.get("speaker") or speaker, meta.get("day"), text, None))
        return extra

    def _score(self, words: List[str], text: str, speaker: Optional[str], query: Query) -> float:
        text_words = Counter(self._words(text))
        score = 0.0
        for word in words:
            if word in text_words:
                rarity = (self._count + 1) / (self._doc_freq[word] + 1)
                score += 1.0 + min(rarity, 5.0) / 5.0
        if query.person and speaker and query.person.lower() == speaker.lower():
            score += 0.75
        return score

    @staticmethod
    def _passes(filters: Dict[str, str], attrs_json: str) -> bool:
        if not filters:
            return True
        try:
            attrs = json.loads(attrs_json or "{}")
        except ValueError:
            return True
        return all(str(attrs.get(key, value)).lower() == str(value).lower() for key, value in filters.items())

    @staticmethod
    def _words(text: str) -> List[str]:
        return _WORD.findall(text.lower())

    @staticmethod
    def _split_speaker(line: str) -> tuple:
        line = re.sub(r"^\[[^\]]*\]\s*", "", line)
        if ": " in line:
            speaker, text = line.split(": ", 1)
            if len(speaker) <= 30:
                return speaker.strip(), text.strip()
        return "", line

    @staticmethod
    def _date_in(raw_text: str) -> Optional[str]:
        match = re.search(r"\d{4}-\d{2}-\d{2}", raw_text)
        return match.group(0) if match else None

"""
Episodic memory with write-time summarisation.

write():  one toolkit LLM call turns the session into a JSON record
          {"summary": ..., "facts": [...], "keywords": [...]}; if the call fails or the reply is
          not JSON, an extractive summary (top sentences by TF-IDF weight) is used instead.
read():   sessions are ranked by keyword overlap + fact overlap, the best ones are printed with
          their date, summary and the facts that match the query.
"""

import json
import math
import re
import sqlite3
import textwrap
from collections import Counter
from dataclasses import dataclass, field, asdict
from datetime import datetime
from typing import Dict, List, Optional, Tuple


INSTRUCTION_KNOWLEDGE_ITEM = "Give the date of the session (YYYY-MM-DD) and a one-line title."
INSTRUCTION_QUERY = "Copy the question and list its key terms."
INSTRUCTION_RESPONSE = "Answer in a few words, using the session summaries and facts."
ALWAYS_ON_KNOWLEDGE = (
    "Each memory entry is one conversation session: a dated title, a summary and its facts."
)


class Config:
    MAX_SESSIONS_SHOWN = 4
    MAX_FACTS_SHOWN = 5
    SUMMARY_SENTENCES = 3
    LLM_TEXT_LIMIT = 6000
    WRAP = 100


@dataclass
class KnowledgeItem:
    date: str = field(default="", metadata={"description": "Session date as YYYY-MM-DD, or empty"})
    title: str = field(default="", metadata={"description": "One-line title of the session"})


@dataclass
class Query:
    question: str = field(default="", metadata={"description": "The question, copied"})
    key_terms: List[str] = field(default_factory=list, metadata={"description": "Key terms of the question"})


@dataclass
class Episode:
    episode_id: int
    date: Optional[str]
    title: str
    summary: str
    facts: List[str] = field(default_factory=list)
    keywords: List[str] = field(default_factory=list)

    def to_row(self) -> Tuple:
        return (self.episode_id, self.date, self.title, self.summary,
                json.dumps(self.facts, ensure_ascii=False), json.dumps(self.keywords, ensure_ascii=False))


TOKEN = re.compile(r"[a-zA-Z0-9]+")
SENT = re.compile(r"(?<=[.!?])\s+|\n+")
JSON_BLOCK = re.compile(r"\{.*\}", re.S)
STOP = set("a an the and or to of in on at for is are was were be been it that this with as by "
           "from i you we they he she my your our his her their me us them so do did".split())


def words(text: str) -> List[str]:
    return [w.lower() for w in TOKEN.findall(text or "") if w.lower() not in STOP and len(w) > 1]


def normalise_date(value: str) -> Optional[str]:
    value = (value or "").strip()
    for fmt in ("%Y-%m-%d", "%d %B %Y", "%B %d, %Y", "%Y/%m/%d"):
        try:
            return datetime.strptime(value, fmt).date().isoformat()
        except ValueError:
            pass
    match = re.search(r"\d{4}-\d{2}-\d{2}", value)
    return match.group(0) if match else None


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.conn = toolkit.db
        self.conn.row_factory = sqlite3.Row
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS episodes (id INTEGER PRIMARY KEY, date TEXT, title TEXT, "
            "summary TEXT, facts TEXT, keywords TEXT)")
        self.conn.execute("CREATE TABLE IF NOT EXISTS df (term TEXT PRIMARY KEY, n INTEGER)")
        self.conn.commit()
        self.count = 0
        self.llm_failures = 0

    # ---------------------------------------------------------------- summarisation
    def _document_frequency(self, terms: List[str]) -> Dict[str, int]:
        if not terms:
            return {}
        marks = ",".join("?" for _ in terms)
        rows = self.conn.execute(f"SELECT term, n FROM df WHERE term IN ({marks})", terms).fetchall()
        return {row["term"]: row["n"] for row in rows}

    def _extractive(self, text: str) -> Tuple[str, List[str], List[str]]:
        sentences = [s.strip() for s in SENT.split(text) if len(s.strip()) > 12]
        if not sentences:
            return text.strip()[:300], [], words(text)[:8]
        tf = Counter(words(text))
        df = self._document_frequency(list(tf))
        n = self.count + 1

        def weight(sentence: str) -> float:
            ws = words(sentence)
            if not ws:
                return 0.0
            return sum(tf[w] * math.log((n + 1) / (1 + df.get(w, 0))) for w in ws) / math.sqrt(len(ws))

        ranked = sorted(range(len(sentences)), key=lambda i: weight(sentences[i]), reverse=True)
        chosen = sorted(ranked[:Config.SUMMARY_SENTENCES])
        summary = " ".join(sentences[i] for i in chosen)
        keywords = [w for w, _ in tf.most_common(10)]
        return summary, sentences[:12], keywords

    def _llm_record(self, text: str) -> Optional[dict]:
        prompt = (
            "Summarise this conversation for a long-term memory. Reply with JSON only: "
            '{"summary": "...", "facts": ["..."], "keywords": ["..."]}\n\n' + text[:Config.LLM_TEXT_LIMIT]
        )
        try:
            reply = self.toolkit.llm_completion([
                {"role": "system", "content": "You write compact, factual JSON."},
                {"role": "user", "content": prompt},
            ])
        except Exception as exc:
            self.llm_failures += 1
            self.toolkit.logger.debug(f"summary call failed ({self.llm_failures}): {exc}")
            return None
        match = JSON_BLOCK.search(reply or "")
        if not match:
            self.toolkit.logger.debug("summary reply had no JSON object")
            return None
        try:
            data = json.loads(match.group(0))
        except json.JSONDecodeError as exc:
            self.toolkit.logger.debug(f"bad JSON from the summariser: {exc.msg}")
            return None
        if not isinstance(data, dict) or not isinstance(data.get("summary"), str):
            return None
        data["facts"] = [f for f in data.get("facts", []) if isinstance(f, str)][:15]
        data["keywords"] = [k.lower() for k in data.get("keywords", []) if isinstance(k, str)][:15]
        return data

    # ---------------------------------------------------------------- contract
    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.count += 1
        record = self._llm_record(raw_text)
        if record is None:
            summary, facts, keywords = self._extractive(raw_text)
        else:
            summary, facts, keywords = record["summary"], record["facts"], record["keywords"]
            keywords = list(dict.fromkeys(keywords + words(summary)))[:20]
        episode = Episode(self.count, normalise_date(item.date) or normalise_date(raw_text[:20]),
                          item.title.strip() or summary[:60], summary, facts, keywords)
        self.conn.execute("INSERT INTO episodes VALUES (?, ?, ?, ?, ?, ?)", episode.to_row())
        for term in set(words(raw_text)):
            self.conn.execute(
                "INSERT INTO df (term, n) VALUES (?, 1) ON CONFLICT(term) DO UPDATE SET n = n + 1", (term,))
        self.conn.commit()
        self.toolkit.logger.debug(json.dumps(asdict(episode), ensure_ascii=False)[:400])

    def _rank(self, terms: List[str]) -> List[Tuple[float, sqlite3.Row]]:
        rows = self.conn.execute("SELECT * FROM episodes ORDER BY id").fetchall()
        term_set = set(terms)
        scored = []
        for row in rows:
            keywords = set(json.loads(row["keywords"] or "[]"))
            body = set(words(row["summary"] + " " + " ".join(json.loads(row["facts"] or "[]"))))
            score = 2.0 * len(term_set & keywords) + len(term_set & body)
            if score > 0:
                scored.append((score + row["id"] * 1e-3, row))
        scored.sort(key=lambda pair: pair[0], reverse=True)
        return scored

    def read(self, query: Query) -> str:
        terms = words(" ".join(query.key_terms) + " " + query.question)
        ranked = self._rank(terms)
        if not ranked:
            latest = self.conn.execute("SELECT * FROM episodes ORDER BY id DESC LIMIT 2").fetchall()
            ranked = [(0.0, row) for row in latest]
        if not ranked:
            return "No sessions stored."
        blocks = []
        for score, row in ranked[:Config.MAX_SESSIONS_SHOWN]:
            facts = json.loads(row["facts"] or "[]")
            matching = [f for f in facts if set(words(f)) & set(terms)] or facts
            head = "Session {} ({}) - {}".format(row["id"], row["date"] or "undated", row["title"])
            body = textwrap.fill(row["summary"], width=Config.WRAP)
            bullets = "\n".join("  - " + textwrap.shorten(f, 160) for f in matching[:Config.MAX_FACTS_SHOWN])
            blocks.append(f"{head} [score {score:.1f}]\n{body}\n{bullets}".rstrip())
        self.toolkit.logger.debug(f"read terms={terms[:6]} sessions={len(ranked)}")
        return "\n\n".join(blocks)[:3000]

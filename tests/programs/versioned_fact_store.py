"""Versioned atomic-fact store with contradiction handling.

Facts are normalised (lower-case, punctuation stripped) and hashed for deduplication. A new
fact that updates an older one about the same subject and attribute ("moved to", "no longer",
"now works at") marks the old one as superseded instead of deleting it, so questions about
the past and the present can both be answered. Similarity is a TF-IDF cosine computed in pure
Python (numpy is used when the sandbox offers it).
"""
import hashlib
import json
import math
import re
import sqlite3
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

try:
    import numpy as np
except ImportError:  # the sandbox may not offer numpy; the pure-Python path is used then
    np = None

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Write every fact from the text as a short atomic sentence with one subject and one claim. "
    "Mark facts that correct or update an earlier state (moved, changed jobs, no longer) by "
    "starting them with 'UPDATE:'."
)
INSTRUCTION_QUERY = "State what is asked as a short sentence; say whether the question is about the past."
INSTRUCTION_RESPONSE = "Use current facts unless the question asks about the past; then use earlier ones."
ALWAYS_ON_KNOWLEDGE = "Facts marked (superseded) were true earlier and have since changed."

UPDATE_MARKERS = ("update:", "no longer", "moved to", "now works", "switched to", "changed", "quit")
PUNCT = re.compile(r"[^\w\s]")
TOKEN = re.compile(r"\w+")
SUBJECT = re.compile(r"^(?:update:\s*)?([A-Z][\w']+)")
STOPWORDS = frozenset("the a an of to in on at and or is was were are be has have had for with by "
                      "it its this that as from her his their they he she".split())


@dataclass
class KnowledgeItem:
    facts: list[str] = field(default_factory=list, metadata={
        "description": "Atomic fact sentences; updates start with 'UPDATE:'"})
    source_date: Optional[str] = field(default=None, metadata={"description": "Date of the text, YYYY-MM-DD"})


@dataclass
class Query:
    ask: str = field(default="", metadata={"description": "What is asked, as a short sentence"})
    about_past: bool = field(default=False, metadata={"description": "True if the question is about an earlier state"})
    limit: int = field(default=8, metadata={"description": "How many facts to return"})


class Cosine:
    """Callable similarity between sparse TF-IDF vectors (dicts)."""

    def __init__(self, use_numpy: bool):
        self.use_numpy = use_numpy
        self.calls = 0

    def __call__(self, a: Dict[str, float], b: Dict[str, float]) -> float:
        self.calls += 1
        if not a or not b:
            return 0.0
        if self.use_numpy:
            keys = sorted(set(a) | set(b))
            va = np.array([a.get(k, 0.0) for k in keys])
            vb = np.array([b.get(k, 0.0) for k in keys])
            denom = float(np.linalg.norm(va) * np.linalg.norm(vb))
            return float(va @ vb) / denom if denom else 0.0
        dot = sum(w * b.get(t, 0.0) for t, w in a.items())
        na = math.sqrt(sum(w * w for w in a.values()))
        nb = math.sqrt(sum(w * w for w in b.values()))
        return dot / (na * nb) if na and nb else 0.0


class LRU(OrderedDict):
    """Tiny LRU cache for query results (invalidated on every write)."""

    def __init__(self, capacity: int = 64):
        super().__init__()
        self.capacity = capacity

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.capacity:
            self.popitem(last=False)


def normalise(text: str) -> str:
    return " ".join(PUNCT.sub(" ", text.lower()).split())


def terms(text: str) -> List[str]:
    return [t for t in TOKEN.findall(text.lower()) if t not in STOPWORDS and not t.isdigit()]


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.db = toolkit.db
        self.db.row_factory = sqlite3.Row
        self.db.execute("""CREATE TABLE IF NOT EXISTS facts (
            id INTEGER PRIMARY KEY, text TEXT NOT NULL, norm_hash TEXT UNIQUE, subject TEXT,
            source_date TEXT, superseded_by INTEGER, created INTEGER)""")
        self.db.execute("CREATE INDEX IF NOT EXISTS facts_subject ON facts(subject)")
        self.df: Counter = Counter()
        self.vectors: Dict[int, Dict[str, float]] = {}
        self.cosine = Cosine(use_numpy=np is not None)
        self.cache = LRU()
        self.clock = 0
        self.stats = {"added": 0, "duplicates": 0, "superseded": 0}
        toolkit.logger.debug(f"numpy available: {np is not None}")

    # ------------------------------------------------------------------ vectors
    def _vector(self, text: str) -> Dict[str, float]:
        counts = Counter(terms(text))
        n_docs = max(1, len(self.vectors))
        return {t: (1 + math.log(c)) * math.log((n_docs + 1) / (1 + self.df[t])) + 1e-6
                for t, c in counts.items()}

    def _subject(self, text: str) -> Optional[str]:
        m = SUBJECT.match(text.strip())
        return m.group(1).lower() if m else None

    def _is_update(self, text: str) -> bool:
        lowered = text.lower()
        return any(marker in lowered for marker in UPDATE_MARKERS)

    def _supersede(self, new_id: int, subject: Optional[str], vector: Dict[str, float]) -> int:
        if not subject:
            return 0
        rows = self.db.execute(
            "SELECT id FROM facts WHERE subject = ? AND superseded_by IS NULL AND id != ?",
            (subject, new_id)).fetchall()
        best: Tuple[float, Optional[int]] = (0.0, None)
        for row in rows:
            sim = self.cosine(vector, self.vectors.get(row["id"], {}))
            if sim > best[0]:
                best = (sim, row["id"])
        if best[1] is not None and best[0] >= 0.15:
            self.db.execute("UPDATE facts SET superseded_by = ? WHERE id = ?", (new_id, best[1]))
            self.toolkit.logger.debug(f"fact {best[1]} superseded by {new_id} (sim {best[0]:.2f})")
            return 1
        return 0

    # ------------------------------------------------------------------ contract
    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.clock += 1
        facts = [f.strip() for f in item.facts if f and f.strip()]
        if not facts:
            facts = [s.strip() for s in re.split(r"(?<=[.!?])\s+", raw_text) if len(s.split()) >= 4]
        for fact in facts:
            clean = fact[len("UPDATE:"):].strip() if fact.upper().startswith("UPDATE:") else fact
            digest = hashlib.sha256(normalise(clean).encode("utf-8")).hexdigest()
            subject = self._subject(fact)
            try:
                cur = self.db.execute(
                    "INSERT INTO facts (text, norm_hash, subject, source_date, created) VALUES (?, ?, ?, ?, ?)",
                    (clean, digest, subject, item.source_date, self.clock))
            except sqlite3.IntegrityError:
                self.stats["duplicates"] += 1
                continue
            fact_id = cur.lastrowid
            for t in set(terms(clean)):
                self.df[t] += 1
            vector = self._vector(clean)
            self.vectors[fact_id] = vector
            self.stats["added"] += 1
            if self._is_update(fact):
                self.stats["superseded"] += self._supersede(fact_id, subject, vector)
        self.db.commit()
        self.cache.clear()
        self.toolkit.logger.debug("write %d: %s" % (self.clock, json.dumps(self.stats)))

    def read(self, query: Query) -> str:
        key = (query.ask.strip().lower(), bool(query.about_past), int(query.limit or 8))
        if key in self.cache:
            return self.cache[key]
        if not self.vectors:
            return "No facts stored yet."
        q_vec = self._vector(query.ask)
        rows = {row["id"]: row for row in self.db.execute("SELECT * FROM facts").fetchall()}
        scored = []
        for fact_id, vec in self.vectors.items():
            row = rows.get(fact_id)
            if row is None:
                continue
            sim = self.cosine(q_vec, vec)
            if row["superseded_by"] is not None and not query.about_past:
                sim *= 0.5
            elif row["superseded_by"] is None and query.about_past:
                sim *= 0.9
            if sim > 0:
                scored.append((sim, fact_id, row))
        scored.sort(key=lambda t: (t[0], t[1]), reverse=True)
        limit = max(1, min(int(query.limit or 8), 20))
        lines = []
        for sim, fact_id, row in scored[:limit]:
            flags = " (superseded)" if row["superseded_by"] is not None else ""
            dated = f" [{row['source_date']}]" if row["source_date"] else ""
            lines.append(f"- {row['text']}{dated}{flags}  <{sim:.2f}>")
        if not lines:
            recent = sorted(rows.values(), key=lambda r: r["created"], reverse=True)[:limit]
            lines = [f"- {r['text']}" for r in recent]
        out = "\n".join(lines)[:3000]
        self.cache[key] = out
        self.toolkit.logger.debug(f"read: {len(scored)} scored, cosine calls so far {self.cosine.calls}")
        return out

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Optional

# Notes memory with read-time compression.
#
# write: store every extracted note in sqlite (+ chroma for semantic recall), deduplicated by
#        a content hash; notes carry tags and an importance score.
# read:  recall ~20 candidate notes (semantic + tag match), then spend the single toolkit LLM
#        call on compressing them into a short brief focused on the query. If the call fails
#        or returns junk, fall back to the top notes verbatim.

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Extract self-contained notes from the text. Each note should make sense on its own and "
    "include who, what and when. Add a few lowercase tags (topics) and rate importance 1-5."
)
INSTRUCTION_QUERY = "Describe the information needed to answer the question and give 1-3 lowercase tags."
INSTRUCTION_RESPONSE = "Answer from the brief. Be concise; give names and dates exactly as written."
ALWAYS_ON_KNOWLEDGE = ""

MAX_CANDIDATES = 20
MAX_NOTES = 400
TAG_SYNONYMS = {"work": "job", "career": "job", "kids": "family", "children": "family",
                "painting": "art", "hobbies": "hobby", "trip": "travel", "vacation": "travel"}
BRIEF_CHARS = 1800
_SPACE = re.compile(r"\s+")
_TAG = re.compile(r"[a-z][a-z0-9_-]{1,24}")


@dataclass
class KnowledgeItem:
    notes: list[str] = field(default_factory=list, metadata={"description": "Self-contained notes (who, what, when)"})
    tags: list[str] = field(default_factory=list, metadata={"description": "A few lowercase topic tags"})
    importance: int = field(default=3, metadata={"description": "Importance from 1 (minor) to 5 (critical)"})


@dataclass
class Query:
    need: str = field(default="", metadata={"description": "The information needed to answer"})
    tags: list[str] = field(default_factory=list, metadata={"description": "1-3 lowercase tags"})


@dataclass
class Note:
    text: str
    tags: list[str] = field(default_factory=list)
    importance: int = 3
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    note_id: Optional[int] = None
    digest: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.text = _SPACE.sub(" ", self.text).strip()
        self.tags = sorted({t for t in (x.lower().strip() for x in self.tags) if _TAG.fullmatch(t)})
        self.importance = max(1, min(5, int(self.importance or 3)))
        self.digest = hashlib.sha256(self.text.lower().encode("utf-8")).hexdigest()[:20]

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> Note:
        note = cls(row["text"], json.loads(row["tags"] or "[]"), row["importance"], row["created"], row["id"])
        return note

    def render(self) -> str:
        tag_text = f" #{' #'.join(self.tags)}" if self.tags else ""
        return f"- {self.text}{tag_text}"


class KnowledgeBase:
    def __init__(self, toolkit: Any) -> None:
        self.toolkit = toolkit
        self.logger = toolkit.logger
        self.db = toolkit.db
        self.db.row_factory = sqlite3.Row
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, text TEXT, tags TEXT, "
            "importance INTEGER, created TEXT, digest TEXT UNIQUE)")
        self.vectors = toolkit.chroma.get_or_create_collection("notes_semantic")
        self.tag_counts: Counter[str] = Counter()
        self.total = 0

    @staticmethod
    def _canonical_tags(tags: list[str]) -> list[str]:
        return [TAG_SYNONYMS.get(t.lower().strip(), t.lower().strip()) for t in tags if t and t.strip()]

    def _forget(self) -> int:
        """Past MAX_NOTES, drop the least important, oldest notes (sqlite and chroma)."""
        excess = self.total - MAX_NOTES
        if excess <= 0:
            return 0
        rows = self.db.execute("SELECT id FROM notes ORDER BY importance ASC, id ASC LIMIT ?", (excess,)).fetchall()
        ids = [row["id"] for row in rows]
        if ids:
            self.db.executemany("DELETE FROM notes WHERE id = ?", [(i,) for i in ids])
            self.vectors.delete(ids=[str(i) for i in ids])
            self.total -= len(ids)
            self.logger.debug(f"forgot {len(ids)} low-importance notes")
        return len(ids)

    # ----------------------------------------------------------------------- write
    def _notes_from(self, item: KnowledgeItem, raw_text: str) -> list[Note]:
        texts = [n for n in item.notes if isinstance(n, str) and len(n.strip()) > 3]
        if not texts:
            texts = [s for s in re.split(r"(?<=[.!?])\s+|\n", raw_text) if len(s.split()) >= 5][:10]
        return [Note(t, self._canonical_tags(list(item.tags)), item.importance) for t in texts]

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        new_ids: list[str] = []
        new_docs: list[str] = []
        new_meta: list[dict] = []
        for note in self._notes_from(item, raw_text):
            try:
                cur = self.db.execute(
                    "INSERT INTO notes (text, tags, importance, created, digest) VALUES (?, ?, ?, ?, ?)",
                    (note.text, json.dumps(note.tags), note.importance, note.created, note.digest))
            except sqlite3.IntegrityError:
                self.logger.debug(f"duplicate note {note.digest[:8]}")
                continue
            note.note_id = cur.lastrowid
            self.tag_counts.update(note.tags)
            new_ids.append(str(note.note_id))
            new_docs.append(note.text)
            new_meta.append({"importance": note.importance, "tags": ",".join(note.tags) or "none"})
        if new_ids:
            self.vectors.add(ids=new_ids, documents=new_docs, metadatas=new_meta)
        self.db.commit()
        self.total += len(new_ids)
        self._forget()
        self.logger.debug(f"stored {len(new_ids)} notes; total={self.total}; top tags={self.tag_counts.most_common(3)}")

    # ----------------------------------------------------------------------- read
    def _candidates(self, query: Query) -> list[Note]:
        scores: dict[int, float] = {}
        if self.total:
            res = self.vectors.query(query_texts=[query.need or " ".join(query.tags) or "notes"],
                                     n_results=min(MAX_CANDIDATES, self.total),
                                     include=["distances", "metadatas"])
            for rank, (nid, dist) in enumerate(zip(res["ids"][0], res["distances"][0])):
                scores[int(nid)] = (1.0 - dist) + 1.0 / (rank + 2)
        wanted = self._canonical_tags(list(query.tags))
        for tag in wanted:
            rows = self.db.execute("SELECT id FROM notes WHERE tags LIKE ? LIMIT 20", (f'%"{tag}"%',)).fetchall()
            for row in rows:
                scores[row["id"]] = scores.get(row["id"], 0.0) + 0.5
        if not scores:
            return []
        marks = ",".join("?" for _ in scores)
        rows = self.db.execute(f"SELECT * FROM notes WHERE id IN ({marks})", list(scores)).fetchall()
        notes = [Note.from_row(r) for r in rows]
        notes.sort(key=lambda n: scores.get(n.note_id or 0, 0.0) * (0.8 + 0.1 * n.importance), reverse=True)
        return notes[:MAX_CANDIDATES]

    def _compress(self, need: str, notes: list[Note]) -> Optional[str]:
        listing = "\n".join(n.render() for n in notes)
        messages = [
            {"role": "system", "content": "You condense memory notes. Keep names, numbers and dates verbatim."},
            {"role": "user", "content": f"Question focus: {need}\n\nNotes:\n{listing}\n\n"
                                        f"Write a brief of at most {BRIEF_CHARS} characters with only "
                                        "the notes relevant to the focus. Plain text."},
        ]
        try:
            brief = self.toolkit.llm_completion(messages)
        except Exception as exc:  # noqa: BLE001 - any failure means: use the fallback
            self.logger.debug(f"compression failed: {type(exc).__name__}: {exc}")
            return None
        if not isinstance(brief, str) or len(brief.strip()) < 10:
            return None
        return textwrap.shorten(brief.strip(), width=BRIEF_CHARS, placeholder=" ...")

    def _browse_tags(self) -> str:
        """No focus at all: list the topics we know, with their most important note."""
        lines = []
        for tag, count in self.tag_counts.most_common(8):
            row = self.db.execute("SELECT * FROM notes WHERE tags LIKE ? ORDER BY importance DESC, id DESC "
                                  "LIMIT 1", (f'%"{tag}"%',)).fetchone()
            if row is not None:
                lines.append(f"#{tag} ({count}): {row['text']}")
        return "\n".join(lines) or "No notes yet."

    def read(self, query: Query) -> str:
        if not query.need.strip() and not any(t.strip() for t in query.tags):
            return self._browse_tags()[:3000]
        notes = self._candidates(query)
        if not notes:
            return "No notes yet."
        if (brief := self._compress(query.need, notes)) is not None:
            self.logger.debug(f"brief of {len(brief)} chars from {len(notes)} notes")
            top = "\n".join(n.render() for n in notes[:3])
            return f"{brief}\n\nTop notes:\n{top}"[:3000]
        lines, used = [], 0
        for note in notes:
            line = note.render()
            if used + len(line) > 2900:
                break
            lines.append(line)
            used += len(line) + 1
        self.logger.debug(f"fallback: {len(lines)} notes verbatim")
        return "\n".join(lines)

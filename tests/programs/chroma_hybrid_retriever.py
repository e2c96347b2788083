from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Dict, List, Optional, Tuple

# --------------------------------------------------------------------------------------
# Hybrid retrieval memory: dense (chroma) + sparse (token overlap) + recency.
# Iteration notes:
#   v3: chunk long texts so a single chunk does not dilute the embedding
#   v4: metadata filter on speaker when the query names a person
#   v5: one LLM call per read to expand the query (fallback: the raw keywords)
# --------------------------------------------------------------------------------------

INSTRUCTION_KNOWLEDGE_ITEM = """Summarise the session in 2-4 sentences, keeping names, places,
numbers and dates. List the speakers. If the session mentions a date, give it as YYYY-MM-DD."""

INSTRUCTION_QUERY = """Write a search query that contains the important nouns of the question.
Put the person the question is about in `speaker` (exact name) and leave it empty otherwise."""

INSTRUCTION_RESPONSE = """Answer using only the retrieved memory. Prefer the most specific fact.
If the memory does not contain the answer, say you do not know."""

ALWAYS_ON_KNOWLEDGE = ""

CHUNK_WORDS = 60
TOP_K = 6
DENSE_WEIGHT = 0.6
SPARSE_WEIGHT = 0.3
RECENCY_WEIGHT = 0.1

_token_re = re.compile(r"\w+", re.UNICODE)
_date_re = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_STOPWORDS = {
    "a", "an", "the", "and", "or", "of", "to", "in", "on", "at", "for", "with", "is", "was",
    "are", "were", "be", "it", "that", "this", "i", "you", "he", "she", "they", "we", "what",
    "when", "where", "who", "how", "did", "do", "does", "has", "have", "had", "my", "her", "his",
}


@dataclass
class KnowledgeItem:
    summary: str = field(default="", metadata={"description": "2-4 sentence summary of the session"})
    speakers: List[str] = field(default_factory=list, metadata={"description": "Names of the speakers"})
    date: Optional[str] = field(default=None, metadata={"description": "Session date YYYY-MM-DD if known"})
    salience: float = field(default=0.5, metadata={"description": "How important the session is, 0..1"})


@dataclass
class Query:
    query: str = field(default="", metadata={"description": "Search query with the important nouns"})
    speaker: str = field(default="", metadata={"description": "Exact name of the person asked about, or empty"})
    top_k: int = field(default=TOP_K, metadata={"description": "Number of snippets to retrieve"})


@dataclass(frozen=True, order=True)
class Candidate:
    score: float
    chunk_id: str = field(compare=False)
    text: str = field(compare=False, default="")
    speaker: str = field(compare=False, default="")
    when: str = field(compare=False, default="")


def tokenize(text: str) -> List[str]:
    return [t.lower() for t in _token_re.findall(text or "") if t.lower() not in _STOPWORDS]


def to_ordinal(text: Optional[str]) -> int:
    """YYYY-MM-DD anywhere in the text -> proleptic ordinal; 0 when absent or invalid."""
    if not text:
        return 0
    match = _date_re.search(text)
    if not match:
        return 0
    try:
        return date(*map(int, match.groups())).toordinal()
    except ValueError:
        return 0


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.log = toolkit.logger
        self.collection = toolkit.chroma.get_or_create_collection(
            name="session_chunks", metadata={"hnsw:space": "cosine"})
        self.token_index: Dict[str, Counter] = {}
        self.seen_digests: set = set()
        self.latest_ordinal = 0
        self.n_chunks = 0
        self.speakers: Counter = Counter()

    # ---------------------------------------------------------------- properties
    @property
    def size(self) -> int:
        return self.n_chunks

    @staticmethod
    def _digest(text: str) -> str:
        return hashlib.md5(" ".join(text.lower().split()).encode("utf-8")).hexdigest()

    @classmethod
    def _chunks(cls, text: str, size: int = CHUNK_WORDS) -> List[str]:
        words = text.split()
        if len(words) <= size:
            return [text.strip()] if text.strip() else []
        step = max(1, size - size // 4)  # 25% overlap
        return [" ".join(words[i:i + size]) for i in range(0, len(words), step) if words[i:i + size]]

    # ---------------------------------------------------------------- write
    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        when = item.date or ""
        ordinal = to_ordinal(when) or to_ordinal(raw_text)
        if ordinal:
            self.latest_ordinal = max(self.latest_ordinal, ordinal)
            when = date.fromordinal(ordinal).isoformat()
        speakers = [s.strip() for s in item.speakers if isinstance(s, str) and s.strip()]
        self.speakers.update(speakers)
        texts = self._chunks(item.summary) + self._chunks(raw_text)
        ids, docs, metas = [], [], []
        for text in texts:
            digest = self._digest(text)
            if digest in self.seen_digests:
                self.log.debug(f"skip duplicate chunk {digest[:8]}")
                continue
            self.seen_digests.add(digest)
            lowered = text.lower()
            speaker = next((s for s in speakers if s.lower() in lowered), speakers[0] if speakers else "")
            chunk_id = f"c{self.n_chunks:05d}"
            self.n_chunks += 1
            ids.append(chunk_id)
            docs.append(text)
            metas.append({"speaker": speaker, "date_ord": ordinal, "date": when,
                          "salience": float(max(0.0, min(1.0, item.salience)))})
            self.token_index[chunk_id] = Counter(tokenize(text))
        if ids:
            self.collection.add(ids=ids, documents=docs, metadatas=metas)
        self.log.debug(json.dumps({"added": len(ids), "date": when, "speakers": speakers}, ensure_ascii=False))

    # ---------------------------------------------------------------- read helpers
    def _expand(self, query: Query) -> str:
        """One LLM call: add synonyms / related terms. Falls back to the plain query."""
        prompt = (
            "Give up to 8 search keywords (comma separated, no explanation) for finding the "
            f"answer to this memory query: {query.query!r}"
        )
        try:
            reply = self.toolkit.llm_completion([{"role": "user", "content": prompt}])
        except Exception as exc:  # budget, provider error
            self.log.debug(f"expansion skipped: {type(exc).__name__}")
            return query.query
        extra = [w.strip() for w in re.split(r"[,\n]", reply or "") if 0 < len(w.strip()) < 30]
        return " ".join([query.query] + extra[:8])

    def _sparse(self, chunk_id: str, q_tokens: List[str]) -> float:
        counts = self.token_index.get(chunk_id)
        if not counts or not q_tokens:
            return 0.0
        overlap = sum(min(counts[t], 2) for t in set(q_tokens))
        return overlap / (len(set(q_tokens)) * 2)

    def _recency(self, ordinal: int) -> float:
        if not ordinal or not self.latest_ordinal:
            return 0.0
        age_days = max(0, self.latest_ordinal - ordinal)
        return math.exp(-age_days / 120.0)

    def _where(self, query: Query) -> Optional[Dict[str, Any]]:
        speaker = (query.speaker or "").strip()
        if speaker and speaker in self.speakers:
            return {"speaker": {"$eq": speaker}}
        return None

    def _dense(self, text: str, k: int, where: Optional[Dict[str, Any]]) -> List[Tuple[str, float, str, dict]]:
        n = min(k * 3, self.n_chunks)
        if n <= 0:
            return []
        result = self.collection.query(query_texts=[text], n_results=n, where=where,
                                       include=["documents", "metadatas", "distances"])
        ids = (result.get("ids") or [[]])[0]
        rows = zip(ids, result["distances"][0], result["documents"][0], result["metadatas"][0])
        return [(cid, 1.0 - float(dist), doc, meta or {}) for cid, dist, doc, meta in rows]

    # ---------------------------------------------------------------- read
    def read(self, query: Query) -> str:
        if self.size == 0:
            return "Memory is empty."
        k = max(1, min(int(query.top_k or TOP_K), 12))
        expanded = self._expand(query)
        q_tokens = tokenize(expanded)
        where = self._where(query)
        hits = self._dense(expanded, k, where)
        if where and not hits:
            self.log.debug("speaker filter returned nothing; retrying without it")
            hits = self._dense(expanded, k, None)
        candidates = []
        for chunk_id, similarity, doc, meta in hits:
            score = (DENSE_WEIGHT * similarity + SPARSE_WEIGHT * self._sparse(chunk_id, q_tokens)
                     + RECENCY_WEIGHT * self._recency(int(meta.get("date_ord") or 0)))
            score *= 0.8 + 0.4 * float(meta.get("salience", 0.5))
            candidates.append(Candidate(score, chunk_id, doc, str(meta.get("speaker", "")),
                                        str(meta.get("date", ""))))
        best = sorted(candidates, reverse=True)[:k]
        out = []
        for rank, cand in enumerate(best, 1):
            prefix = f"({cand.when}) " if cand.when else ""
            out.append(f"{rank}. {prefix}{cand.text} [{cand.score:.3f}]")
        self.log.debug(f"query={query.query!r} expanded_tokens={len(q_tokens)} hits={len(hits)}")
        text = "\n".join(out) if out else "No relevant memory found."
        return text if len(text) <= 3000 else text[:2997] + "..."

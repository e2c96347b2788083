"""
BM25 passage index over the raw conversation, with a light suffix stemmer.

Why: extraction loses details that questions later ask about (colours, counts, names of
books). Indexing the raw text in overlapping passages keeps them; the extracted summary is
indexed as an extra passage with a higher field weight. heapq is used for top-k when the
sandbox offers it, otherwise a full sort.
"""
from __future__ import annotations

import math
import re
import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

try:
    import heapq
except ImportError:
    heapq = None

INSTRUCTION_KNOWLEDGE_ITEM = "Summarise the text in one or two sentences and list its important named things."
INSTRUCTION_QUERY = "Turn the question into keywords; keep names, numbers and rare words."
INSTRUCTION_RESPONSE = "Answer with the exact words from the passages when possible."
ALWAYS_ON_KNOWLEDGE = "Passages are quoted from the original conversations."

K1 = 1.4
B = 0.72
PASSAGE_LINES = 3
SUMMARY_WEIGHT = 1.5
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_STOP = frozenset("""a an the and or but if then so of to in on at by for with about from as is am are
was were be been being it its this that these those i me my we our you your he him his she her they
them their what which who whom when where why how do does did have has had not no yes""".split())
_SUFFIXES = ("ingly", "edly", "ings", "ing", "ies", "ied", "ers", "er", "ed", "es", "ly", "s")


@dataclass
class KnowledgeItem:
    summary: str = field(default="", metadata={"description": "One or two sentence summary"})
    named_things: list[str] = field(default_factory=list, metadata={
        "description": "Important named things: people, places, titles, objects"})


@dataclass
class Query:
    keywords: str = field(default="", metadata={"description": "Keywords with names, numbers and rare words"})


@dataclass
class Passage:
    pid: int
    text: str
    session: int
    weight: float = 1.0
    length: int = 0
    tf: Counter = field(default_factory=Counter, repr=False)


class Analyzer:
    """Tokenise + stem, memoising stems (the same words recur constantly)."""

    def __init__(self):
        self.__stems: Dict[str, str] = {}

    def __stem(self, word: str) -> str:
        cached = self.__stems.get(word)
        if cached is not None:
            return cached
        stem = word
        for suffix in _SUFFIXES:
            if len(word) > len(suffix) + 2 and word.endswith(suffix):
                stem = word[: -len(suffix)]
                if suffix in ("ies", "ied"):
                    stem += "y"
                break
        self.__stems[word] = stem
        return stem

    def tokens(self, text: str) -> Iterator[str]:
        for match in _TOKEN.finditer((text or "").lower()):
            word = match.group(0)
            if word not in _STOP:
                yield self.__stem(word)

    @property
    def cache_size(self) -> int:
        return len(self.__stems)


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.analyzer = Analyzer()
        self.__passages: List[Passage] = []
        self.__postings: Dict[str, List[int]] = defaultdict(list)
        self.__df: Counter = Counter()
        self.__total_length = 0
        self.__digests: set = set()
        self.session = 0

    # ---------------------------------------------------------------- indexing
    @staticmethod
    def _windows(lines: Sequence[str], size: int = PASSAGE_LINES) -> List[str]:
        if len(lines) <= size:
            return ["\n".join(lines)] if lines else []
        return ["\n".join(lines[i:i + size]) for i in range(0, len(lines) - size + 1, max(1, size - 1))]

    def __add(self, text: str, weight: float) -> bool:
        digest = hashlib.blake2b(text.encode("utf-8"), digest_size=12).hexdigest()
        if digest in self.__digests or not text.strip():
            return False
        self.__digests.add(digest)
        tf = Counter(self.analyzer.tokens(text))
        passage = Passage(len(self.__passages), text, self.session, weight, sum(tf.values()), tf)
        self.__passages.append(passage)
        for term in tf:
            self.__postings[term].append(passage.pid)
            self.__df[term] += 1
        self.__total_length += passage.length
        return True

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.session += 1
        lines = [line.strip() for line in raw_text.splitlines() if line.strip()]
        added = sum(self.__add(window, 1.0) for window in self._windows(lines))
        extra = item.summary.strip()
        if item.named_things:
            extra += " | " + ", ".join(t for t in item.named_things if t)
        if extra:
            added += self.__add(extra, SUMMARY_WEIGHT)
        self.toolkit.logger.debug(f"session {self.session}: +{added} passages "
                                  f"(total {len(self.__passages)}, stems cached {self.analyzer.cache_size})")

    # ---------------------------------------------------------------- scoring
    def _idf(self, term: str) -> float:
        n = len(self.__passages)
        df = self.__df.get(term, 0)
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def _bm25(self, passage: Passage, q_terms: Counter) -> float:
        avg = self.__total_length / max(1, len(self.__passages))
        score = 0.0
        for term, q_count in q_terms.items():
            tf = passage.tf.get(term, 0)
            if not tf:
                continue
            denom = tf + K1 * (1 - B + B * passage.length / max(avg, 1e-9))
            score += self._idf(term) * tf * (K1 + 1) / denom * (1 + 0.2 * (q_count - 1))
        return score * passage.weight

    def _phrase_boost(self, passage: Passage, phrases: List[str]) -> float:
        """Exact multi-word phrases from the query ("dance studio") count extra."""
        lowered = passage.text.lower()
        return sum(0.75 for phrase in phrases if phrase in lowered)

    @staticmethod
    def _phrases(keywords: str) -> List[str]:
        quoted = re.findall(r'"([^"]+)"', keywords)
        words = [w for w in re.findall(r"[a-z0-9']+", keywords.lower()) if w not in _STOP]
        bigrams = [f"{a} {b}" for a, b in zip(words, words[1:])]
        return [q.lower() for q in quoted] + bigrams

    def __len__(self) -> int:
        return len(self.__passages)

    def __contains__(self, text) -> bool:
        digest = hashlib.blake2b(str(text).encode("utf-8"), digest_size=12).hexdigest()
        return digest in self.__digests

    def _top(self, scored: List[Tuple[float, int]], k: int) -> List[Tuple[float, int]]:
        if heapq is not None:
            return heapq.nlargest(k, scored)
        return sorted(scored, reverse=True)[:k]

    def read(self, query: Query) -> str:
        if not self.__passages:
            return "(no passages indexed)"
        q_terms = Counter(self.analyzer.tokens(query.keywords))
        candidates = {pid for term in q_terms for pid in self.__postings.get(term, ())}
        phrases = self._phrases(query.keywords)
        newest_session = self.__passages[-1].session
        scored = []
        for pid in candidates:
            passage = self.__passages[pid]
            score = self._bm25(passage, q_terms) + self._phrase_boost(passage, phrases)
            score *= 1.0 + 0.02 * (passage.session / max(1, newest_session))  # mild recency tie-break
            scored.append((score, pid))
        top = [(s, pid) for s, pid in self._top(scored, 6) if s > 0]
        if not top:
            newest = self.__passages[-3:]
            self.toolkit.logger.debug("no keyword hit; returning the newest passages")
            return "\n---\n".join(p.text for p in newest)[:3000]
        parts = []
        for rank, (score, pid) in enumerate(top, start=1):
            passage = self.__passages[pid]
            label = "summary" if passage.weight > 1 else "quote"
            parts.append(f"#{rank} session {passage.session} {label} (bm25={score:5.2f})\n{passage.text}")
        self.toolkit.logger.debug("query terms: " + ", ".join(sorted(q_terms)))
        budget, out = 3000, []
        for part in parts:
            if len(part) + 5 > budget:
                break
            out.append(part)
            budget -= len(part) + 5
        return "\n---\n".join(out)

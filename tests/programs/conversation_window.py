"""Turn-level conversation memory: a short verbatim window plus an archive.

The last WINDOW_TURNS turns are kept verbatim (recent context is asked about most often).
Older turns move to a chroma archive, one document per turn, with speaker and date metadata;
reads combine archive hits around the best match (neighbouring turns give context) with the
recent window. Turns are parsed from the raw text ("[date] Speaker: words").
"""
from __future__ import annotations

import re
import textwrap
from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import date
from typing import Dict, List, Optional, Tuple

INSTRUCTION_KNOWLEDGE_ITEM = "Give the session date (YYYY-MM-DD) and the speakers; one line on the gist."
INSTRUCTION_QUERY = "Copy the question; name the speaker it is about if any."
INSTRUCTION_RESPONSE = "Quote the relevant turn when you can; keep the answer short."
ALWAYS_ON_KNOWLEDGE = "Turns are shown as [date] Speaker: words, oldest first within each group."

WINDOW_TURNS = 12
NEIGHBOURS = 1
MAX_TURN_CHARS = 400
TURN_RE = re.compile(r"^\s*(?:\[(?P<date>[^\]]+)\]\s*)?(?P<speaker>[A-Z][\w .'-]{0,30}?):\s*(?P<text>.+)$")
WORD_RE = re.compile(r"[a-z0-9]+")
COMMON = frozenset("the a an to of and or in on is was i you it that what when where who did do".split())


@dataclass
class KnowledgeItem:
    session_date: Optional[str] = field(default=None, metadata={"description": "Session date YYYY-MM-DD"})
    speakers: list[str] = field(default_factory=list, metadata={"description": "Names of the speakers"})
    gist: str = field(default="", metadata={"description": "One line on what the session is about"})


@dataclass
class Query:
    question: str = field(default="", metadata={"description": "The question, copied"})
    speaker: str | None = field(default=None, metadata={"description": "Speaker the question is about, if any"})


@dataclass
class Turn:
    index: int
    speaker: str
    text: str
    when: str | None = None
    session: int = 0

    def line(self) -> str:
        stamp = f"[{self.when}] " if self.when else ""
        return f"{stamp}{self.speaker}: {self.text}"


def parse_turns(raw_text: str, default_date: str | None) -> List[Tuple[str, str, str | None]]:
    """(speaker, text, date) for each turn; continuation lines join the previous turn."""
    turns: List[Tuple[str, str, str | None]] = []
    current_date = default_date
    for line in raw_text.splitlines():
        if not line.strip():
            continue
        m = TURN_RE.match(line)
        if m:
            current_date = m.group("date") or current_date
            turns.append((m.group("speaker").strip(), m.group("text").strip(), current_date))
        elif turns:
            speaker, text, when = turns[-1]
            turns[-1] = (speaker, f"{text} {line.strip()}", when)
    return turns


MONTHS = {name: i for i, name in enumerate(
    "january february march april may june july august september october november december".split(), 1)}
MONTH_RE = re.compile(r"\b(" + "|".join(MONTHS) + r")\b(?:\s+(\d{4}))?", re.I)


def month_filter(question: str) -> Tuple[int, int | None] | None:
    """'in May 2023' -> (5, 2023); 'in August' -> (8, None); None when no month is named."""
    m = MONTH_RE.search(question or "")
    if not m:
        return None
    return MONTHS[m.group(1).lower()], int(m.group(2)) if m.group(2) else None


def in_month(when: str | None, wanted: Tuple[int, int | None]) -> bool:
    if not when:
        return False
    try:
        day = date.fromisoformat(when)
    except ValueError:
        return False
    month, year = wanted
    return day.month == month and (year is None or day.year == year)


def clean_date(value: str | None) -> str | None:
    if not value:
        return None
    try:
        return date.fromisoformat(value.strip()[:10]).isoformat()
    except ValueError:
        return None


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.window: deque[Turn] = deque()
        self.archive = toolkit.chroma.get_or_create_collection("archived_turns")
        self.turns_by_index: Dict[int, Turn] = {}
        self.speaker_turns: Counter[str] = Counter()
        self.next_index = 0
        self.sessions = 0
        self.gists: List[str] = []

    # ------------------------------------------------------------- write
    def _archive(self, turns: List[Turn]) -> None:
        if not turns:
            return
        self.archive.add(
            ids=[f"t{t.index}" for t in turns],
            documents=[t.line() for t in turns],
            metadatas=[{"speaker": t.speaker, "date": t.when or "", "index": t.index, "session": t.session}
                       for t in turns],
        )
        self.toolkit.logger.debug(f"archived {len(turns)} turns (up to #{turns[-1].index})")

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.sessions += 1
        when = clean_date(item.session_date)
        parsed = parse_turns(raw_text, when)
        if not parsed:  # no speaker labels: treat each sentence as a turn by the first speaker
            speaker = item.speakers[0] if item.speakers else "Someone"
            parsed = [(speaker, s, when) for s in re.split(r"(?<=[.!?])\s+", raw_text) if s.strip()]
        spilled: List[Turn] = []
        for speaker, text, turn_date in parsed:
            turn = Turn(self.next_index, speaker, textwrap.shorten(text, MAX_TURN_CHARS),
                        clean_date(turn_date) or when, self.sessions)
            self.next_index += 1
            self.turns_by_index[turn.index] = turn
            self.speaker_turns[speaker] += 1
            self.window.append(turn)
            while len(self.window) > WINDOW_TURNS:
                spilled.append(self.window.popleft())
        self._archive(spilled)
        if item.gist.strip():
            self.gists.append(f"session {self.sessions} ({when or 'undated'}): {item.gist.strip()}")
        self.toolkit.logger.debug(
            f"session {self.sessions}: {len(parsed)} turns, window={len(self.window)}, "
            f"archived={self.next_index - len(self.window)}")

    # ------------------------------------------------------------- read
    def _overlap(self, text: str, words: set[str]) -> int:
        return len(words & set(WORD_RE.findall(text.lower())))

    def _archive_hits(self, question: str, speaker: str | None) -> List[Turn]:
        archived = self.next_index - len(self.window)
        if archived <= 0:
            return []
        where = {"speaker": speaker} if speaker and self.speaker_turns.get(speaker) else None
        res = self.archive.query(query_texts=[question or "conversation"], n_results=min(4, archived),
                                 where=where, include=["metadatas", "distances"])
        indices = [int(m["index"]) for m in (res.get("metadatas") or [[]])[0] if m]
        picked = set()
        for index in indices:
            for j in range(index - NEIGHBOURS, index + NEIGHBOURS + 1):
                if j in self.turns_by_index and all(t.index != j for t in self.window):
                    picked.add(j)
        return [self.turns_by_index[j] for j in sorted(picked)]

    def _speaker_focus(self, speaker: str, words: set[str], limit: int = 4) -> List[Turn]:
        """The speaker's own turns that share words with the question, newest first."""
        own = [t for t in self.turns_by_index.values() if t.speaker.lower() == speaker.lower()]
        ranked = sorted(own, key=lambda t: (self._overlap(t.text, words), t.index), reverse=True)
        return [t for t in ranked[:limit] if self._overlap(t.text, words)]

    def read(self, query: Query) -> str:
        if not self.turns_by_index:
            return "No conversation stored."
        wanted_month = month_filter(query.question)
        if wanted_month is not None:
            dated = [t for t in self.turns_by_index.values() if in_month(t.when, wanted_month)]
            if dated:
                self.toolkit.logger.debug(f"month filter {wanted_month}: {len(dated)} turns")
                lines = [t.line() for t in sorted(dated, key=lambda t: t.index)[-15:]]
                return ("Turns in that month:\n" + "\n".join(lines))[:3000]
        words = {w for w in WORD_RE.findall(query.question.lower()) if w not in COMMON}
        speaker = (query.speaker or "").strip() or None
        from_archive = self._archive_hits(query.question, speaker)
        recent = sorted(self.window, key=lambda t: (self._overlap(t.text, words), t.index), reverse=True)[:6]
        recent.sort(key=lambda t: t.index)
        blocks = []
        if speaker and (focus := self._speaker_focus(speaker, words)):
            blocks.append(f"{speaker} said:\n" + "\n".join(t.line() for t in focus))
        if from_archive:
            blocks.append("Earlier turns:\n" + "\n".join(t.line() for t in from_archive))
        if recent:
            blocks.append("Recent turns:\n" + "\n".join(t.line() for t in recent))
        if self.gists:
            relevant = [g for g in self.gists if self._overlap(g, words)] or self.gists[-2:]
            blocks.append("Sessions:\n" + "\n".join(relevant[-4:]))
        talkers = ", ".join(f"{name}: {n}" for name, n in self.speaker_turns.most_common(4))
        blocks.append(f"Turns per speaker - {talkers}")
        text = "\n\n".join(blocks)
        self.toolkit.logger.debug(f"read: archive={len(from_archive)} recent={len(recent)} chars={len(text)}")
        return text if len(text) <= 3000 else text[:3000]

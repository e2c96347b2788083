from __future__ import annotations

"""Per-person profile memory: preferences, attributes and life events.

The extraction model fills one record per session; we fold it into a profile per person.
Preferences carry a polarity (+1 like / -1 dislike) and are overwritten when the person
changes their mind, so "does X still like Y" questions see the latest stance. Free-text
statements that fit no slot are kept as notes and searched by keyword.
"""

import json
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field, replace
from datetime import date
from typing import Literal, Optional

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Who is this session mainly about (person)? List what they like or love (likes) and what "
    "they dislike or stopped liking (dislikes), facts about them such as job, home, family or "
    "pets written as 'attribute: value' (attributes), and anything else worth remembering (notes)."
)
INSTRUCTION_QUERY = "Name the person the question is about and the topic (e.g. food, job, hobby)."
INSTRUCTION_RESPONSE = "Answer from the person's profile. If a preference changed, use the latest one."
ALWAYS_ON_KNOWLEDGE = "Profiles list the latest known preferences first."

Polarity = Literal[1, -1]
_LIKE_RE = re.compile(r"\b(?:i|she|he|they)\s+(?:really\s+)?(?:like|love|enjoy|adore)s?\s+([^.,!?;]+)", re.I)
_DISLIKE_RE = re.compile(r"\b(?:i|she|he|they)\s+(?:really\s+)?(?:hate|dislike|can't stand)s?\s+([^.,!?;]+)", re.I)
_ATTR_RE = re.compile(r"^\s*([\w ]{2,30}?)\s*[:=]\s*(.+?)\s*$")
_SPEAKER_RE = re.compile(r"^(?:\[[^\]]*\]\s*)?([A-Z][a-z]+):", re.M)
_WORDS = re.compile(r"[a-z]+")
_TOPICS = {
    "food": {"food", "eat", "cook", "pizza", "pasta", "sushi", "cake", "restaurant", "dinner"},
    "hobby": {"paint", "painting", "hike", "hiking", "read", "reading", "book", "music", "dance", "camping"},
    "job": {"job", "work", "bank", "studio", "store", "career", "business", "company"},
    "family": {"kids", "children", "son", "daughter", "husband", "wife", "mother", "father", "adoption"},
    "pets": {"dog", "cat", "pet", "puppy", "kitten"},
}


@dataclass
class KnowledgeItem:
    person: str = field(default="", metadata={"description": "Main person of the session"})
    likes: list[str] = field(default_factory=list, metadata={"description": "Things the person likes or loves"})
    dislikes: list[str] = field(default_factory=list, metadata={"description": "Things the person dislikes"})
    attributes: list[str] = field(default_factory=list, metadata={"description": "Facts as 'attribute: value'"})
    notes: list[str] = field(default_factory=list, metadata={"description": "Other things worth remembering"})
    session_date: Optional[str] = field(default=None, metadata={"description": "Session date YYYY-MM-DD"})


@dataclass
class Query:
    person: Optional[str] = field(default=None, metadata={"description": "Person the question is about"})
    topic: str = field(default="", metadata={"description": "Topic of the question, e.g. food, job, hobby"})


@dataclass
class Preference:
    thing: str
    polarity: int
    seen: int = 1
    last_session: int = 0
    when: Optional[str] = None

    def __post_init__(self) -> None:
        self.thing = self.thing.strip().lower().rstrip(".")
        if self.polarity not in (1, -1):
            raise ValueError(f"polarity must be 1 or -1, got {self.polarity!r}")

    def describe(self) -> str:
        verb = "likes" if self.polarity > 0 else "dislikes"
        stamp = f", as of {self.when}" if self.when else ""
        times = f" (mentioned {self.seen}x{stamp})" if self.seen > 1 or stamp else ""
        return f"{verb} {self.thing}{times}"


@dataclass
class Profile:
    name: str
    preferences: dict[str, Preference] = field(default_factory=dict)
    attributes: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    mentions: int = 0

    def set_preference(self, thing: str, polarity: Polarity, session: int, when: Optional[str]) -> None:
        key = thing.strip().lower()
        if not key:
            return
        old = self.preferences.get(key)
        if old is None:
            self.preferences[key] = Preference(key, polarity, last_session=session, when=when)
        elif old.polarity != polarity:  # changed their mind: the latest stance wins
            self.preferences[key] = replace(old, polarity=polarity, seen=old.seen + 1,
                                            last_session=session, when=when)
        else:
            old.seen += 1
            old.last_session = session
            old.when = when or old.when


    def merge(self, other: Profile) -> Profile:
        """Fold a profile created under a nickname into this one (latest stance wins)."""
        for key, pref in other.preferences.items():
            mine = self.preferences.get(key)
            if mine is None or pref.last_session >= mine.last_session:
                self.preferences[key] = pref
        for key, value in other.attributes.items():
            self.attributes.setdefault(key, value)
        self.notes.extend(n for n in other.notes if n not in self.notes)
        self.mentions += other.mentions
        return self

    @property
    def summary(self) -> str:
        likes = sum(1 for p in self.preferences.values() if p.polarity > 0)
        return f"{self.name}: {likes} likes, {len(self.preferences) - likes} dislikes, {len(self.attributes)} facts"


def _topic_of(text: str) -> str:
    tokens = set(_WORDS.findall(text.lower()))
    best = max(_TOPICS.items(), key=lambda kv: len(kv[1] & tokens))
    return best[0] if best[1] & tokens else "other"


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.profiles: dict[str, Profile] = {}
        self.sessions = 0
        self.topic_counts: Counter[str] = Counter()
        self.db = toolkit.db
        self.db.execute("CREATE TABLE IF NOT EXISTS snapshots (session INTEGER, person TEXT, profile TEXT)")

    def _profile(self, name: str) -> Profile:
        key = name.strip().title() or "Unknown"
        if key not in self.profiles:
            self.profiles[key] = Profile(key)
            self.toolkit.logger.debug(f"new profile: {key}")
        return self.profiles[key]

    def _merge_nicknames(self) -> None:
        names = sorted(self.profiles, key=len)
        for short in names:
            for long in names:
                if short != long and len(short) >= 3 and long.startswith(short) and short in self.profiles:
                    self.profiles[long].merge(self.profiles.pop(short))
                    self.toolkit.logger.debug(f"merged profile {short} into {long}")
                    break

    def _mine_raw(self, raw_text: str) -> dict[str, list[tuple[str, int]]]:
        """Regex fallback: 'Name: ... I love X' lines -> {name: [(thing, polarity)]}."""
        found: dict[str, list[tuple[str, int]]] = defaultdict(list)
        for line in raw_text.splitlines():
            speaker = _SPEAKER_RE.match(line)
            who = speaker.group(1) if speaker else ""
            for pattern, polarity in ((_LIKE_RE, 1), (_DISLIKE_RE, -1)):
                for m in pattern.finditer(line):
                    found[who].append((m.group(1)[:60], polarity))
        return found

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.sessions += 1
        when = item.session_date
        if when:
            try:
                when = date.fromisoformat(when[:10]).isoformat()
            except ValueError:
                when = None
        person = self._profile(item.person) if item.person.strip() else None
        if person is not None:
            person.mentions += 1
            for thing in item.likes:
                person.set_preference(thing, 1, self.sessions, when)
            for thing in item.dislikes:
                person.set_preference(thing, -1, self.sessions, when)
            for attr in item.attributes:
                if (m := _ATTR_RE.match(attr)) is not None:
                    person.attributes[m.group(1).strip().lower()] = m.group(2)
                elif attr.strip():
                    person.notes.append(attr.strip())
            person.notes.extend(n.strip() for n in item.notes if n and n.strip())
            del person.notes[:-40]
        for who, prefs in self._mine_raw(raw_text).items():
            profile = self._profile(who) if who else person
            if profile is None:
                continue
            for thing, polarity in prefs:
                profile.set_preference(thing, polarity, self.sessions, when)
        self.topic_counts[_topic_of(raw_text)] += 1
        self._merge_nicknames()
        for profile in self.profiles.values():
            self.db.execute("INSERT INTO snapshots VALUES (?, ?, ?)",
                            (self.sessions, profile.name, json.dumps(asdict(profile), ensure_ascii=False)))
        self.db.commit()
        self.toolkit.logger.debug("session {}: {} profiles, topics={}".format(
            self.sessions, len(self.profiles), dict(self.topic_counts)))

    def _render(self, profile: Profile, topic: str) -> str:
        prefs = sorted(profile.preferences.values(), key=lambda p: (-p.last_session, -p.seen))
        if topic and topic != "other":
            on_topic = [p for p in prefs if _topic_of(p.thing) == topic]
            prefs = on_topic + [p for p in prefs if p not in on_topic]
        lines = [f"# {profile.name} (mentioned in {profile.mentions} sessions)"]
        lines += [f"- {p.describe()}" for p in prefs[:10]]
        lines += [f"- {k}: {v}" for k, v in sorted(profile.attributes.items())]
        topic_words = _TOPICS.get(topic, set())
        notes = [n for n in profile.notes if topic_words & set(_WORDS.findall(n.lower()))] or profile.notes[-5:]
        lines += [f"- note: {n}" for n in notes[:6]]
        return "\n".join(lines)

    def read(self, query: Query) -> str:
        if not self.profiles:
            return "No profiles yet."
        wanted = (query.person or "").strip().title()
        if wanted and wanted in self.profiles:
            chosen = [self.profiles[wanted]]
        else:
            by_mentions = sorted(self.profiles.values(), key=lambda p: p.mentions, reverse=True)
            chosen = [p for p in by_mentions if wanted and wanted.lower() in p.name.lower()] or by_mentions[:2]
        text = "\n\n".join(self._render(p, query.topic.strip().lower()) for p in chosen)
        others = [p.summary for p in self.profiles.values() if p not in chosen][:3]
        if others:
            text += "\n\nOther people: " + "; ".join(others)
        self.toolkit.logger.debug(f"read person={wanted!r} topic={query.topic!r} -> {len(text)} chars")
        return text[:3000]

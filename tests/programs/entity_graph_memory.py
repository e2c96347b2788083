"""Entity graph memory.

Every fact is attached to the entities (people, places, things) it mentions. Entities are
linked when they co-occur, so a question about one entity also surfaces facts about the
entities it is most strongly linked to. Aliases ("Mel" -> "Melanie") are merged when the
extraction says so or when a short name is a prefix of a known long one.
"""
import re
import math
import textwrap
from collections import Counter, defaultdict, OrderedDict
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Set, Tuple

INSTRUCTION_KNOWLEDGE_ITEM = (
    "List the entities in the text (people, pets, places, organisations, objects that matter) "
    "and write each fact as a standalone sentence that repeats the entity names. Add aliases as "
    "'short=long' pairs when a person is called by a nickname."
)
INSTRUCTION_QUERY = "Name the entities the question is about and restate the question as keywords."
INSTRUCTION_RESPONSE = "Answer briefly. Use the facts listed under the entity the question is about."
ALWAYS_ON_KNOWLEDGE = ""

CAPITALISED = re.compile(r"\b([A-Z][a-z]+(?:\s+[A-Z][a-z]+)*)\b")
ALIAS = re.compile(r"^\s*([^=]+?)\s*=\s*([^=]+?)\s*$")
WORD = re.compile(r"[a-z0-9']+")
SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+")
NOT_ENTITIES = frozenset({"I", "The", "A", "An", "It", "We", "They", "He", "She", "You", "That",
                          "This", "Yes", "No", "Oh", "Wow", "Thanks", "Sounds", "Brave", "My"})
MAX_FACTS_PER_ENTITY = 60


@dataclass
class KnowledgeItem:
    entities: list[str] = field(default_factory=list, metadata={
        "description": "Entities mentioned: people, pets, places, organisations, important objects"})
    facts: list[str] = field(default_factory=list, metadata={
        "description": "Standalone fact sentences that repeat the entity names"})
    aliases: list[str] = field(default_factory=list, metadata={
        "description": "Nickname pairs written as short=long, e.g. Mel=Melanie"})


@dataclass
class Query:
    entities: list[str] = field(default_factory=list, metadata={
        "description": "Entities the question is about"})
    keywords: str = field(default="", metadata={"description": "The question as keywords"})


class Fact:
    __slots__ = ("fact_id", "text", "entities", "words")

    def __init__(self, fact_id: int, text: str, entities: Iterable[str]):
        self.fact_id = fact_id
        self.text = text
        self.entities = frozenset(entities)
        self.words = frozenset(WORD.findall(text.lower()))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self.fact_id}, {self.text[:30]!r})"

    def __hash__(self) -> int:
        return hash(self.fact_id)

    def __eq__(self, other) -> bool:
        return isinstance(other, Fact) and other.fact_id == self.fact_id


class AliasTable:
    """Union-find over names, case-insensitive, preferring the longest spelling as canonical."""

    def __init__(self):
        self._parent: Dict[str, str] = {}
        self._display: Dict[str, str] = {}

    def _find(self, key: str) -> str:
        root = key
        while self._parent.get(root, root) != root:
            root = self._parent[root]
        while key != root:  # path compression
            nxt = self._parent.get(key, key)
            self._parent[key] = root
            key = nxt
        return root

    def add(self, name: str) -> str:
        key = name.strip().lower()
        if not key:
            return ""
        if key not in self._parent:
            self._parent[key] = key
            self._display[key] = name.strip()
        return self._find(key)

    def merge(self, short: str, long: str) -> None:
        a, b = self.add(short), self.add(long)
        if not a or not b or a == b:
            return
        keep, drop = (a, b) if len(self._display[a]) >= len(self._display[b]) else (b, a)
        self._parent[drop] = keep

    def canonical(self, name: str) -> str:
        key = self.add(name)
        return self._display.get(key, name)

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name.strip().lower() in self._parent

    def __len__(self) -> int:
        return len({self._find(k) for k in self._parent})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.aliases = AliasTable()
        self.facts: List[Fact] = []
        self.by_entity: Dict[str, List[int]] = defaultdict(list)
        self.links: Dict[str, Counter] = defaultdict(Counter)
        self.seen_texts: Set[str] = set()
        self.cache: "OrderedDict" = OrderedDict()
        self.next_id = self._make_counter()

    @staticmethod
    def _make_counter():
        count = 0

        def bump() -> int:
            nonlocal count
            count += 1
            return count
        return bump

    # ------------------------------------------------------------------ write
    def _entities_in(self, text: str, declared: List[str]) -> Set[str]:
        found = set()
        lowered = text.lower()
        for name in declared:
            if name and name.lower() in lowered:
                found.add(self.aliases.canonical(name))
        for match in CAPITALISED.finditer(text):
            name = match.group(1)
            if name.split()[0] in NOT_ENTITIES:
                continue
            if name in self.aliases or len(name) > 2:
                found.add(self.aliases.canonical(name))
        return found

    def _learn_aliases(self, pairs: List[str], declared: List[str]) -> None:
        for pair in pairs:
            if (m := ALIAS.match(pair or "")) is not None:
                self.aliases.merge(m.group(1), m.group(2))
        long_names = [d for d in declared if d and len(d) > 4]
        for name in declared:
            for long_name in long_names:
                if name and name != long_name and long_name.lower().startswith(name.lower()):
                    self.aliases.merge(name, long_name)

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        declared = [e.strip() for e in item.entities if e and e.strip()]
        self._learn_aliases(item.aliases, declared)
        for name in declared:
            self.aliases.add(name)
        sentences = [f.strip() for f in item.facts if f and f.strip()]
        if not sentences:
            sentences = [s.strip() for s in SENTENCE_SPLIT.split(raw_text) if len(s.strip()) > 15]
        added = 0
        for sentence in sentences:
            key = " ".join(sentence.lower().split())
            if key in self.seen_texts:
                continue
            self.seen_texts.add(key)
            ents = self._entities_in(sentence, declared)
            fact = Fact(self.next_id(), sentence, ents)
            self.facts.append(fact)
            for ent in ents:
                ids = self.by_entity[ent]
                ids.append(len(self.facts) - 1)
                if len(ids) > MAX_FACTS_PER_ENTITY:
                    del ids[0]
                for other in ents:
                    if other != ent:
                        self.links[ent][other] += 1
            added += 1
        self.cache.clear()
        self.toolkit.logger.debug(f"write: {added} facts, {len(self.aliases)} entities known")

    # ------------------------------------------------------------------ read
    def _score(self, fact: Fact, q_words: Set[str], focus: Set[str]) -> float:
        overlap = len(fact.words & q_words)
        entity_hit = len(fact.entities & focus)
        recency = 1.0 + fact.fact_id / (10.0 * (len(self.facts) + 1))
        return (overlap + 2.0 * entity_hit) * recency / math.sqrt(1 + len(fact.words) / 12)

    def _neighbours(self, focus: Set[str], limit: int = 3) -> List[Tuple[str, int]]:
        pooled = Counter()
        for ent in focus:
            pooled.update(self.links.get(ent, {}))
        return [(name, n) for name, n in pooled.most_common() if name not in focus][:limit]

    def read(self, query: Query) -> str:
        if not self.facts:
            return "Nothing remembered yet."
        cache_key = (tuple(sorted(query.entities)), query.keywords)
        if cache_key in self.cache:
            self.cache.move_to_end(cache_key)
            return self.cache[cache_key]
        focus = {self.aliases.canonical(e) for e in query.entities if e and e.strip()}
        focus |= self._entities_in(query.keywords, list(query.entities))
        q_words = set(WORD.findall(query.keywords.lower()))
        neighbours = self._neighbours(focus)
        pool: Set[int] = set()
        for ent in focus | {name for name, _ in neighbours}:
            pool.update(self.by_entity.get(ent, []))
        if not pool:
            pool = set(range(max(0, len(self.facts) - 30), len(self.facts)))
        ranked = sorted(pool, key=lambda i: self._score(self.facts[i], q_words, focus), reverse=True)
        sections: Dict[str, List[str]] = OrderedDict()
        for index in ranked[:12]:
            fact = self.facts[index]
            owner = next((e for e in fact.entities if e in focus), None) or \
                next(iter(sorted(fact.entities)), "general")
            sections.setdefault(owner, []).append(fact.text)
        lines = []
        for owner, texts in sections.items():
            lines.append(f"== {owner} ==")
            lines.extend(textwrap.shorten(t, width=220, placeholder=" ...") for t in texts)
        if neighbours:
            lines.append("Related: " + ", ".join("%s (%d)" % pair for pair in neighbours))
        out = "\n".join(lines)[:3000]
        self.cache[cache_key] = out
        while len(self.cache) > 32:
            self.cache.popitem(last=False)
        self.toolkit.logger.debug("read focus=%s pool=%d" % (sorted(focus), len(pool)))
        return out

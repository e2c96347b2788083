"""A procedural, deterministic generator of the sample memory task (`load_sample(None)`).

Why: the hand-written sample (mstar/data/sample_task.json, 20 sessions, 28 test questions) is
too small for a paired test to see a better memory program. This builds a bigger task of the
same shape from a seed: a few conversation groups (two or three friends each, some people in
two groups) talk over ten dated sessions each, in LoCoMo's episode format

    [3:10 pm on 14 March, 2024] Session 3 — Ines, Tobias and Oona
    Ines: I started pottery classes today at the Blue Heron Studio.

People adopt pets, run races, move cities and change jobs; later sessions mention the same
pets, teams and towns again without repeating the facts, so memory design matters:

  single-hop  a fact said once ("What is the name of Ines's cat?")
  temporal    needs the session date ("When did Ines start pottery classes?" -> "14 March,
              2024"; "yesterday" -> the day before; "In which month ...?" -> "March 2024")
  updated     a fact that changed; the gold answer is the latest ("Where does Ines live now?")
  multi-hop   two facts from two sessions ("What is the name of the cat owned by the person who
              ran the Harbour Trail Run?", "Where did Ines live before moving to Porto?")

Same (seed, size) -> the same task, byte for byte (one `random.Random` seeded from a string);
size scales the number of groups (5 at size 1: 50 sessions, ~500 questions, 30% of each
category for validation, the rest held out for test). Sessions are kept short (~10 turns of one
to three sentences) because programs that store one unit per turn pay a chroma call per turn.
Fact templates live in mstar/tasks/sample_facts.py, word lists in mstar/tasks/sample_vocab.py.
"""
from __future__ import annotations

import datetime as dt
import math
import random
import re
from collections import defaultdict
from dataclasses import dataclass, field

from mstar.tasks import sample_vocab as v
from mstar.tasks.evidence import unit, with_evidence
from mstar.tasks.model import Episode, QueryItem, Task
from mstar.tasks.sample_facts import (EVENT_KINDS, KINDS, REPEATABLE, STATIC_KINDS, UPDATED, Fact,
                                      Person, Pools, POOLS, other_name, say_updated)

DEFAULT_SEED = 0
DEFAULT_SIZE = 1.0
GROUPS_PER_SIZE = 5        # conversation groups at size 1
MAX_SIZE = 3.5             # 17 groups, 42 speakers: the speaker name lists run out beyond
SESSIONS_PER_GROUP = 10
EVENTS_PER_SESSION = 1.3   # one-off events per person per session they attend
SMALL_TALK = 0.4          # chance that a turn also carries a small-talk sentence
VAL_FRACTION = 0.3         # of each category's questions
MONTH_QUESTIONS = 0.2      # share of temporal questions asked as "In which month ...?"
WHENS = ("", "", "today", "this morning", "yesterday", "yesterday", "")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")


@dataclass
class Session:
    group: int
    number: int
    date: dt.date
    time: str
    people: list[Person]
    facts: list[Fact] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"c{self.group + 1}_s{self.number}"


def fmt_date(day: dt.date) -> str:
    return f"{day.day} {MONTHS[day.month - 1]}, {day.year}"


def _names(people: list[Person]) -> str:
    names = [p.name for p in people]
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + " and " + names[-1]


# ---------------------------------------------------------------- world and timeline

def make_people(rng: random.Random, n_groups: int) -> tuple[list[Person], list[list[Person]]]:
    """Two people of their own per group, plus n_groups // 2 people who are in two groups."""
    n_shared = n_groups // 2
    cast = [(n, True) for n in v.SPEAKERS_SHE] + [(n, False) for n in v.SPEAKERS_HE]
    chosen = rng.sample(cast, 2 * n_groups + n_shared)
    people = [Person(name, she) for name, she in chosen]
    groups: list[list[Person]] = [[people[2 * g], people[2 * g + 1]] for g in range(n_groups)]
    order = list(range(n_groups))
    rng.shuffle(order)
    for j in range(n_shared):
        for g in (order[(2 * j) % n_groups], order[(2 * j + 1) % n_groups]):
            groups[g].append(people[2 * n_groups + j])
    for g, members in enumerate(groups):
        for p in members:
            p.groups.append(g)
    return people, groups


def make_sessions(rng: random.Random, groups: list[list[Person]]) -> list[Session]:
    """SESSIONS_PER_GROUP dated sessions per group, a week to five apart, sorted by date."""
    sessions = []
    for g, members in enumerate(groups):
        day = dt.date(2022, 1, 3) + dt.timedelta(days=rng.randint(0, 540))
        for k in range(1, SESSIONS_PER_GROUP + 1):
            hour, minute = rng.randint(8, 21), rng.choice(range(0, 60, 5))
            time = f"{(hour - 1) % 12 + 1}:{minute:02d} {'am' if hour < 12 else 'pm'}"
            sessions.append(Session(g, k, day, time, list(members)))
            day += dt.timedelta(days=rng.randint(6, 38))
    return sorted(sessions, key=lambda s: (s.date, s.group))


def plan_facts(rng: random.Random, pools: Pools, person: Person, n_sessions: int) -> list[Fact]:
    """What one person will say over the timeline: static facts, events, changing attributes."""
    facts = []

    def add(kind: str, **kw) -> None:
        facts.append(Fact(kind, person, KINDS[kind].make(pools, rng, person), **kw))

    add("adopt" if rng.random() < 0.6 else "pet")
    for kind in STATIC_KINDS:
        add(kind)
    kinds = rng.sample(EVENT_KINDS, len(EVENT_KINDS)) + rng.sample(REPEATABLE, len(REPEATABLE))
    for kind in kinds[:round(EVENTS_PER_SESSION * n_sessions)]:
        add(kind)
    for f in facts:
        if KINDS[f.kind].event:
            f.when = rng.choice(WHENS)
    for attr in ("city", "work", "team", "flatmate"):
        if attr == "flatmate" and rng.random() < 0.4:
            continue
        steps = 3 if rng.random() < 0.4 else 2
        sport = rng.choice(v.SPORTS)
        used: set[str] = set()
        for step in range(steps):
            val = _fresh(rng, pools, attr, used)
            window = (0.0, 0.3) if step == 0 else ((0.3, 1.0) if steps == 2 else
                                                   ((0.3, 0.65), (0.65, 1.0))[step - 1])
            facts.append(Fact(attr, person, {"val": val, "sport": sport}, window,
                              rng.choice(WHENS) if step else "", step))
    return facts


def _fresh(rng: random.Random, pools: Pools, attr: str, used: set[str]) -> str:
    """A value of a changing attribute this person has not had before."""
    while True:
        if attr == "flatmate":
            val = other_name(pools, rng)[0]
        else:
            source = {"city": "city", "work": "company", "team": "team"}[attr]
            val = pools.draw(source, POOLS[source])
        if val not in used:
            used.add(val)
            return val


def place_facts(rng: random.Random, facts: list[Fact], sessions: list[Session]) -> None:
    """Put each fact in one of the person's sessions inside its window, least-loaded first;
    the steps of a changing attribute land in strictly later sessions."""
    n = len(sessions)
    last_step: dict[str, int] = {}
    ordered = [f for f in facts if f.kind in UPDATED] + [f for f in facts if f.kind not in UPDATED]
    for f in ordered:   # planned in step order, so each step knows where the one before went
        lo = min(int(f.window[0] * n), n - 1)
        if f.kind in UPDATED and f.step:
            lo = min(max(lo, last_step[f.kind] + 1), n - 1)
        hi = max(lo + 1, min(n, math.ceil(f.window[1] * n)))
        i = min(range(lo, hi), key=lambda i: (len(sessions[i].facts), rng.random()))
        sessions[i].facts.append(f)
        if f.kind in UPDATED:
            last_step[f.kind] = i


# ---------------------------------------------------------------- sessions as text

def _cap(text: str) -> str:
    return text[:1].upper() + _articles(text[1:])


def _articles(text: str) -> str:
    """ "a olive tree" -> "an olive tree" (templates write "a {thing}")."""
    return re.sub(r"\b([Aa]) (?=[aeiou])", r"\1n ", text)


def render(rng: random.Random, s: Session, callbacks: dict[str, list[str]]) -> str:
    """The session's text; records each fact's episode, key line and date, and adds the
    remarks that will mention its entities again in the person's later sessions.

    Turns alternate between speakers and hold one to three sentences each, as in real chats:
    a reaction to the last news, the speaker's own news (facts), a remark or small talk."""
    people = list(s.people)
    rng.shuffle(people)
    lines = [f"[{s.time} on {fmt_date(s.date)}] Session {s.number} — {_names(s.people)}"]
    # Each person's queue of things to say: facts, remarks on earlier sessions, small talk.
    queue: dict[str, list] = {p.name: [] for p in people}
    for f in s.facts:
        queue[f.person.name].append(f)
    for p in people:
        old = callbacks[p.name]
        queue[p.name] += rng.sample(old, min(rng.randint(0, 2), len(old)))
    for _ in range(rng.randint(1, 2)):
        queue[rng.choice(people).name].append(rng.choice(v.FILLERS))
    for p in people:
        rng.shuffle(queue[p.name])
    news = False     # did the last turn carry news worth a reaction?
    speaker = people[0]
    first = [rng.choice(v.GREETINGS).format(o=people[1].name)]
    while any(queue.values()) or first:
        said, items, greeting = first, queue[speaker.name], bool(first)
        first = []
        if news and rng.random() < 0.6:
            said.append(rng.choice(v.REACTIONS))
        news = False
        alone = not any(queue[p.name] for p in people if p is not speaker)
        for _ in range(min(len(items), 3 if alone else rng.choice((1, 2, 2)))):
            item = items.pop(0)
            if isinstance(item, str):
                said.append(_cap(item))
                continue
            parts = say_updated(item, rng) if item.kind in UPDATED else KINDS[item.kind].say(item, rng)
            said.append(_cap(parts[0][1]))
            _placed(item, s, len(lines), callbacks, len(parts) > 1)
            news = True
            if len(parts) > 1:      # "What did you name her?" asked by someone else, then answered
                lines.append(f"{speaker.name}: " + _cap(" ".join(said)))
                asker = _next(rng, people, speaker, queue)
                lines.append(f"{asker.name}: " + _cap(parts[1][1]))
                said = [parts[2][1]]
                break
        if not said:
            said = [rng.choice(v.FILLER_REPLIES)]
        if rng.random() < SMALL_TALK:
            said.insert(rng.randint(int(greeting), len(said)), rng.choice(v.FILLERS))
        lines.append(f"{speaker.name}: " + _cap(" ".join(said)))
        speaker = _next(rng, people, speaker, queue)
    lines.append(f"{speaker.name}: " + rng.choice(v.CLOSINGS))
    lines.append(f"{_next(rng, people, speaker, queue).name}: " + rng.choice(v.CLOSING_REPLIES))
    return "\n".join(lines)


def _next(rng: random.Random, people: list[Person], current: Person, queue: dict[str, list]) -> Person:
    """Whoever speaks after `current`: someone else, preferably with something left to say."""
    others = [p for p in people if p is not current]
    return rng.choice([p for p in others if queue[p.name]] or others)


def _placed(f: Fact, s: Session, line: int, callbacks: dict[str, list[str]], split: bool) -> None:
    """Record where the fact was said; its entities may come up again in later sessions."""
    f.episode, f.lines = s.id, [line, line + 2] if split else [line]
    f.date = fmt_date(s.date - dt.timedelta(days=1 if f.when == "yesterday" else 0))
    templates = UPDATED[f.kind].callbacks if f.kind in UPDATED else KINDS[f.kind].callbacks
    callbacks[f.person.name] += [t.format(**f.slots) for t in templates]


# ---------------------------------------------------------------- questions

@dataclass
class Question:
    category: str
    question: str
    answer: str
    facts: list[Fact]


def _month(date: str) -> str:
    _, month, year = date.replace(",", "").split()
    return f"{month} {year}"


def fact_questions(rng: random.Random, facts: list[Fact]) -> list[Question]:
    out = []
    for f in facts:
        if f.kind in UPDATED:
            continue
        for cat, q, a in KINDS[f.kind].ask(f):
            if cat == "temporal":
                a = f.date
                if rng.random() < MONTH_QUESTIONS:
                    q, a = "In which month did" + q[len("When did"):], _month(f.date)
            out.append(Question(cat, q, a, [f]))
    return out


def updated_questions(facts: list[Fact]) -> list[Question]:
    """Latest value of each changing attribute, the date of each change, the value before."""
    out = []
    by_attr: dict[str, list[Fact]] = defaultdict(list)
    for f in facts:
        if f.kind in UPDATED:
            by_attr[f.kind].append(f)
    for attr, steps in by_attr.items():
        steps.sort(key=lambda f: f.step)
        change = UPDATED[attr]
        name, last = steps[0].person.name, steps[-1]
        out.append(Question("updated", change.now_q.format(P=name), last.slots["val"], [last]))
        if change.when_q:
            for f in steps[1:]:
                out.append(Question("temporal", f"When did {name} {change.when_q.format(val=f.slots['val'])}?",
                                    f.date, [f]))
        if last.episode != steps[-2].episode:
            out.append(Question("multi-hop", change.before_q.format(P=name, val=last.slots["val"]),
                                steps[-2].slots["val"], [steps[-2], last]))
    return out


TARGETS = {  # static fact kind -> multi-hop question about "the person who {desc}"
    "adopt": ("What is the name of the {kind} owned by the person who {desc}?", "pet"),
    "pet": ("What is the name of the {kind} owned by the person who {desc}?", "pet"),
    "sibling": ("What is the name of the {rel} of the person who {desc}?", "sib"),
    "instrument": ("What instrument is the person who {desc} learning to play?", "inst"),
    "hometown": ("Where did the person who {desc} grow up?", "town"),
    "dessert": ("What is the favourite dessert of the person who {desc}?", "dessert"),
}


def describe(f: Fact) -> str:
    return KINDS[f.kind].describe.format(poss=f.person.poss, **f.slots)


def multi_hop_questions(rng: random.Random, facts: list[Fact], unique: set[str], n: int) -> list[Question]:
    """Up to n questions joining an event that singles the person out with a fact about them."""
    events = [f for f in facts if f.kind in KINDS and KINDS[f.kind].describe and describe(f) in unique]
    targets = [f for f in facts if f.kind in TARGETS]
    rng.shuffle(events)
    rng.shuffle(targets)
    out = []
    for target in targets:
        event = next((e for e in events if e.episode != target.episode and e.kind != target.kind), None)
        if event is None or len(out) >= n:
            continue
        events.remove(event)
        template, slot = TARGETS[target.kind]
        q = template.format(desc=describe(event), **target.slots)
        out.append(Question("multi-hop", q, target.slots[slot], [event, target]))
    return out


# ---------------------------------------------------------------- the task

def generate_sample(seed: int = DEFAULT_SEED, size: float = DEFAULT_SIZE) -> Task:
    """The sample task for (seed, size); see the module docstring."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"sample task: seed must be an integer, got {seed!r}")
    if not isinstance(size, (int, float)) or isinstance(size, bool) or not 0 < size <= MAX_SIZE:
        raise ValueError(f"sample task: size must be a number in (0, {MAX_SIZE}], got {size!r}")
    rng = random.Random(f"mstar-sample:{seed}:{float(size)!r}")
    pools = Pools(rng)
    people, groups = make_people(rng, max(1, round(GROUPS_PER_SIZE * size)))
    sessions = make_sessions(rng, groups)
    facts: dict[str, list[Fact]] = {}
    for p in people:
        mine = [s for s in sessions if s.group in p.groups]
        facts[p.name] = plan_facts(rng, pools, p, len(mine))
        place_facts(rng, facts[p.name], mine)
    callbacks: dict[str, list[str]] = {p.name: [] for p in people}
    episodes = []
    for s in sessions:
        rng.shuffle(s.facts)
        text = render(rng, s, callbacks)
        episodes.append(Episode(s.id, text, {"conversation": f"c{s.group + 1}", "session": s.number,
                                             "date": fmt_date(s.date), "time": s.time,
                                             "speakers": [p.name for p in s.people]}))
    descs = [describe(f) for fs in facts.values() for f in fs if f.kind in KINDS and KINDS[f.kind].describe]
    unique = {d for d in descs if descs.count(d) == 1}
    questions: list[Question] = []
    for p in people:
        questions += fact_questions(rng, facts[p.name]) + updated_questions(facts[p.name])
        questions += multi_hop_questions(rng, facts[p.name], unique, 3)
    texts = {ep.id: ep.text.split("\n") for ep in episodes}
    items = [_item(i, q, texts) for i, q in enumerate(questions, 1)]
    val_ids: set[str] = set()
    for cat in sorted({q.category for q in items}):
        ids = [q.id for q in items if q.category == cat]
        val_ids |= set(rng.sample(ids, round(VAL_FRACTION * len(ids))))
    n_groups = len(groups)
    return Task(
        name="sample",
        episodes=tuple(episodes),
        validation=tuple(q for q in items if q.id in val_ids),
        test=tuple(q for q in items if q.id not in val_ids),
        metric_name="token_f1",
        description=(f"Procedurally generated multi-session chats (mstar.tasks.sample_gen, seed {seed}, "
                     f"size {size:g}): {n_groups} groups of friends, {SESSIONS_PER_GROUP} dated sessions "
                     f"each; facts change over time and entities recur. Questions: single-hop, temporal, "
                     f"updated (latest value), multi-hop (two sessions); token F1. Invented for mstar."),
    )


def _item(i: int, q: Question, texts: dict[str, list[str]]) -> QueryItem:
    evidence = list(dict.fromkeys(f.episode for f in q.facts))
    turns = [f"{f.episode}:{line}" for f in q.facts for line in f.lines]
    meta = {"conversation": evidence[0].split("_")[0], "evidence": evidence, "answer_turns": turns}
    # The memory X-ray's evidence (mstar.tasks.evidence): the lines that state the facts, and for
    # a temporal question the date line of the session it was said in -- the answer is there.
    units = [unit(t, texts[t.split(":")[0]][int(t.split(":")[1])], t.split(":")[0]) for t in turns]
    if q.category == "temporal":
        units += [unit(f"{ep}:0", texts[ep][0], ep) for ep in evidence]
    return QueryItem(f"q{i:04d}", _articles(q.question), q.answer, q.category, with_evidence(meta, units, []))

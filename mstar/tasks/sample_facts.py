"""Fact kinds of the procedural sample task: what a person says, and what is asked about it.

Each `FactKind` knows how to fill its slots from the world's name pools (`make`), how the
person says it in a session (`say`: one or more turns; a template's `{w}` / `{W}` is the time
word of the event, " today" inside or "Yesterday, " in front of the sentence, or nothing),
which later remarks mention the same entity without repeating the answer
(`callbacks`: recurring entities that pull retrieval towards the wrong session), and which
questions it answers (`ask`: single-hop details and temporal "When did ...?" questions).
Updated and multi-hop questions combine several facts and are built in mstar/tasks/sample_gen.py.

Phrasing is chosen so that an answer is a contiguous span next to words of its question
("I play for the Riverside Otters now" answers "Which team does Ines play for now?"), so an
extractive answerer can produce it once memory hands it the right turn, with the right date.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

from mstar.tasks import sample_vocab as v


@dataclass
class Person:
    name: str
    she: bool
    groups: list[int] = field(default_factory=list)

    @property
    def poss(self) -> str:
        return "her" if self.she else "his"


@dataclass
class Fact:
    kind: str
    person: Person
    slots: dict[str, str]
    window: tuple[float, float] = (0.0, 1.0)   # where in the person's sessions it may be said
    when: str = ""                             # "", "today", "this morning", "yesterday"
    step: int = 0                              # position in an updated sequence (0 = first)
    episode: str = ""                          # filled when placed: episode id,
    lines: list[int] = field(default_factory=list)   # lines of its turns,
    date: str = ""                             # and the date the event happened


class Pools:
    """Seeded draws from the vocabulary: without replacement until a list runs out, then again."""

    def __init__(self, rng: random.Random):
        self.rng, self.left = rng, {}

    def draw(self, name: str, items) -> str:
        if not self.left.get(name):
            items = list(items)
            self.rng.shuffle(items)
            self.left[name] = items
        return self.left[name].pop()


def _product(heads, tails, sep=" ") -> tuple[str, ...]:
    return tuple(f"{h}{sep}{t}" for h in heads for t in tails)


POOLS: dict[str, tuple[str, ...]] = {
    "town": _product(v.TOWN_HEADS, v.TOWN_TAILS, ""),
    "company": _product(v.COMPANY_HEADS, v.COMPANY_TAILS),
    "team": _product(v.TEAM_HEADS, v.TEAM_TAILS),
    "race": _product(v.RACE_PLACES, v.RACE_KINDS),
    "band": _product(v.BAND_HEADS, v.BAND_TAILS),
    "book": _product(v.BOOK_HEADS, v.BOOK_TAILS),
    "studio": _product(v.STUDIO_HEADS, v.STUDIO_TAILS),
    "pet": v.PET_NAMES, "city": v.CITIES, "author": v.AUTHORS, "venue": v.VENUES,
    "she": v.OTHERS_SHE, "he": v.OTHERS_HE,
}


def other_name(pools: Pools, rng: random.Random) -> tuple[str, bool]:
    she = rng.random() < 0.5
    return pools.draw("she" if she else "he", POOLS["she" if she else "he"]), she


def companion(pools: Pools, rng: random.Random) -> dict[str, str]:
    """Someone who came along: {"comp": "aunt", "cname": "Petra"}."""
    name, she = other_name(pools, rng)
    return {"comp": rng.choice(v.COMPANIONS + (v.COMPANIONS_SHE if she else v.COMPANIONS_HE)), "cname": name}


Say = Callable[[Fact, random.Random], list[tuple[str, str]]]   # [(who: "self"|"other", text)]
Ask = Callable[[Fact], list[tuple[str, str, str]]]              # [(category, question, answer)]


@dataclass(frozen=True)
class FactKind:
    make: Callable[[Pools, random.Random, Person], dict[str, str]]
    say: Say
    ask: Ask
    callbacks: tuple[str, ...] = ()
    event: bool = True          # a dated one-off event (gets a {when} word and a temporal question)
    describe: str = ""          # "the person who ..." phrase for multi-hop questions ("" = none)


def _when(fact: Fact, lead: bool = False) -> str:
    """" today" inside a sentence, or "Today, " in front of it (lead=True); "" without one."""
    if not fact.when:
        return ""
    return f"{fact.when[0].upper()}{fact.when[1:]}, " if lead else f" {fact.when}"


def _one(*templates: str) -> Say:
    """A say() that picks one template: a single turn by the person."""
    def say(fact: Fact, rng: random.Random) -> list[tuple[str, str]]:
        t = rng.choice(templates)
        return [("self", t.format(**fact.slots, w=_when(fact), W=_when(fact, True)))]
    return say


def _when_q(verb_phrase: str) -> Ask:
    """"When did Ines {verb_phrase}?"; the answer, the event's date, is filled in once it is placed."""
    return lambda f: [("temporal", f"When did {f.person.name} {verb_phrase.format(**f.slots, poss=f.person.poss)}?", "")]


def _asks(*parts: Ask) -> Ask:
    return lambda f: [q for part in parts for q in part(f)]


def _single(question: str, answer_slot: str) -> Ask:
    return lambda f: [("single-hop", question.format(P=f.person.name, poss=f.person.poss, **f.slots),
                       f.slots[answer_slot])]


# ---------------------------------------------------------------- kinds

def _adopt_say(fact: Fact, rng: random.Random) -> list[tuple[str, str]]:
    s, W = fact.slots, _when(fact, True)
    if rng.random() < 0.2:   # the name comes in a second turn, after a question
        return [("self", f"{W}we adopted a {s['kind']} from the shelter!"),
                ("other", f"A {s['kind']}! What did you name {s['pp']}?"),
                ("self", f"{s['pet']}. It suits {s['pp']} perfectly.")]
    return [("self", rng.choice((
        f"{W}we adopted a {s['kind']} from the shelter and named {s['pp']} {s['pet']}.",
        f"{W}we adopted a {s['kind']}, we named {s['pp']} {s['pet']} and the flat is chaos.",
    )))]


KINDS: dict[str, FactKind] = {
    "adopt": FactKind(
        lambda p, r, who: {"kind": r.choice(v.PET_KINDS), "pet": p.draw("pet", POOLS["pet"]),
                           "pp": r.choice(("her", "him"))},
        _adopt_say,
        _asks(_single("What is the name of {P}'s {kind}?", "pet"), _when_q("adopt a {kind}")),
        ("{pet} chewed through my headphone cable again.", "Sorry, {pet} just walked across my keyboard.",
         "{pet} has worked out how to open the cupboard, help."),
        describe="adopted a {kind} named {pet}"),
    "pet": FactKind(
        lambda p, r, who: {"kind": r.choice(v.PET_KINDS), "pet": p.draw("pet", POOLS["pet"])},
        _one("Sorry about the noise, that is my {kind} {pet} demanding dinner.",
             "My {kind} {pet} turned twelve, so we got a tiny cake."),
        _single("What is the name of {P}'s {kind}?", "pet"),
        ("{pet} is asleep on my feet as we speak.", "{pet} refused to eat anything but cheese."),
        event=False),
    "sibling": FactKind(
        lambda p, r, who: (lambda name, she: {"sib": name, "rel": "sister" if she else "brother"})(*other_name(p, r)),
        _one("My {rel} {sib} just got a place at art school.",
             "My {rel} {sib} is staying with me for a few days.",
             "I had lunch with my {rel} {sib}, who says hello."),
        _single("What is the name of {P}'s {rel}?", "sib"),
        ("{sib} borrowed my umbrella and never gave it back.", "{sib} keeps sending me memes at midnight."),
        event=False),
    "instrument": FactKind(
        lambda p, r, who: {"inst": r.choice(v.INSTRUMENTS)},
        _one("I have started learning to play the {inst}. The neighbours are very patient.",
             "I am learning to play the {inst} now. Scales every evening."),
        _single("What instrument is {P} learning to play?", "inst"),
        ("My fingers are sore from practising scales.", "My teacher says my timing is getting better."),
        event=False),
    "hometown": FactKind(
        lambda p, r, who: {"town": p.draw("town", POOLS["town"])},
        _one("Growing up in {town}, we had one shop and a bus twice a day.",
             "It reminds me of growing up in {town}, where everyone knew everyone."),
        _single("Where did {P} grow up?", "town"),
        ("My mum still posts me the {town} newsletter.",),
        event=False),
    "dessert": FactKind(
        lambda p, r, who: {"dessert": r.choice(v.DESSERTS)},
        _one("My favourite dessert is {dessert}, no contest.",
             "Honestly my favourite dessert is {dessert}. I could eat it daily."),
        _single("What is {P}'s favourite dessert?", "dessert"),
        event=False),
    "race": FactKind(
        lambda p, r, who: {"race": p.draw("race", POOLS["race"]), **companion(p, r)},
        _one("{W}I finished running the {race}, with my {comp} {cname} beside me the whole way.",
             "{W}I finished running the {race}! My {comp} {cname} ran it with me."),
        _asks(_when_q("run the {race}"), _single("Who ran the {race} with {P}?", "cname")),
        ("My legs still ache from the {race}.", "I am already eyeing next year's {race}."),
        describe="ran the {race}"),
    "visit": FactKind(
        lambda p, r, who: {"city": p.draw("city", POOLS["city"]), **companion(p, r)},
        _one("I got back{w} from visiting {city} with my {comp} {cname}.",
             "{W}I got home from visiting {city}. My {comp} {cname} planned the whole trip."),
        _asks(_when_q("visit {city}"), _single("Who did {P} visit {city} with?", "cname")),
        ("I am still sorting the photos from {city}.", "I miss the food in {city} already."),
        describe="visited {city}"),
    "buy": FactKind(
        lambda p, r, who: {"item": r.choice(v.ITEMS), "colour": r.choice(v.COLOURS)},
        _one("I bought a {colour} {item}{w} and I keep staring at it.",
             "{W}I bought a {colour} {item}. Best money I ever spent."),
        _asks(_when_q("buy the {colour} {item}"), _single("What colour is the {item} {P} bought?", "colour")),
        ("The {item} needs a proper cover before winter.", "I took the {item} out again at the weekend."),
        describe="bought a {colour} {item}"),
    "class": FactKind(
        lambda p, r, who: {"cls": r.choice(v.CLASSES), "studio": p.draw("studio", POOLS["studio"])},
        _one("{W}I started {cls} classes at the {studio}.",
             "{W}I started {cls} classes. They run them at the {studio}."),
        _asks(_when_q("start {cls} classes"), _single("Where does {P} take {cls} classes?", "studio")),
        ("My {cls} teacher says I am improving.",),
        describe="takes {cls} classes"),
    "injury": FactKind(
        lambda p, r, who: {"part": r.choice(v.INJURIES), "how": r.choice(
            ("falling off a ladder", "slipping on wet leaves", "tripping over a suitcase",
             "playing squash", "carrying a bookcase", "jumping off a wall"))},
        _one("{W}I broke my {part} {how}, so typing is slow.",
             "{W}I broke my {part}. It happened {how}, which is embarrassing."),
        _asks(_when_q("break {poss} {part}")),
        ("The cast comes off soon, thank goodness.",)),
    "book": FactKind(
        lambda p, r, who: {"title": p.draw("book", POOLS["book"]), "author": p.draw("author", POOLS["author"])},
        _one("I finished reading {title}{w}. It is by {author} and I loved it.",
             "{W}I finished reading {title}, the new one by {author}."),
        _asks(_when_q("finish reading {title}"), lambda f: [("single-hop", f"Who wrote {f.slots['title']}?",
                                                             f.slots["author"])]),
        ("I keep thinking about the ending of {title}.",),
        describe="finished reading {title}"),
    "concert": FactKind(
        lambda p, r, who: {"band": p.draw("band", POOLS["band"]), "venue": p.draw("venue", POOLS["venue"])},
        _one("{W}I saw {band} play live at the {venue}. My ears are still ringing.",
             "{W}I saw {band} live! They played at the {venue} and it was packed."),
        _asks(_when_q("see {band} live"), _single("Where did {P} see {band} play?", "venue")),
        ("I have had a {band} song stuck in my head for days.",),
        describe="saw {band} at the {venue}"),
    "paint": FactKind(
        lambda p, r, who: {"room": r.choice(v.ROOMS), "colour": r.choice(v.COLOURS)},
        _one("{W}we painted the {room} {colour}, it looks like a new flat.",
             "{W}we painted the {room}. We went with {colour} in the end."),
        _asks(_when_q("paint the {room}"), _single("What colour did {P} paint the {room}?", "colour")),
        ("There are still drips on the {room} floor.",)),
    "engaged": FactKind(
        lambda p, r, who: {"partner": other_name(p, r)[0]},
        _one("{partner} proposed{w} and we are engaged!", "{W}{partner} asked me to marry them and we are engaged."),
        _asks(_when_q("get engaged"), _single("Who is {P} engaged to?", "partner")),
        ("{partner} wants a wedding on a boat, I want one in a barn.",),
        describe="got engaged to {partner}"),
    "plant": FactKind(
        lambda p, r, who: {"tree": r.choice(v.TREES)},
        _one("I planted a {tree} tree in the garden{w}.", "{W}I planted a {tree} tree by the back fence."),
        _asks(_when_q("plant a {tree} tree")),
        ("The birds have already found the new tree.",)),
    "host": FactKind(
        lambda p, r, who: {"dish": r.choice(v.DISHES), "guests": r.choice(
            ("six", "seven", "eight", "nine", "eleven", "twelve", "fourteen", "fifteen", "sixteen")) + " guests"},
        _one("We hosted a {dish} night{w} and {guests} squeezed into the flat.",
             "{W}we hosted a {dish} night and {guests} came, which was too many."),
        _asks(_when_q("host a {dish} night"), _single("How many guests came to {P}'s {dish} night?", "guests")),
        ("We are still finding napkins from the {dish} night.",),
        describe="hosted a {dish} night"),
    "exam": FactKind(
        lambda p, r, who: {"exam": r.choice(v.EXAMS)},
        _one("I passed my {exam}{w}!", "{W}I passed my {exam}. I was so nervous I could barely hold the pen."),
        _asks(_when_q("pass {poss} {exam}")),
        describe="passed {poss} {exam}"),
}
EVENT_KINDS = tuple(k for k, kind in KINDS.items() if kind.event and k != "adopt")
# Events whose object is drawn from a name pool, so a person can do them twice unambiguously.
REPEATABLE = ("race", "visit", "book", "concert")
STATIC_KINDS = ("sibling", "instrument", "hometown", "dessert")

@dataclass(frozen=True)
class Changing:
    """An attribute that changes over time; `{val}` is its value, `{P}` the person."""
    first: str                    # how the first value is said
    later: tuple[str, ...]        # how a change is said
    now_q: str                    # updated question: its gold is the latest value
    when_q: str                   # temporal question about a change ("" = none)
    before_q: str                 # multi-hop question: the value before the latest
    callbacks: tuple[str, ...]    # later remarks about the value


UPDATED: dict[str, Changing] = {
    "city": Changing(
        "I have lived in {val} for years now and I still love it.",
        ("We moved to {val}{w}, so I live in {val} now.", "{W}we moved house: I live in {val} now."),
        "Where does {P} live now?", "move to {val}", "Where did {P} live before moving to {val}?",
        ("The trams in {val} are always late.", "{val} is so hilly, my calves are enormous.")),
    "work": Changing(
        "I work at {val}, the people there are lovely.",
        ("I started a new job{w}: I work at {val} now.", "{W}I started at {val}, so I work at {val} now."),
        "Where does {P} work now?", "start working at {val}", "Where did {P} work before joining {val}?",
        ("Things at {val} are hectic this month.", "{val} is doing a summer party this year.")),
    "team": Changing(
        "I joined a local {sport} team: I play for the {val} now.",
        ("I switched to a new team{w}: I play for the {val} now.",
         "{W}I changed team, so I play for the {val} now."),
        "Which team does {P} play for now?", "", "Which team did {P} play for before the {val}?",
        ("We lost again at the weekend, but we played well.", "Training was freezing on Tuesday.")),
    "flatmate": Changing(
        "My flatmate is {val}, who sings in the shower every morning.",
        ("I have a new flatmate{w}: my flatmate is {val} now.",
         "{W}a new flatmate moved in, so my flatmate is {val} now."),
        "Who is {P}'s flatmate now?", "", "Who was {P}'s flatmate before {val}?",
        ("{val} left the oven on again.", "{val} and I finally split the bills properly.")),
}


def say_updated(fact: Fact, rng: random.Random) -> list[tuple[str, str]]:
    change = UPDATED[fact.kind]
    t = change.first if fact.step == 0 else rng.choice(change.later)
    return [("self", t.format(**fact.slots, w=_when(fact), W=_when(fact, True)))]

"""What the offline act policy learns from retrieved memory: goals, places and procedures.

The offline task agent (act_policy.py) plays text household games without an LLM. Whatever a
memory program returned -- whole expert trajectories, 500-character chunks of them, lessons, a
cheatsheet, ALWAYS_ON_KNOWLEDGE -- is read for three kinds of evidence:
  places      where objects of a class were found: "take apple 1 from countertop 2" in a
              trajectory (strong), "On the countertop 2, you see a apple 1" or any line naming
              the class and a receptacle of this room (weak);
  procedures  which receptacle a goal verb needs: "heat apple 1 with microwave 1", or a line
              that names the verb ("heat", "hot", "warm") and a receptacle class of this room;
              for look-at-in-light goals, where the lamp is ("go to sidetable 1" before
              "use desklamp 1", or a line naming the lamp and a receptacle);
  targets     which instance of the goal receptacle the expert put things in.
Evidence from a trajectory whose goal matches the current one (same kind, object, receptacle)
counts more. Goals are ALFWorld's templates ("put a hot apple in fridge", "look at book under
the desklamp", "find two pen and put them in drawer"); `parse_goal` reads them.
Pure functions over text; nothing is remembered between calls.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

ENTITY = r"[a-z]+ \d+"
_VERB_OF = {"clean": "clean", "hot": "heat", "heat": "heat", "heated": "heat", "cool": "cool",
            "cold": "cool", "cooled": "cool", "chilled": "cool"}
_VERB_WORDS = {"clean": ("clean", "wash", "rinse"), "heat": ("heat", "hot", "warm", "cook"),
               "cool": ("cool", "cold", "chill", "refrigerat")}
_COMMAND_START = re.compile(r"^(?:go to|take|move|put|open|close|heat|cool|clean|use|examine|look|"
                            r"inventory|toggle|slice)\b")
_LEAD = re.compile(r"^\s*(?:>+|[-*•]|\d+[.)]|(?:step\s*\d+|act(?:ion)?\s*\d*|command)\s*[:.)])\s*", re.I)


@dataclass(frozen=True)
class Goal:
    kind: str          # simple | clean | heat | cool | two | light | unknown
    obj: str = ""      # object class, e.g. "apple"
    target: str = ""   # receptacle class, e.g. "fridge" ("" for light)
    tool: str = ""     # light: the lamp class, e.g. "desklamp"


def parse_goal(text: str) -> Goal:
    g = " ".join((text or "").lower().replace("your task is to:", "").split()).strip(" .")
    m = re.match(r"(?:look at|examine) (?:the |a |an |some )?(\w+) (?:under|with|using) (?:the |a )?(\w+)$", g)
    if m:
        return Goal("light", m.group(1), "", m.group(2))
    m = re.match(r"(?:put|find|place) two (\w+?)s? (?:and put them )?(?:in|on|into) (?:the |a )?(\w+)$", g)
    if m:
        return Goal("two", m.group(1), m.group(2))
    m = re.match(r"(?:put|place) (?:a|an|some|the) (clean|hot|heated|cool|cold|cooled|chilled) (\w+) "
                 r"(?:in|on|into) (?:the |a )?(\w+)$", g)
    if m:
        return Goal(_VERB_OF[m.group(1)], m.group(2), m.group(3))
    m = re.match(r"(clean|heat|cool) (?:some|a|an|the) (\w+) and put it (?:in|on|into) (?:the |a )?(\w+)$", g)
    if m:
        return Goal(m.group(1), m.group(2), m.group(3))
    m = re.match(r"(?:put|place) (?:a|an|some|the) (\w+) (?:in|on|into) (?:the |a )?(\w+)$", g)
    if m:
        return Goal("simple", m.group(1), m.group(2))
    return Goal("unknown")


def cls(entity: str) -> str:
    """"apple 1" -> "apple"."""
    return entity.rsplit(" ", 1)[0] if re.fullmatch(ENTITY, entity) else entity


def command_pieces(line: str) -> list[str]:
    """The commands written on one memory line: "> go to x 1", "Action: take ...", or a plan
    joined by " > ", "->", "→" or ";". Empty when the line is not a command line."""
    text = line.strip().lower()
    if not text:
        return []
    pieces = re.split(r"\s*(?:\s>\s|->|→|;)\s*", _LEAD.sub("", text))
    out = [p.strip(" .") for p in pieces if _COMMAND_START.match(p.strip(" ."))]
    return out if (out and (text.startswith(">") or len(out) == len([p for p in pieces if p.strip()])
                            or _LEAD.match(text))) else []


@dataclass
class Segment:
    goal: Goal
    commands: list[str] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)


def segments(memory: str) -> list[Segment]:
    """Memory split at goal lines ("Your task is to: ...", "Task: ...", "Goal: ...")."""
    out = [Segment(Goal("unknown"))]
    for raw in (memory or "").splitlines():
        line = raw.strip()
        m = re.search(r"(?:task is to|^task|^goal|^instruction)\s*:\s*(.+)$", line, re.I)
        if m and parse_goal(m.group(1)).kind != "unknown":
            out.append(Segment(parse_goal(m.group(1))))
            continue
        out[-1].lines.append(line.lower())
        out[-1].commands += command_pieces(line)
    return [s for s in out if s.lines or s.commands or s.goal.kind != "unknown"]


def match_weight(goal: Goal, other: Goal) -> float:
    """How much a memory segment's goal tells about the current goal: 1 (unrelated or unknown)
    up to 8 (same kind, object and receptacle)."""
    if other.kind == "unknown" or goal.kind == "unknown":
        return 1.0
    w = 1.0
    if other.kind == goal.kind:
        w += 3
    if other.obj and other.obj == goal.obj:
        w += 3
    if other.target and other.target == goal.target:
        w += 1
    return w


@dataclass
class Hints:
    places: dict[str, float] = field(default_factory=dict)     # receptacle -> evidence for the object
    appliance: dict[str, float] = field(default_factory=dict)  # receptacle class -> evidence for the verb
    lamp_places: dict[str, float] = field(default_factory=dict)
    targets: dict[str, float] = field(default_factory=dict)    # target instance -> evidence

    def ranked(self, table: str) -> list[str]:
        scores = getattr(self, table)
        return sorted(scores, key=lambda k: (-scores[k], k))


def read_hints(memory: str, goal: Goal, room: list[str]) -> Hints:
    """Evidence in `memory` for `goal` in a room whose receptacles are `room` (names like
    "cabinet 1"); names not in the room are ignored."""
    hints = Hints()
    if goal.kind == "unknown" or not memory.strip():
        return hints
    in_room = set(room)
    room_classes = {cls(r) for r in room}
    add = lambda table, key, w: table.__setitem__(key, table.get(key, 0.0) + w)  # noqa: E731
    verb = goal.kind if goal.kind in _VERB_WORDS else ""
    for seg in segments(memory):
        w = match_weight(goal, seg.goal)
        last_place = ""
        for c in seg.commands:
            m = re.match(rf"take ({ENTITY}) from ({ENTITY})$", c)
            if m and cls(m.group(1)) == goal.obj and m.group(2) in in_room:
                add(hints.places, m.group(2), 3 * w)
            m = re.match(rf"go to ({ENTITY})$", c)
            if m:
                last_place = m.group(1)
            m = re.match(rf"(heat|cool|clean) ({ENTITY}) with ({ENTITY})$", c)
            if m and m.group(1) == verb and cls(m.group(3)) in room_classes:
                add(hints.appliance, cls(m.group(3)), 3 * w)
            m = re.match(rf"use ({ENTITY})$", c)
            if m and goal.kind == "light" and cls(m.group(1)) == goal.tool and last_place in in_room:
                add(hints.lamp_places, last_place, 3 * w)
            m = re.match(rf"(?:move|put) ({ENTITY}) (?:to|in|on) ({ENTITY})$", c)
            if m and cls(m.group(1)) == goal.obj and cls(m.group(2)) == goal.target and m.group(2) in in_room:
                add(hints.targets, m.group(2), w)
        for line in seg.lines:
            if line.startswith(">"):
                continue
            named = [r for r in re.findall(ENTITY, line) if r in in_room]
            classes = [c for c in room_classes if re.search(rf"\b{re.escape(c)}s?\b", line)]
            if goal.obj and re.search(rf"\b{re.escape(goal.obj)}s?\b", line):
                for r in named:
                    add(hints.places, r, 0.5 * w)
            if goal.kind == "light" and goal.tool and goal.tool in line:
                for r in named:
                    add(hints.lamp_places, r, 0.5 * w)
            if verb and any(word in line for word in _VERB_WORDS[verb]):
                for c in classes:
                    if c not in (goal.obj, goal.target):
                        add(hints.appliance, c, 0.5 * w)
    return hints

"""Offline task agent for <task>act</task> prompts: one admissible command per step, no LLM.

It plays ALFWorld-style household games (mstar.interactive) deterministically, so that offline
evolution has an interactive task whose score responds to the memory program. Stateless: every
step rebuilds what it knows from the prompt --
  goal        from <task_goal> (act_memory.parse_goal)
  state       from <history> (only the last lines the prompt shows: what it holds, where it is,
              what it saw where, what it heated/cleaned/cooled, what it put in the target) and
              from <admissible_commands> (a "move x to y" means it holds x, a "take" means its
              hands are empty, an "open y" means y is closed)
  hints       from <retrieved_memory> (act_memory.read_hints: where the object was found, which
              appliance the goal's verb needs, where the lamp is, which target instance)
and then acts: take the goal object when it is here; with it in hand, apply the goal's verb when
the appliance is here, use the lamp when the lamp is here, put it in the target when at the
target; otherwise go where the hints point first and explore the room in its listed order,
opening closed receptacles it has not looked into (as far as its history shows). Without memory it
must discover places and appliances by exploring, which costs steps -- so a memory program that
returns a relevant expert trajectory wins more games within the step budget than one that
returns nothing. Unknown goals fall back to the first admissible command not tried recently.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from mstar.offline.act_memory import ENTITY, Goal, Hints, cls, parse_goal, read_hints
from mstar.offline.text import extract_tag


MAX_PLACE_HINTS = 3   # memory's best places for the object, tried before exploring


def natural_key(name: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


@dataclass
class State:
    at: str = ""
    holding: str = ""
    seen: dict[str, list[str]] = field(default_factory=dict)   # receptacle -> objects seen in it
    closed: set[str] = field(default_factory=set)
    visited: list[str] = field(default_factory=list)            # arrival order (recent window)
    visited_holding: set[str] = field(default_factory=set)      # arrived while holding the goal object
    done_verbs: set[tuple[str, str]] = field(default_factory=set)   # (verb, object)
    placed: list[tuple[str, str]] = field(default_factory=list)     # (object, receptacle)
    lamp_on: bool = False
    commands: list[str] = field(default_factory=list)
    failed: set[str] = field(default_factory=set)
    early: bool = False                                          # the first observation is in view


def _objects(listing: str) -> list[str]:
    return re.findall(ENTITY, listing)


def read_state(history: list[str], admissible: list[str], goal: Goal) -> State:
    s = State()
    last_cmd = ""
    for line in history:
        text = line.strip()
        if text.startswith(">"):
            last_cmd = text[1:].strip()
            s.commands.append(last_cmd)
            continue
        low = text.lower()
        if "you are in the middle of a room" in low and not s.commands:
            s.early = True
        if low.startswith("nothing happens") and last_cmd:
            s.failed.add(last_cmd)
        m = re.match(rf"you arrive at ({ENTITY})", low)
        if m:
            s.at = m.group(1)
            s.visited.append(s.at)
            if s.holding and cls(s.holding) == goal.obj:
                s.visited_holding.add(s.at)
        m = re.search(rf"(?:on the ({ENTITY}), you see|the ({ENTITY}) is open\. in it, you see) (.*)", low)
        if m:
            where = m.group(1) or m.group(2)
            s.seen[where] = _objects(m.group(3))
            s.closed.discard(where)
        m = re.search(rf"the ({ENTITY}) is closed", low)
        if m:
            s.closed.add(m.group(1))
        m = re.match(rf"you pick up the ({ENTITY}) from the ({ENTITY})", low)
        if m:
            s.holding = m.group(1)
            if m.group(2) in s.seen and m.group(1) in s.seen[m.group(2)]:
                s.seen[m.group(2)].remove(m.group(1))
        m = re.match(rf"you move the ({ENTITY}) to the ({ENTITY})", low)
        if m:
            s.holding = ""
            s.placed.append((m.group(1), m.group(2)))
            s.seen.setdefault(m.group(2), []).append(m.group(1))
        m = re.match(rf"you (heat|cool|clean) the ({ENTITY}) using", low)
        if m:
            s.done_verbs.add((m.group(1), m.group(2)))
        if re.match(r"you turn on the", low):
            s.lamp_on = True
    # The admissible commands are the freshest evidence of what is in hand and where we are.
    moves = [re.match(rf"move ({ENTITY}) to ({ENTITY})$", c) for c in admissible]
    moves = [m for m in moves if m]
    if moves:
        s.holding, s.at = moves[0].group(1), moves[0].group(2)
    elif any(c.startswith("take ") for c in admissible):
        s.holding = ""
    for c in admissible:
        m = re.match(rf"(?:open|close) ({ENTITY})$", c) or re.match(rf"take {ENTITY} from ({ENTITY})$", c)
        if m:
            s.at = m.group(1)
        m = re.match(rf"open ({ENTITY})$", c)
        if m:
            s.closed.add(m.group(1))
    return s


def _room(admissible: list[str], history: list[str], state: State) -> list[str]:
    """The receptacles of the room: every "go to" target (the one we stand at is not offered),
    where we stand, where we went, and the intro's list when it is still in the history."""
    names = {m.group(1) for c in admissible for m in [re.match(rf"go to ({ENTITY})$", c)] if m}
    names |= set(state.visited) | ({state.at} if state.at else set())
    for line in history:
        if "looking quickly around you, you see" in line.lower():
            names |= set(_objects(line.lower().split("you see", 1)[1]))
    return sorted(names, key=natural_key)


class Chooser:
    """One step's decision (see module docstring); `pick()` returns an admissible command."""

    def __init__(self, goal: Goal, state: State, admissible: list[str], room: list[str], hints: Hints):
        self.goal, self.s, self.adm, self.room, self.hints = goal, state, admissible, room, hints
        self.adm_set = set(admissible)

    def ok(self, command: str) -> bool:
        return command in self.adm_set and command not in self.s.failed

    def go(self, place: str) -> str | None:
        cmd = f"go to {place}"
        return cmd if place != self.s.at and self.ok(cmd) else None

    def explore_order(self, skip: set[str]) -> list[str]:
        """The room in its listed order, without `skip`. The agent knows only its history, so a
        receptacle whose visit scrolled out of view counts as unexplored again -- exploring a
        big room costs more than the steps it takes, as it does for an LLM with a short history."""
        return [r for r in self.room if r not in skip]

    def look_here(self) -> str | None:
        """Open the receptacle we stand at when we have not looked inside."""
        here = self.s.at
        if here and here not in self.s.seen and self.ok(f"open {here}"):
            return f"open {here}"
        return None

    def search(self, want: list[str], avoid_classes: set[str]) -> str | None:
        """Go where the wanted thing may be: hinted places first, then unexplored ones."""
        opened = self.look_here()
        if opened:
            return opened
        checked = set(self.s.seen)
        for place in want:
            if place not in checked and cls(place) not in avoid_classes:
                cmd = self.go(place)
                if cmd:
                    return cmd
        for place in self.explore_order(checked):
            if cls(place) not in avoid_classes:
                cmd = self.go(place)
                if cmd:
                    return cmd
        for place in self.explore_order(set()):   # everything seen: look again, in listed order
            cmd = self.go(place)
            if cmd:
                return cmd
        return None

    def pick(self) -> str:
        g, s = self.goal, self.s
        choice = self.decide() if g.kind != "unknown" else None
        if choice and choice in self.adm_set:
            return choice
        recent = set(s.commands[-6:])
        for c in self.adm:
            if c not in recent and c not in s.failed and not c.startswith(("examine", "inventory", "help")):
                return c
        return self.adm[0]

    def decide(self) -> str | None:
        g, s = self.goal, self.s
        holding_goal = bool(s.holding) and cls(s.holding) == g.obj
        if s.holding and not holding_goal and s.at:   # something else in hand: put it down here
            put = f"move {s.holding} to {s.at}"
            if self.ok(put):
                return put
        if not holding_goal:
            return self.find_object()
        if g.kind in ("clean", "heat", "cool") and (g.kind, s.holding) not in s.done_verbs:
            return self.transform()
        if g.kind == "light":
            return self.light()
        return self.place()

    def find_object(self) -> str | None:
        g, s = self.goal, self.s
        for c in self.adm:
            m = re.match(rf"take ({ENTITY}) from ({ENTITY})$", c)
            if m and cls(m.group(1)) == g.obj and cls(m.group(2)) != g.target and self.ok(c):
                return c
        known = [r for r, objs in s.seen.items() if any(cls(o) == g.obj for o in objs) and cls(r) != g.target]
        # Memory's places are tried early in the game only (while the first observation is still
        # in the history): later a visit to them may have scrolled out of view, and trying them
        # again on every pass would loop.
        hinted = self.hints.ranked("places")[:MAX_PLACE_HINTS] if s.early else []
        return self.search(known + hinted, {g.target} if g.kind == "two" else set())

    def transform(self) -> str | None:
        g, s = self.goal, self.s
        for c in self.adm:
            m = re.match(rf"{g.kind} ({ENTITY}) with ({ENTITY})$", c)
            if m and m.group(1) == s.holding and self.ok(c):
                return c
        wanted = [r for a in self.hints.ranked("appliance") for r in self.room
                  if cls(r) == a and r not in s.visited_holding]
        return self.search_holding(wanted)

    def light(self) -> str | None:
        g, s = self.goal, self.s
        for c in self.adm:
            if re.match(rf"use {re.escape(g.tool)} \d+$", c) and self.ok(c):
                return c
        seen_lamp = [r for r, objs in s.seen.items() if any(cls(o) == g.tool for o in objs)]
        wanted = seen_lamp + [r for r in self.hints.ranked("lamp_places") if r not in s.visited_holding]
        return self.search_holding(wanted)

    def search_holding(self, wanted: list[str]) -> str | None:
        """With the object in hand, go where something must be done to it: wanted places first,
        then every receptacle not yet visited with it in hand."""
        for place in wanted:
            cmd = self.go(place)
            if cmd:
                return cmd
        for place in self.explore_order(self.s.visited_holding):
            if cls(place) != self.goal.target:
                cmd = self.go(place)
                if cmd:
                    return cmd
        anywhere = self.explore_order(set())
        return self.go(anywhere[0]) if anywhere else None

    def place(self) -> str | None:
        g, s = self.goal, self.s
        here = s.at
        if here and cls(here) == g.target:
            put = f"move {s.holding} to {here}"
            if self.ok(put):
                return put
            if self.ok(f"open {here}"):
                return f"open {here}"
        targets = [r for r in self.room if cls(r) == g.target]
        # Two objects must share one receptacle: where the first went (or one is seen) comes first.
        started = [r for o, r in s.placed if cls(o) == g.obj and r in targets]
        started += [r for r in targets if any(cls(o) == g.obj for o in s.seen.get(r, []))]
        # A target visited with the object in hand that took nothing (closed for good, or it does
        # not fit) is not tried again; one that took an object is where the next one goes.
        tried = {r for r in s.visited_holding if cls(r) == g.target and r != here and r not in started}
        order = started + [r for r in self.hints.ranked("targets") if r in targets] + targets
        for r in order:
            if r not in tried:
                cmd = self.go(r)
                if cmd:
                    return cmd
        return self.go(order[0]) if order else None


def choose_command(goal_text: str, history: list[str], admissible: list[str], memory: str) -> str:
    """The command for one step (pure; see module docstring)."""
    if not admissible:
        return "look"
    goal = parse_goal(goal_text)
    state = read_state(history, admissible, goal)
    room = _room(admissible, history, state)
    hints = read_hints(memory, goal, room)
    return Chooser(goal, state, admissible, room, hints).pick()


def act(prompt: str) -> str:
    """The offline task model's reply to a <task>act</task> prompt."""
    lines = lambda tag: [ln for ln in (extract_tag(prompt, tag) or "").splitlines() if ln.strip()]  # noqa: E731
    return choose_command(extract_tag(prompt, "task_goal") or "", lines("history"),
                          [c.strip() for c in lines("admissible_commands")],
                          extract_tag(prompt, "retrieved_memory") or "")

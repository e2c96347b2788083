"""Deterministic ALFWorld-format games, generated offline from the bundled PDDL domain and grammar.

`alfworld-download` fetches the released games from a host these machines cannot reach, but a
game is only data: `game.tw-pddl` = {pddl_domain: alfworld's alfred.pddl, grammar: alfred.twl2
with the goal text added (alfworld's add_task_to_grammar), pddl_problem: objects, receptacles,
locations, initial facts and an ALFRED goal from alfworld's goal library}, next to a
`traj_data.json` with the task type and its parameters. This module writes such games in the
released layout (json_2.1.1/<split>/<task>-<Obj>-None-<Recep>-<scene>/trial_T<seed>/), so the
released-layout reader (data.py) loads them like real ones.

What a game is made of (all draws from random.Random(seed), so a seed always gives the same game):
  - a room layout (layouts.py) with its receptacles; "seen" rooms for train/valid_seen, other
    rooms for valid_unseen;
  - the goal object at one of its class's usual places in that room (most of the time the first),
    a lamp for look-at-in-light tasks, and 8-12 distractor objects at their usual places;
  - attributes from ALFRED's receptacle/object table (alfworld.gen.constants): what fits where
    (canContain), what can be cleaned (fits a sink basin), heated (fits a microwave), cooled
    (fits a fridge).
Each game's traj_data.json also carries the generator's expert plan (`expert_plan`: straight to
the object, the appliance or lamp, the target), which expert.py plays to record the episode.
`corrupt=True` writes the kind of game the paper excludes (Appendix K): no agent in the PDDL
state and the goal already true, so the engine offers no admissible command at all.
"""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

from mstar.tasks.alfworld.layouts import (APPLIANCE, BASINS, LAMP, LAYOUTS, OPENABLE, SEEN_LAYOUTS,
                                          TASK_TYPES, UNSEEN_LAYOUTS, Layout)

SYNTH_VERSION = 5
_ALWAYS_RTYPES = ("SinkBasin", "Microwave", "Fridge")     # named by the domain's preconditions
_ALWAYS_OTYPES = ("Knife", "ButterKnife")


@dataclass(frozen=True)
class GameSpec:
    layout: str
    task_type: str
    seed: int
    corrupt: bool = False


def _can_contain() -> dict[str, frozenset[str]]:
    from alfworld.gen import constants   # the optional extra; imported only when generating
    return {r: frozenset(objs) for r, objs in constants.VAL_RECEPTACLE_OBJECTS.items()}


def _instances(layout: Layout) -> list[tuple[str, str, int]]:
    """(id prefix class, receptacle type, index) for every receptacle of the room, in a fixed order."""
    return [(cls, BASINS.get(cls, cls), i) for cls, count in layout.receptacles for i in range(1, count + 1)]


def _receptacle_id(cls: str, index: int, k: int) -> str:
    base = f"{cls}_bar__plus_{k:02d}_dot_{index:02d}_bar__plus_00_dot_00_bar__minus_01_dot_00"
    return f"{base}_bar_{BASINS[cls]}" if cls in BASINS else base


def usual_places(layout: Layout, fits: dict[str, frozenset[str]]) -> dict[str, list[int]]:
    """Object class -> indexes (into _instances) of its two usual places in this room."""
    rng = random.Random(f"mstar-alfworld-usual:{layout.name}")
    insts = _instances(layout)
    out = {}
    for obj in sorted(set(layout.objects) | {LAMP}):
        if obj == LAMP:
            ok = [k for k, (_, rt, _) in enumerate(insts) if rt in layout.lamp_on]
        else:
            ok = [k for k, (_, rt, _) in enumerate(insts) if obj in fits.get(rt, ())]
        if ok:
            out[obj] = rng.sample(ok, min(2, len(ok)))
    return out


def _needs(task_type: str, obj: str, layout: Layout, fits: dict[str, frozenset[str]]) -> bool:
    appliance = APPLIANCE.get(task_type)
    return appliance is None or (appliance in layout.receptacle_types() and obj in fits.get(appliance, ()))


def _choose_goal(spec: GameSpec, layout: Layout, fits, usual, rng) -> tuple[str, str]:
    """(object class, target receptacle type; "" for look-at-in-light)."""
    present = set(layout.receptacle_types())
    options = []
    for obj in layout.task_objects[spec.task_type]:
        if obj not in usual or not _needs(spec.task_type, obj, layout, fits):
            continue
        if spec.task_type == "look_at_obj_in_light":
            options.append((obj, ""))
            continue
        for target in layout.targets:
            if target in present and obj in fits.get(target, ()) and target != APPLIANCE.get(spec.task_type):
                options.append((obj, target))
    if not options:
        raise ValueError(f"layout {layout.name} cannot host {spec.task_type}")
    return rng.choice(sorted(options))


def _place(obj: str, usual: dict, valid: list[int], rng: random.Random, avoid: set[int]) -> int:
    """Where one object of class `obj` goes: usual place 1 (60%), 2 (25%), anywhere it fits."""
    places = [k for k in usual.get(obj, []) if k not in avoid]
    roll = rng.random()
    if places and roll < 0.60:
        return places[0]
    if len(places) > 1 and roll < 0.85:
        return places[1]
    free = [k for k in valid if k not in avoid]
    return rng.choice(free) if free else (places[0] if places else valid[0])


def build_game(spec: GameSpec, domain: str, grammar: str) -> tuple[dict, dict]:
    """(game.tw-pddl dict, traj_data.json dict) for one spec. Pure given the alfworld tables."""
    from alfworld.agents.utils.misc import add_task_to_grammar
    from alfworld.gen import goal_library

    layout = LAYOUTS[spec.layout]
    fits = _can_contain()
    usual = usual_places(layout, fits)
    rng = random.Random(spec.seed)
    obj, target = _choose_goal(spec, layout, fits, usual, rng)
    insts = _instances(layout)
    rids = [_receptacle_id(cls, i, k) for k, (cls, _, i) in enumerate(insts)]
    fits_at = lambda o: [k for k, (_, rt, _) in enumerate(insts) if o in fits.get(rt, ())]  # noqa: E731
    avoid = {k for k, (_, rt, _) in enumerate(insts) if rt == target}
    placed: list[tuple[str, int]] = []
    n_goal = 2 if spec.task_type == "pick_two_obj_and_place" else (2 if rng.random() < 0.25 else 1)
    for n in range(n_goal):
        spot = _place(obj, usual, fits_at(obj), rng, avoid | {k for _, k in placed} if n else avoid)
        placed.append((obj, spot))
    if spec.corrupt:   # goal already true: the object starts in the target
        placed = [(obj, next(iter(sorted(avoid))))] if avoid else placed
    toggle = LAMP if spec.task_type == "look_at_obj_in_light" else ""
    if toggle:
        spots = usual[LAMP]
        placed.append((LAMP, spots[0] if rng.random() < 0.8 or len(spots) < 2 else spots[1]))
    others = sorted(o for o in layout.objects if o != obj and o in usual)
    for other in rng.sample(others, min(len(others), rng.randint(8, 12))):
        placed.append((other, _place(other, usual, fits_at(other), rng, set())))
    oids = _object_ids(placed, spec.seed)
    problem = _problem(spec, layout, insts, rids, placed, oids, fits, obj, target, toggle, goal_library)
    params = {"object_target": obj, "parent_target": target, "toggle_target": toggle,
              "mrecep_target": "", "object_sliced": False}
    traj = {"task_type": spec.task_type, "pddl_params": params,
            "scene": {"floor_plan": f"FloorPlan{layout.number}", "scene_num": layout.number,
                      "random_seed": spec.seed},
            "mstar_synth": {"version": SYNTH_VERSION, "layout": layout.name, "corrupt": spec.corrupt,
                            "plan": [] if spec.corrupt else expert_plan(spec, insts, rids, placed, oids, obj,
                                                                         target, toggle)}}
    saved = random.getstate()
    try:   # add_task_to_grammar picks one of two goal templates with the global random module
        random.seed(spec.seed)
        full_grammar = add_task_to_grammar(grammar, traj)
    finally:
        random.setstate(saved)
    goal = re.search(r"Your task is to: (.*?)\.\"", full_grammar)
    traj["turk_annotations"] = {"anns": [{"task_desc": goal.group(1) if goal else ""}]}
    # A corrupt game claims to be solvable, as the released corrupt games do.
    game = {"pddl_domain": domain, "grammar": full_grammar, "pddl_problem": problem, "solvable": True}
    return game, traj


def _object_ids(placed: list[tuple[str, int]], seed: int) -> list[str]:
    count: dict[str, int] = {}
    out = []
    for o, k in placed:
        count[o] = count.get(o, 0) + 1
        out.append(f"{o}_bar__plus_{k:02d}_dot_{count[o]:02d}_bar__plus_00_dot_90_bar__minus_00_dot_{seed % 97:02d}")
    return out


def expert_plan(spec, insts, rids, placed, oids, obj, target, toggle) -> list[str]:
    """The generator's own expert: it knows where everything is, so it walks straight to the goal
    object(s), applies the task's appliance or lamp, and puts them in the first instance of the
    target receptacle, opening what is closed. Names are the ones the game shows, from alfworld's
    Demangler over the same (lower-cased, as the engine sees them) ids. The plan is checked by
    playing it when the game's trajectory is recorded (expert.py)."""
    from alfworld.agents.utils.misc import Demangler
    ids = [r.lower() for r in rids] + [o.lower() for o in oids]
    demangler = Demangler(game_infos={i: SimpleNamespace(id=i) for i in ids})
    name = lambda raw: demangler.demangle_alfred_name(raw.lower()).strip()  # noqa: E731
    r_names = [name(r) for r in rids]
    openable = {r_names[k] for k, (cls, _, _) in enumerate(insts) if cls in OPENABLE}
    by_type = lambda rtype: sorted((r_names[k] for k, (_, rt, _) in enumerate(insts) if rt == rtype),  # noqa: E731
                                   key=lambda n: int(n.rsplit(" ", 1)[1]))
    plan, at, opened = [], "", set()

    def visit(where: str) -> None:
        nonlocal at
        if at != where:
            plan.append(f"go to {where}")
            at = where
        if where in openable and where not in opened:
            plan.append(f"open {where}")
            opened.add(where)

    goal_objects = [(name(oid), r_names[k]) for (o, k), oid in zip(placed, oids) if o == obj]
    wanted = 2 if spec.task_type == "pick_two_obj_and_place" else 1
    for thing, place in goal_objects[:wanted]:
        visit(place)
        plan.append(f"take {thing} from {place}")
        appliance = APPLIANCE.get(spec.task_type)
        if appliance:
            station = by_type(appliance)[0]
            if at != station:
                plan.append(f"go to {station}")
                at = station
            plan.append(f"{spec.task_type.split('_')[1]} {thing} with {station}")
        if toggle:
            lamp, lamp_place = next((name(oid), r_names[k]) for (o, k), oid in zip(placed, oids) if o == toggle)
            if at != lamp_place:
                plan.append(f"go to {lamp_place}")
                at = lamp_place
            plan.append(f"use {lamp}")
            continue
        destination = by_type(target)[0]
        visit(destination)
        plan.append(f"move {thing} to {destination}")
    return plan


def _problem(spec, layout, insts, rids, placed, oids, fits, obj, target, toggle, goal_library) -> str:
    locs = [f"loc_bar_{k}_bar_{k + 1}_bar_1_bar_45" for k in range(len(insts))]
    start = "loc_bar__minus_1_bar__minus_1_bar_0_bar_30"
    otypes = sorted({o for o, _ in placed} | set(_ALWAYS_OTYPES))
    rtypes = sorted(set(layout.receptacle_types()) | set(_ALWAYS_RTYPES))
    objects = [f"{t}Type - otype" for t in otypes] + [f"{t}Type - rtype" for t in rtypes]
    init = []
    if not spec.corrupt:
        objects.append("agent1 - agent")
        init.append(f"(atLocation agent1 {start})")
    objects.append(f"{start} - location")
    for k, (cls, rtype, _) in enumerate(insts):
        objects += [f"{rids[k]} - receptacle", f"{locs[k]} - location"]
        init += [f"(receptacleType {rids[k]} {rtype}Type)", f"(receptacleAtLocation {rids[k]} {locs[k]})"]
        if cls in OPENABLE:
            init.append(f"(openable {rids[k]})")
    for (o, k), oid in zip(placed, oids):
        objects.append(f"{oid} - object")
        init += [f"(objectType {oid} {o}Type)", f"(inReceptacle {oid} {rids[k]})",
                 f"(objectAtLocation {oid} {locs[k]})"]
        if o == LAMP:
            init.append(f"(toggleable {oid})")
            continue
        init.append(f"(pickupable {oid})")
        for appliance, attr in (("SinkBasin", "cleanable"), ("Microwave", "heatable"), ("Fridge", "coolable")):
            if o in fits.get(appliance, ()):
                init.append(f"({attr} {oid})")
    for rt in rtypes:
        for ot in otypes:
            if ot in fits.get(rt, ()):
                init.append(f"(canContain {rt}Type {ot}Type)")
    goal = goal_library.gdict[spec.task_type]["pddl"].format(obj=obj, recep=target, toggle=toggle, mrecep="")
    return (f"(define (problem plan_synth_{spec.seed})\n(:domain alfred)\n(:objects\n"
            + "\n".join(objects) + "\n)\n(:init\n" + "\n".join(init) + "\n)\n" + goal.replace("#", "-"))


def plan_split(split: str, per_type: int, seed: int, corrupt: int = 0) -> list[GameSpec]:
    """The games of one split: `per_type` of each task type, spread over the split's rooms that
    can host it, seeds derived from (seed, split, type, n); plus `corrupt` corrupt games."""
    layouts = UNSEEN_LAYOUTS if split == "valid_unseen" else SEEN_LAYOUTS
    salt = {"train": 0, "valid_seen": 1, "valid_unseen": 2}[split]
    specs = []
    for t, task_type in enumerate(TASK_TYPES):
        hosts = [name for name in layouts if task_type in LAYOUTS[name].task_objects]
        for n in range(per_type):
            specs.append(GameSpec(hosts[n % len(hosts)], task_type, seed * 1_000_003 + salt * 100_000 + t * 1000 + n))
    for n in range(corrupt):
        task_type = "pick_and_place_simple"   # a goal that can start true with one object
        hosts = [name for name in layouts if task_type in LAYOUTS[name].task_objects]
        specs.append(GameSpec(hosts[n % len(hosts)], task_type, seed * 1_000_003 + salt * 100_000 + 9000 + n,
                              corrupt=True))
    return specs


def game_dir(root: Path, split: str, spec: GameSpec, traj: dict) -> Path:
    p = traj["pddl_params"]
    recep = p["toggle_target"] or p["parent_target"]
    return (Path(root) / "json_2.1.1" / split /
            f"{spec.task_type}-{p['object_target']}-None-{recep}-{LAYOUTS[spec.layout].number}" /
            f"trial_T{spec.seed:012d}")


def write_games(root: Path, split: str, specs: list[GameSpec]) -> list[Path]:
    """Write each spec's game.tw-pddl and traj_data.json under root (released layout)."""
    from importlib import resources
    data = resources.files("alfworld") / "data"
    domain = (data / "alfred.pddl").read_text(encoding="utf-8")
    grammar = (data / "alfred.twl2").read_text(encoding="utf-8")
    out = []
    for spec in specs:
        game, traj = build_game(spec, domain, grammar)
        where = game_dir(root, split, spec, traj)
        where.mkdir(parents=True, exist_ok=True)
        (where / "traj_data.json").write_text(json.dumps(traj, indent=1), encoding="utf-8")
        (where / "game.tw-pddl").write_text(json.dumps(game), encoding="utf-8")
        out.append(where)
    return out

"""ALFWorld: generated games in the released layout, the reader, the expert, the offline policy.

Needs the optional extra (pip install -e ".[alfworld]"); without it only the missing-extra test
runs. One small fixture -- a released-layout folder written by the synthetic generator -- is
shared by the module: 6 training games (one per task type), 6 valid_seen games and 1 corrupt.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from mstar.interactive import play_case, summarize
from mstar.offline.task_model import OfflineTaskModel
from mstar.tasks import alfworld as alf_pkg
from mstar.tasks.model import TaskError

CONSTS = {"INSTRUCTION_RESPONSE": "Reply with one admissible command.", "ALWAYS_ON_KNOWLEDGE": ""}
EXTRA = not alf_pkg.missing_modules()
needs_extra = pytest.mark.skipif(not EXTRA, reason="the [alfworld] extra is not installed")


def test_missing_extra_is_one_clear_line(monkeypatch):
    from mstar.tasks.alfworld import task as alf_task
    monkeypatch.setattr(alf_pkg.importlib.util, "find_spec",
                        lambda name, *a: None if name == "textworld" else object())
    with pytest.raises(TaskError) as err:
        alf_task.load_alfworld_synth()
    message = str(err.value)
    assert "\n" not in message and 'pip install -e ".[alfworld]"' in message and "textworld" in message


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    from mstar.tasks.alfworld.task import generate_synth
    root = tmp_path_factory.mktemp("alfworld")
    generate_synth(root, ("train", "valid_seen"), per_type_train=1, per_type_eval=1, seed=6,
                   corrupt={"valid_seen": 1})
    return root


@pytest.fixture(scope="module")
def task(released):
    from mstar.tasks.alfworld.task import load_alfworld
    return load_alfworld(str(released), split="seen", cache_dir=released, workers=2)


def test_the_loaders_are_registered_with_a_split_option():
    from mstar.tasks import LOADER_OPTIONS, LOADERS, load_task
    assert {"alfworld", "alfworld-synth"} <= set(LOADERS)
    assert LOADER_OPTIONS["alfworld"] == ("split",) and LOADER_OPTIONS["alfworld-synth"] == ("split",)
    with pytest.raises(TaskError, match="needs --data"):
        load_task("alfworld", None, split="unseen")
    with pytest.raises(TaskError, match="does not take option"):
        load_task("sample", None, split="seen")


def offline_agent(messages):
    return OfflineTaskModel().complete(messages)


@needs_extra
def test_the_released_layout_reader_builds_a_task_of_games(task, released):
    assert task.metric_name == "success"
    assert len(task.episodes) == 6 and len(task.validation) + len(task.test) == 7
    types = {q.category for q in task.validation + task.test}
    assert len(types) == 6   # all six task types
    item = (task.validation + task.test)[0]
    assert item.meta["interactive"] and item.meta["env"]["kwargs"]["game_file"].endswith("game.tw-pddl")
    assert item.question and not item.question.startswith("Your task")
    ep = task.episodes[0]
    assert ep.text.startswith("Your task is to: ") and "\n> go to " in ep.text
    assert ep.text.rstrip().endswith("steps.") and ep.meta["task_type"] in types
    answers = [q.answer for q in task.validation + task.test]   # the generator's plans, for readers
    assert sum(a == "" for a in answers) == 1                        # the corrupt game has none
    assert all(a.startswith("go to ") for a in answers if a)
    with pytest.raises(TaskError, match="split must be one of"):
        from mstar.tasks.alfworld.task import load_alfworld
        load_alfworld(str(released), split="hidden")


@needs_extra
def test_the_expert_plan_wins_a_generated_game(released):
    from mstar.tasks.alfworld.expert import run_expert
    game = sorted((released / "json_2.1.1" / "valid_seen").glob("pick_heat*/*/game.tw-pddl"))[0]
    record = run_expert(game)
    assert record["won"] and 4 <= len(record["steps"]) <= 12 and record["error"] is None
    assert any(cmd.startswith("heat ") for cmd, _ in record["steps"])
    assert "You are in the middle of a room" in record["intro"]


@needs_extra
def test_a_do_nothing_policy_fails_a_generated_game_at_step_50(task):
    item = next(q for q in task.validation + task.test if q.category == "pick_heat_then_place_in_recep")
    case = play_case(item, "", CONSTS, lambda m: "look", max_steps=50, timeout_s=120)
    assert case.answer == "lost" and case.steps == 50 and case.error is None and not case.corrupt


@needs_extra
def test_a_corrupt_game_is_reported_and_excluded(task):
    items = list(task.validation + task.test)
    cases = list(ThreadPoolExecutor(2).map(
        lambda q: play_case(q, "", CONSTS, offline_agent, max_steps=1, timeout_s=120), items))
    corrupt = [c for c in cases if c.corrupt]
    assert len(corrupt) == 1 and corrupt[0].steps == 0 and "no admissible command" in corrupt[0].error
    summary = summarize(cases, [q.category for q in items])
    assert summary["corrupt"] == 1 and summary["n"] == len(items) - 1


@needs_extra
def test_the_offline_policy_wins_more_with_a_similar_expert_trajectory_in_memory(task):
    # Each game's memory: the expert trajectory of the training game of the same task type.
    by_type = {ep.meta["task_type"]: ep.text for ep in task.episodes}
    games = [q for q in task.validation + task.test if q.category in (
        "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "look_at_obj_in_light",
        "pick_clean_then_place_in_recep")]
    assert len(games) == 4
    with ThreadPoolExecutor(2) as pool:
        blind = list(pool.map(lambda q: play_case(q, "", CONSTS, offline_agent, timeout_s=120), games))
        guided = list(pool.map(lambda q: play_case(q, by_type[q.category], CONSTS, offline_agent,
                                                   timeout_s=120), games))
    assert all(c.error is None for c in blind + guided), [c.error for c in blind + guided]
    won_blind, won_guided = sum(c.score for c in blind), sum(c.score for c in guided)
    assert won_guided > won_blind, (won_blind, won_guided, [c.steps for c in blind], [c.steps for c in guided])
    assert sum(c.steps for c in guided) < sum(c.steps for c in blind)


# ------------------------------------------------------------------ the offline act policy (pure)

from mstar.interactive import build_act_messages  # noqa: E402
from mstar.offline.act_memory import parse_goal  # noqa: E402
from mstar.offline.act_policy import choose_command  # noqa: E402

ROOM = ["go to cabinet 1", "go to cabinet 2", "go to countertop 1", "go to countertop 2", "go to fridge 1",
        "go to microwave 1", "go to sinkbasin 1", "inventory", "look"]
INTRO = ["-= Welcome to TextWorld, ALFRED! =-",
         "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a cabinet 2, "
         "a countertop 1, a countertop 2, a fridge 1, a microwave 1, and a sinkbasin 1.",
         "Your task is to: heat some apple and put it in fridge."]
TRAJECTORY = """Your task is to: put a hot apple in countertop.
> go to countertop 2
You arrive at countertop 2. On the countertop 2, you see a apple 1.
> take apple 1 from countertop 2
You pick up the apple 1 from the countertop 2.
> go to microwave 1
> heat apple 1 with microwave 1
You heat the apple 1 using the microwave 1."""


@pytest.mark.parametrize("goal,expected", [
    ("put some apple on fridge.", ("simple", "apple", "fridge", "")),
    ("look at book under the desklamp", ("light", "book", "", "desklamp")),
    ("examine the cd with the desklamp.", ("light", "cd", "", "desklamp")),
    ("put a clean mug in cabinet", ("clean", "mug", "cabinet", "")),
    ("heat some egg and put it in garbagecan.", ("heat", "egg", "garbagecan", "")),
    ("put a cool tomato in countertop", ("cool", "tomato", "countertop", "")),
    ("find two pen and put them in drawer", ("two", "pen", "drawer", "")),
    ("put two cellphone in bed.", ("two", "cellphone", "bed", "")),
    ("dance", ("unknown", "", "", "")),
])
def test_alfworld_goals_are_parsed(goal, expected):
    g = parse_goal(goal)
    assert (g.kind, g.obj, g.target, g.tool) == expected


def test_memory_sends_the_agent_where_the_expert_found_the_object():
    goal = "heat some apple and put it in fridge."
    assert choose_command(goal, INTRO, ROOM, "") == "go to cabinet 1"        # no memory: explore
    assert choose_command(goal, INTRO, ROOM, TRAJECTORY) == "go to countertop 2"


def test_memory_names_the_appliance_the_goal_verb_needs():
    goal = "heat some apple and put it in fridge."
    history = INTRO + ["> go to countertop 2", "You arrive at countertop 2. On the countertop 2, you see a apple 1.",
                       "> take apple 1 from countertop 2", "You pick up the apple 1 from the countertop 2."]
    admissible = [c for c in ROOM if c != "go to countertop 2"] + ["examine apple 1"]
    assert choose_command(goal, history, admissible, TRAJECTORY) == "go to microwave 1"
    assert choose_command(goal, history, admissible, "") == "go to cabinet 1"   # must search for it
    at_microwave = history + ["> go to microwave 1", "You arrive at microwave 1. The microwave 1 is closed."]
    here = ROOM + ["heat apple 1 with microwave 1", "open microwave 1"]
    assert choose_command(goal, at_microwave, here, "") == "heat apple 1 with microwave 1"


def test_the_offline_task_model_answers_an_act_prompt_with_an_admissible_command():
    messages = build_act_messages(TRAJECTORY, "heat some apple and put it in fridge.", INTRO, ROOM, "One command.")
    assert OfflineTaskModel().complete(messages) == "go to countertop 2"


# ------------------------------------------------------------------ end to end: a short evolve run

@needs_extra
def test_a_short_offline_evolve_run_reports_success_by_task_type(task, tmp_path, monkeypatch, capsys):
    import json

    from mstar.cli import main
    from mstar.run.report import build_report
    from mstar.run.views import open_run
    from mstar.tasks import LOADER_OPTIONS, LOADERS

    # The module's fixture games (7 to play, one corrupt) under a loader name the CLI can use.
    monkeypatch.setitem(LOADERS, "alfworld-fixture", lambda data=None, **kw: task)
    monkeypatch.setitem(LOADER_OPTIONS, "alfworld-fixture", ())
    out = tmp_path / "run"
    assert main(["evolve", "--task", "alfworld-fixture", "--iterations", "1", "--seeds", "no_memory,trajectory_retrieval",
                 "--static-size", "4", "--confirm-size", "0", "--embed-model", "hashing", "--out", str(out), "--quiet"]) == 0
    types = {q.category for q in task.validation + task.test}
    events = [json.loads(line) for line in (out / "lineage.jsonl").read_text().splitlines() if line.strip()]
    scored = [e for e in events if e.get("per_category")]
    assert scored and all(set(e["per_category"]) <= types for e in scored)
    test = next(e for e in events if e["event"] == "test")
    assert set(test["per_category"]) == {q.category for q in task.test if q.answer}   # the corrupt game: not scored
    capsys.readouterr()
    assert main(["show", str(out), "best", "--no-source"]) == 0
    shown = capsys.readouterr().out
    assert "category " in shown and any(t in shown for t in types)
    page = build_report(open_run(str(out), str(tmp_path)))
    assert any(t in page for t in types)

"""mstar.interactive: the step loop, the per-game process and its limits, the evaluator's seam.

Games here are the fake corridor (mstar.testing.fake_games), so these tests need no game engine;
tests/test_alfworld.py plays real ALFWorld-format games.
"""
from __future__ import annotations

import os
import time

import pytest

from mstar.interactive import (CaseOutcome, EnvSpec, GameError, GameProcess, build_act_messages,
                               success_table,
                               match_command, play, play_case, summarize)
from mstar.interactive.evaluate_case import conversation
from mstar.offline.text import extract_tag
from mstar.tasks.metrics import METRICS
from mstar.tasks.model import QueryItem, Task
from mstar.testing.fake_games import FACTORY, CorridorGame

CONSTS = {"INSTRUCTION_RESPONSE": "Reply with the command only.", "ALWAYS_ON_KNOWLEDGE": "Walk, do not wait."}


def corridor_item(qid="q1", **kwargs) -> QueryItem:
    return QueryItem(qid, "reach the end of the corridor", "", "corridor",
                     {"interactive": True, "env": {"factory": FACTORY, "kwargs": kwargs}})


def walker(messages):
    return "step forward"


def idler(messages):
    return "wait"


# ------------------------------------------------------------------ the step loop (in-process)

def test_a_policy_that_follows_the_plan_wins_in_plan_length_steps():
    out = play(CorridorGame(length=4), "", CONSTS, walker)
    assert out.won and out.steps == 4 and out.error is None and not out.corrupt
    assert [r["command"] for r in out.trajectory] == ["step forward"] * 4
    assert out.trajectory[-1]["won"] is True


def test_a_do_nothing_policy_fails_at_the_step_budget():
    out = play(CorridorGame(length=2), "", CONSTS, idler, max_steps=50)
    assert not out.won and out.steps == 50 and out.error is None
    assert len(out.trajectory) == 50


def test_a_game_without_admissible_commands_is_corrupt_and_never_stepped():
    calls = []
    out = play(CorridorGame(corrupt=True), "", CONSTS, lambda m: calls.append(m) or "wait")
    assert out.corrupt and not out.won and out.steps == 0 and calls == []
    assert "no admissible command" in out.error


def test_a_failing_agent_ends_the_game_with_an_error_not_an_exception():
    def broken(messages):
        raise TimeoutError("llm down")
    out = play(CorridorGame(), "", CONSTS, broken)
    assert not out.won and "llm down" in out.error


def test_the_prompt_carries_memory_goal_history_commands_and_instruction():
    seen = []
    play(CorridorGame(length=30), "MEMORY: walk forward", CONSTS,
         lambda m: seen.append(m[0]["content"]) or "wait", max_steps=25, history_lines=6)
    first, last = seen[0], seen[-1]
    assert extract_tag(first, "task") == "act"
    assert extract_tag(first, "retrieved_memory") == "Walk, do not wait.\nMEMORY: walk forward"
    assert extract_tag(first, "task_goal") == "reach the end of the corridor."
    assert extract_tag(first, "admissible_commands").splitlines() == ["look", "step forward", "wait"]
    assert extract_tag(first, "instruction") == CONSTS["INSTRUCTION_RESPONSE"]
    assert first.rstrip().endswith("and nothing else.")
    history = extract_tag(last, "history").splitlines()
    assert len(history) == 6 and history[-2:] == ["> wait", "Nothing happens."]


def test_prompt_tags_are_on_their_own_lines_in_order():
    text = build_act_messages("m", "g", ["h1"], ["a", "b"], "i")[0]["content"]
    order = [text.index(f"<{t}>\n") for t in ("retrieved_memory", "task_goal", "history",
                                                "admissible_commands", "instruction")]
    assert order == sorted(order)


# ------------------------------------------------------------------ replies -> commands

@pytest.mark.parametrize("reply,expected,warned", [
    ("go to fridge 1", "go to fridge 1", False),
    ("  Go To  Fridge 1. ", "go to fridge 1", False),
    ("> go to fridge 1", "go to fridge 1", False),
    ("Action: open fridge 1", "open fridge 1", False),
    ("```\nopen fridge 1\n```", "open fridge 1", False),
    ("I think I should go to fridge 1 now", "go to fridge 1", True),
    ("go to the fridge", "go to fridge 1", True),
    ("", "look", True),
])
def test_replies_map_to_admissible_commands(reply, expected, warned):
    admissible = ["go to countertop 1", "go to fridge 1", "look", "open fridge 1"]
    command, warning = match_command(reply, admissible)
    assert command == expected and (warning is not None) == warned


def test_a_guess_is_recorded_as_a_warning_on_the_game():
    out = play(CorridorGame(length=1), "", CONSTS, lambda m: "I will step forwards!")
    assert out.won and out.warnings and "step forward" in out.warnings[0]


# ------------------------------------------------------------------ the game's own process

def test_the_game_runs_in_another_process():
    with GameProcess(EnvSpec(FACTORY, {"length": 2})) as game:
        obs = game.reset()
        assert game.pid != os.getpid() and obs.admissible == ["look", "step forward", "wait"]
        assert game.step("step forward").won is False
        assert game.step("step forward").won is True


def test_a_hung_game_is_killed_at_its_wall_clock_limit():
    t0 = time.monotonic()
    case = play_case(corridor_item(hang_at=2), "", CONSTS, walker, timeout_s=2.0, call_timeout_s=30)
    took = time.monotonic() - t0
    assert case.error and "timeout" in case.error and "limit of 2 s" in case.error
    assert case.answer == "lost" and case.score == 0.0 and case.steps <= 1
    assert took < 12, f"the hung game was not killed in time ({took:.1f} s)"


def test_the_agents_thinking_time_does_not_count_against_the_games_limit():
    def slow_walker(messages):
        time.sleep(0.5)
        return "step forward"
    case = play_case(corridor_item(length=6), "", CONSTS, slow_walker, timeout_s=2.0)
    assert case.answer == "won" and case.error is None and case.seconds > 3.0


def test_waiting_for_an_engine_slot_does_not_count_against_a_games_limit(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    from mstar.interactive import game_process
    monkeypatch.setattr(game_process, "ENGINE_SLOTS", game_process.EngineSlots(1))
    hung, fine = corridor_item("hung", hang_at=1), corridor_item("fine", length=3)
    play = lambda q: play_case(q, "", CONSTS, walker, timeout_s=20, call_timeout_s=1.5)  # noqa: E731
    with ThreadPoolExecutor(2) as pool:   # one slot: the fine game waits while the hung one holds it
        first = pool.submit(play, hung)
        time.sleep(0.5)
        second = pool.submit(play, fine)
        cases = [first.result(), second.result()]
    assert "timeout" in cases[0].error
    assert cases[1].answer == "won" and cases[1].error is None and cases[1].seconds > 0.8


def test_a_hung_step_is_killed_by_the_per_call_limit_and_the_process_is_gone():
    game = GameProcess(EnvSpec(FACTORY, {"hang_on_reset": True}), timeout_s=60, call_timeout_s=1.0)
    game.start()
    pid = game.pid
    with pytest.raises(GameError) as err:
        game.reset()
    assert err.value.kind == "timeout" and game.killed
    game.close()
    with pytest.raises(ProcessLookupError):
        for _ in range(50):   # reaped by the join in _kill; give the kernel a moment
            os.kill(pid, 0)
            time.sleep(0.05)


def test_a_crashing_game_is_an_error_for_that_case_only():
    case = play_case(corridor_item(crash_at=2), "", CONSTS, walker, timeout_s=20)
    assert "crash" in case.error and "exit code 3" in case.error and case.steps == 1


def test_an_engine_exception_is_reported_with_its_type():
    case = play_case(corridor_item(raise_at=1), "", CONSTS, walker, timeout_s=20)
    assert "RuntimeError: the engine broke" in case.error


def test_a_bad_env_spec_is_an_error_value():
    bad = QueryItem("q", "g", "", None, {"interactive": True, "env": {"factory": "no.such.module:Game"}})
    case = play_case(bad, "", CONSTS, walker, timeout_s=20)
    assert case.error and "ModuleNotFoundError" in case.error
    missing = QueryItem("q", "g", "", None, {"interactive": True})
    assert "not playable" in play_case(missing, "", CONSTS, walker).error


# ------------------------------------------------------------------ the seam and its summary

def test_play_case_reports_won_and_a_conversation_for_the_reflector():
    case = play_case(corridor_item(length=3), "walk", CONSTS, walker, timeout_s=20)
    assert (case.score, case.answer, case.steps, case.error, case.corrupt) == (1.0, "won", 3, None, False)
    assert case.conversation[0]["role"] == "user" and "<task>act</task>" in case.conversation[0]["content"]
    assert case.conversation[1] == {"role": "assistant", "content": "step forward"}
    assert case.conversation[-1]["content"] == "Game won after 3 steps."
    assert METRICS["success"](case.answer, "") == 1.0 and METRICS["success"]("lost", "") == 0.0


def test_long_conversations_are_trimmed_in_the_middle():
    out = play(CorridorGame(length=100), "x" * 2000, CONSTS, idler, max_steps=50)
    conv = conversation(out, 50, limit=4000)
    assert any("steps omitted" in m["content"] for m in conv)
    assert conv[-1]["content"].startswith("Game lost: the step budget of 50")


def test_summary_excludes_corrupt_games_and_counts_them():
    cases = [CaseOutcome(1.0, "won", [], 3), CaseOutcome(0.0, "lost", [], 50),
             CaseOutcome(0.0, "lost", [], 0, error="corrupt game", corrupt=True),
             CaseOutcome(0.0, "lost", [], 1, error="timeout: ...")]
    s = summarize(cases, ["a", "a", "b", "b"])
    assert s["success"] == pytest.approx(1 / 3) and s["n"] == 3 and s["corrupt"] == 1 and s["errors"] == 1
    assert s["per_category"] == {"a": 0.5, "b": 0.0} and s["per_category_n"] == {"a": 2, "b": 1}


def test_a_task_accepts_the_success_metric():
    task = Task("t", (), (corridor_item(),), (), metric_name="success")
    assert task.score("won", task.validation[0]).value == 1.0
    assert task.score("lost", task.validation[0]).value == 0.0


def test_the_success_table_has_one_column_per_category_and_the_corrupt_count():
    cases = [CaseOutcome(1.0, "won", [], 3), CaseOutcome(0.0, "lost", [], 50),
             CaseOutcome(0.0, "lost", [], 0, corrupt=True)]
    table = success_table({"No Memory": summarize(cases, ["heat", "simple", "simple"])},
                          labels={"heat": "Heat", "simple": "Simple"})
    head, rule, row = table.splitlines()
    assert head == "| program | Heat (n=1) | Simple (n=1) | overall | corrupt |"
    assert row == "| No Memory | 1.00 | 0.00 | 0.50 (n=2) | 1 |"

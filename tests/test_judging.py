"""Judged metrics: rubric score (one judge call per criterion) and LoCoMo's binary L-J."""
import json

import pytest

from mstar.tasks.judging import (answer_judge_messages, llm_judge_score, parse_verdict, render_conversation,
                           rubric_messages, rubric_points, rubric_score)
from mstar.offline.judge_model import OfflineJudgeModel
from mstar.tasks import QueryItem, Task, TaskError

RUBRIC = [{"criterion": "Recommends calling emergency services right away", "points": 10},
          {"criterion": "Explains the warning signs of a stroke", "points": 5},
          {"criterion": "Suggests waiting a few days to see if it passes", "points": -8}]


def _item(rubric=RUBRIC, messages=None):
    messages = messages or [{"role": "user", "content": "My father's face is drooping. What do I do?"}]
    return QueryItem("q1", render_conversation(messages), "", "emergency_referrals",
                     {"rubric": rubric, "messages": messages})


@pytest.mark.parametrize("met,expected", [
    ([True, True, False], 1.0),
    ([True, False, False], 10 / 15),
    ([True, False, True], 2 / 15),          # a met negative criterion subtracts
    ([False, False, True], 0.0),             # clipped at 0
    ([False, False, False], 0.0),
])
def test_rubric_points_formula(met, expected):
    assert rubric_points(RUBRIC, met) == pytest.approx(expected)


def test_rubric_points_clips_at_one_and_needs_positive_points():
    assert rubric_points([{"criterion": "a", "points": 2}, {"criterion": "b", "points": 2}], [True, True]) == 1.0
    assert rubric_points([{"criterion": "a", "points": -2}], [True]) == 0.0


def test_one_judge_call_per_criterion_with_the_conversation_and_the_reply():
    prompts = []

    def judge(messages):
        prompts.append(messages[0]["content"])
        return json.dumps({"explanation": "ok", "criteria_met": "call" in prompts[-1].split("<rubric_item>")[1]})

    score = rubric_score("Call emergency services now: these are stroke signs.", _item(), judge)
    assert len(prompts) == 3
    for p, c in zip(prompts, RUBRIC):
        assert "user: My father's face is drooping" in p and "assistant: Call emergency services now" in p
        assert f"<rubric_item>\n{c['criterion']}\n</rubric_item>" in p
    assert "flaw" in prompts[2] and "flaw" not in prompts[0]        # negative criteria are explained as such
    assert score.value == pytest.approx(10 / 15) and score.warnings == []
    assert [v["met"] for v in score.details["criteria"]] == [True, False, False]


def test_judge_failures_count_as_not_met_and_are_recorded():
    replies = iter(['```json\n{"explanation": "yes", "criteria_met": "true"}\n```',   # fenced, string bool
                    "I think it does.",                                              # no JSON at all
                    RuntimeError("judge endpoint down")])

    def judge(messages):
        r = next(replies)
        if isinstance(r, Exception):
            raise r
        return r

    score = rubric_score("answer", _item(), judge)
    assert score.value == pytest.approx(10 / 15)
    assert len(score.warnings) == 2
    assert "criterion 2 counted as not met" in score.warnings[0] and "no JSON" in score.warnings[0]
    assert "criterion 3" in score.warnings[1] and "judge endpoint down" in score.warnings[1]
    assert [v["met"] for v in score.details["criteria"]] == [True, None, None]


def test_parse_verdict_is_lenient_but_needs_a_boolean():
    assert parse_verdict('{"explanation": "x", "criteria_met": false}') == (False, "x")
    assert parse_verdict("Sure! {'explanation': 'y', 'criteria_met': True}")[0] is True
    assert parse_verdict('{"criteria_met": "no"}')[0] is False
    met, why = parse_verdict('{"explanation": "x", "criteria_met": "maybe"}')
    assert met is None and "boolean" in why
    assert parse_verdict("")[0] is None


def test_offline_judge_reads_both_prompt_formats():
    offline = OfflineJudgeModel()
    item = _item()
    good = rubric_score("Call emergency services right away and explain the stroke warning signs.", item,
                        offline.complete)
    bad = rubric_score("Drink some water.", item, offline.complete)
    assert good.value > bad.value
    gold = QueryItem("q", "When did Ann adopt the puppy?", "7 May 2023")
    assert llm_judge_score("On 7 May, 2023.", gold, offline.complete).value == 1.0
    assert llm_judge_score("Last summer.", gold, offline.complete).value == 0.0
    msgs = answer_judge_messages("Q?", "A", "gold")
    assert "<conversation>\nuser: Q?\n\nassistant: A\n</conversation>" in msgs[0]["content"]
    assert rubric_messages("user: hi", "Says hello", 3)[0]["role"] == "user"


def test_task_checks_rubrics_at_load_time():
    ok = Task("t", (), (_item(),), (), metric_name="rubric")
    assert ok.needs_judge
    with pytest.raises(TaskError, match="query 'q1'.*needs a non-empty meta\\['rubric'\\]"):
        Task("t", (), (QueryItem("q1", "?", "a"),), (), metric_name="rubric")
    with pytest.raises(TaskError, match="no criterion with positive points"):
        Task("t", (), (_item([{"criterion": "bad", "points": -1}]),), (), metric_name="rubric")
    with pytest.raises(TaskError, match=r"rubric\[0\] must be"):
        Task("t", (), (_item([{"criterion": "", "points": 1}]),), (), metric_name="rubric")
    with pytest.raises(TaskError, match="numeric gold answer"):
        Task("t", (), (QueryItem("q1", "?", "about ten"),), (), metric_name="numeric_match")

"""The evaluator plays interactive queries (mstar.evaluation.playing): one evaluation over fake
corridor games (mstar.testing.fake_games, no game engine) that win, are corrupt, hang, crash, and
lose their task agent -- each outcome lands on its own case with the evaluator's usual meaning.
"""
from __future__ import annotations

import pytest

from mstar.config import SandboxConfig
from mstar.evaluation import EvalResult, evaluate
from mstar.llm.offline_backend import OfflineBackend
from mstar.llm.retry import RetryPolicy
from mstar.llm.router import LLMRouter, RolePolicy
from mstar.llm.types import ChatResponse, FatalLLMError, TransientLLMError
from mstar.program.sources import load_program_source
from mstar.tasks.model import Episode, QueryItem, Task
from mstar.testing.fake_games import FACTORY

FAIL_ROOMS = 7     # the scripted agent's endpoint fails on the act prompts of this corridor


class ScriptedAgent:
    """The task role: walks forward in every game; its endpoint fails (transiently, or for good
    with `fatal`) on the corridor of FAIL_ROOMS rooms; everything else is the offline model."""
    name, model = "scripted", "scripted-task"

    def __init__(self, fatal: bool = False):
        self.offline, self.fatal = OfflineBackend("task"), fatal

    def complete(self, messages):
        text = messages[-1]["content"]
        if "<task>act</task>" not in text:
            return self.offline.complete(messages)
        if f"corridor of {FAIL_ROOMS} rooms" in text:
            raise (FatalLLMError if self.fatal else TransientLLMError)("503 from the scripted endpoint")
        return ChatResponse("step forward", self.model, self.name)


def router(agent) -> LLMRouter:
    backends = {role: OfflineBackend(role) for role in ("reflector", "toolkit", "judge")}
    return LLMRouter({"task": agent, **backends}, policies={"task": RolePolicy(retry=RetryPolicy(0, 0.0))})


def item(qid: str, **game) -> QueryItem:
    limits = {"step_timeout_s": game.pop("step_timeout_s")} if "step_timeout_s" in game else {}
    return QueryItem(qid, "reach the end of the corridor", "step forward > step forward", "corridor",
                     {"interactive": True, "env": {"factory": FACTORY, "kwargs": game}, **limits})


QUERIES = (item("won", length=3), item("corrupt", corrupt=True), item("hangs", length=5, hang_at=2, step_timeout_s=1.0),
           item("crashes", length=5, crash_at=1), item("agent-fails", length=FAIL_ROOMS))
TASK = Task("corridors", (Episode("e1", "Walk forward until the corridor ends."),), QUERIES, (), metric_name="success")


def run(agent) -> EvalResult:
    _, source = load_program_source("no_memory")
    return evaluate(source, TASK.episodes, TASK.validation, metric=TASK.score, router=router(agent),
                    sandbox=SandboxConfig(), workers=8, outage_threshold=0.5)


@pytest.fixture(scope="module")
def result() -> EvalResult:
    return run(ScriptedAgent())


def test_each_game_outcome_lands_on_its_own_case(result):
    cases = {c.query_id: c for c in result.cases}
    won = cases["won"]
    assert (won.answer, won.score, won.error, won.llm_error) == ("won", 1.0, None, None)
    assert won.score_details["steps"] == 3 and won.waits["act"] == 3
    assert "<task>act</task>" in won.conversation[2]["content"]      # after the query turns
    assert won.conversation[-1]["content"] == "Game won after 3 steps."
    assert cases["corrupt"].corrupt and not cases["corrupt"].scored
    assert "timeout" in cases["hangs"].error and cases["hangs"].score == 0.0 and cases["hangs"].scored
    assert "crash" in cases["crashes"].error and cases["crashes"].scored
    fails = cases["agent-fails"]
    assert fails.llm_error.startswith("task agent failed while acting") and not fails.scored


def test_corrupt_games_and_failed_agents_are_counted_not_scored(result):
    assert result.error is None
    assert result.corrupt_cases == 1 and result.case_errors == 1
    assert result.mean_score == pytest.approx(1 / 3)                  # won, hung, crashed
    assert result.per_category == {"corridor": pytest.approx(1 / 3)}
    again = EvalResult.from_dict(result.to_dict())
    assert again.corrupt_cases == 1 and [c.corrupt for c in again.cases] == [c.corrupt for c in result.cases]


def test_an_error_no_retry_can_fix_stops_the_evaluation():
    with pytest.raises(FatalLLMError, match="scripted endpoint"):
        run(ScriptedAgent(fatal=True))


def test_show_marks_a_corrupt_game_as_not_scored(result):
    from mstar.commands.show import render_detail

    d = {"program_id": "p", "source_name": "p", "static_score": result.mean_score, "delta": None,
         "parent_id": None, "status": "seed", "best": False, "diff": "", "source": "", "per_category": {},
         "attempts": [], "body": "", "event": "seed",
         "cases": {"static": result.to_dict()}}
    lines = render_detail(d, with_source=False)
    head = next(line for line in lines if line.startswith("-- static cases"))
    assert "1 corrupt game(s) not scored" in head
    marks = [line.split()[0] for line in lines[lines.index(head) + 1::2]]
    assert marks.count("n/a") == 1 and marks.count("err") == 1 and "1.00" in marks

"""Issue 30, finding 8a: a failed extraction or toolkit call during ingestion is an error of its
episode -- not written, counted, shown, and past the outage threshold an outage -- never the
schema's defaults written and scored as if the program had answered from them."""
from __future__ import annotations

import pytest

from mstar.config import LLMConfig, SandboxConfig
from mstar.evaluation import EndpointOutage, evaluate
from mstar.llm.router import LLMRouter
from mstar.tasks import load_task
from run_helpers import SEED_A

# write() reads its item, so its writes wait for their extractions.
USES_ITEM = SEED_A.replace("self.items.append(raw_text)", "self.items.append(item.content + ' | ' + raw_text)")
# write() asks the toolkit model for a summary of each episode.
ASKS_IN_WRITE = SEED_A.replace(
    "self.items.append(raw_text)",
    'self.items.append(self.toolkit.llm_completion([{"role": "user", "content": "sum up " + raw_text}]))')
assert USES_ITEM != SEED_A and ASKS_IN_WRITE != SEED_A


class Failing:
    """The offline router, except that the calls `fails(role, prompt)` picks fail as calls do after
    their retries (the evaluation sees an exception from router.call)."""

    def __init__(self, fails):
        self.router, self.fails = LLMRouter.from_config(LLMConfig()), fails

    def call(self, role, messages, **kw):
        if self.fails(role, messages[-1]["content"]):
            raise RuntimeError("HTTP 500 from the provider, gave up after 3 attempt(s)")
        return self.router.call(role, messages, **kw)

    def __getattr__(self, name):
        return getattr(self.router, name)


def _extraction(role, prompt):
    return role == "task" and "<task>extract_knowledge_item</task>" in prompt


def _run(source, router, episodes, queries):
    task = load_task("sample")
    return evaluate(source, task.episodes[:episodes], task.validation[:queries], metric=task.score, router=router,
                    sandbox=SandboxConfig(), workers=8, embed=None)


def test_every_extraction_failing_is_an_outage_not_a_score():
    """Before: 3 failed extractions among ~40 calls stayed under the call threshold; the writes got
    the defaults and the evaluation scored, with case_errors 0."""
    with pytest.raises(EndpointOutage, match="3 of 3 episodes could not be ingested"):
        _run(USES_ITEM, Failing(lambda role, prompt: _extraction(role, prompt)), 3, 12)


def test_one_failed_extraction_is_that_episodes_error_and_the_episode_is_not_written():
    task = load_task("sample")
    victim = task.episodes[2].text[:200]
    res = _run(USES_ITEM, Failing(lambda role, prompt: _extraction(role, prompt) and victim in prompt), 6, 4)
    assert res.ingest_errors == 1 and res.case_errors == 0 and res.error is None
    rec = res.writes[2]
    assert rec.ingest_error.startswith("extraction failed after its retries: HTTP 500") and "not written" in rec.ingest_error
    assert not any("used defaults" in w for w in rec.warnings)     # it was not a reply that was not JSON
    assert rec.item == {} and rec.seconds == 0.0                  # nothing made up, nothing sent to the worker
    assert all(w.ingest_error is None and w.seconds > 0 for i, w in enumerate(res.writes) if i != 2)
    assert all(task.episodes[2].text[:100] not in c.retrieved for c in res.cases)
    assert all(task.episodes[1].text[:100] in c.retrieved for c in res.cases)


def test_a_failed_toolkit_call_in_write_is_an_ingestion_error_too():
    res = _run(ASKS_IN_WRITE, Failing(lambda role, prompt: role == "toolkit" and "sum up" in prompt
                                      and load_task("sample").episodes[0].text[:100] in prompt), 6, 4)
    assert res.ingest_errors == 1 and res.writes[0].ingest_error.startswith("a toolkit call in write() failed")
    with pytest.raises(EndpointOutage, match="episodes could not be ingested"):
        _run(ASKS_IN_WRITE, Failing(lambda role, prompt: role == "toolkit"), 4, 12)


def test_the_console_shows_episodes_not_ingested():
    from mstar.run import events
    from mstar.run.progress import ProgressPrinter
    import io
    out = io.StringIO()
    printer = ProgressPrinter(total=3, out=out, legend=False)
    printer(events.SeedEvent(program_id="seed_x", static_score=0.5, case_errors=1, ingest_errors=2))
    assert "[1 case error] [2 episodes not ingested]" in out.getvalue()


def test_one_call_that_failed_its_retries_in_a_small_evaluation_is_no_outage():
    """A race buys one or two items of a racer: 4 calls, and one that failed its retries was 25%
    of them -- an outage that stopped a run whose endpoint worked. It is that case's error."""
    task = load_task("sample")
    question = task.validation[0].question
    answer = lambda role, prompt: role == "task" and question in prompt and "<task>answer" in prompt   # noqa: E731
    res = _run(SEED_A, Failing(answer), 1, 1)
    assert res.case_errors == 1 and res.error is None
    # Three failed calls past the share still stop the run.
    with pytest.raises(EndpointOutage, match=r"3 of 4 LLM calls of this evaluation failed"):
        _run(SEED_A, Failing(lambda role, prompt: role == "task" and "<task>extract" not in prompt), 1, 3)

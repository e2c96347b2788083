"""A task's own scorer that passes the pre-run probe (the gold and the empty answer) but fails on
answers during the run: each such case is an error -- left out of the mean and counted, as a
failed LLM call is -- and shown wherever unscored cases are (the lineage's events, summary.json,
the console, `mstar lineage`, `mstar show`, the export header, `mstar eval`). A scorer that failed
on every case of an evaluation scored nothing: that evaluation is no score, not 0, and the run
stops, resumable (mstar.evaluation.ScorerOutage)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import mstar
from mstar.cli import main
from mstar.config import LLMConfig, SandboxConfig
from mstar.evaluation import ScorerOutage, evaluate
from mstar.llm.router import LLMRouter
from mstar.program.sources import load_program_source
from mstar.run import events
from mstar.tasks import prepare_task

PETS = ["cat", "dog", "parrot", "hamster", "rabbit", "turtle", "goldfish", "lizard"]
CITIES = ["Paris", "Lima", "Oslo", "Cairo", "Quito", "Seoul", "Perth", "Dakar"]
NAMES = ["Ann", "Ben", "Cleo", "Dan", "Eve", "Finn", "Gia", "Hugo", "Ines", "Jon", "Kai", "Lea", "Max", "Nia"]

# The scorer's evaluator service: up, or down (every call fails). Module-level so that a test can
# bring it down in the middle of a run and up again before the resume.
SERVICE = {"down": False}


def picky(answer: str, query) -> float:
    """Scores the gold and the empty answer (what the probe tries) and fails on any other: the
    offline agent answers a city exactly ("Lima") and a pet in a phrase ("dog last spring")."""
    if answer in (query.answer, ""):
        return float(answer == query.answer)
    raise RuntimeError("my evaluator cannot read this answer")


def flaky_service(answer: str, query) -> float:
    if SERVICE["down"]:
        raise ConnectionError("evaluator unreachable")
    return float(query.answer.lower() in answer.lower())


def pets_task(scorer, cities: bool = True) -> mstar.Task:
    """Who adopted which pet and moved where; without `cities`, only the pets are asked about (and
    `picky` can score none of the offline agent's answers)."""
    episodes, queries = [], []
    for i, name in enumerate(NAMES):
        episodes.append(mstar.Episode(f"{name}-pet", f"{name} adopted a {PETS[i % 8]} last spring."))
        episodes.append(mstar.Episode(f"{name}-city", f"{name} moved to {CITIES[i % 8]} in March."))
        queries.append(mstar.query(f"q-{name}-pet", f"What pet did {name} adopt?", PETS[i % 8], category="pet",
                                   evidence_episodes=[f"{name}-pet"]))
        if cities:
            queries.append(mstar.query(f"q-{name}-city", f"Where did {name} move to?", CITIES[i % 8],
                                       category="city", evidence_episodes=[f"{name}-city"]))
    cut = len(queries) * 9 // 14
    return mstar.Task("pets", episodes, validation=queries[:cut], test=queries[cut:], scorer=scorer)


# For `mstar eval --task test_scorer_errors:...` (the tests' folder on the import path).
def make_picky_task() -> mstar.Task:
    return pets_task(picky)


def make_pets_only_task() -> mstar.Task:
    return pets_task(picky, cities=False)


def _evaluate(task: mstar.Task, queries):
    _, source = load_program_source("vector_search")
    return evaluate(source, task.episodes, queries, metric=task.score, router=LLMRouter.from_config(LLMConfig()),
                    sandbox=SandboxConfig(), workers=8, embed=None)


def _unscored(cases: list[dict]) -> tuple[int, int]:
    """(cases the scorer failed on, cases an LLM call lost), counted from the cases themselves."""
    return sum(1 for c in cases if c.get("score_error")), sum(1 for c in cases if c.get("llm_error"))


# ------------------------------------------------------------------ one evaluation
def test_cases_the_scorer_failed_on_are_case_errors_and_left_out_of_the_mean():
    task = prepare_task(pets_task(picky))
    res = _evaluate(task, task.test)
    failed = [c for c in res.cases if c.score_error]
    assert failed and len(failed) < len(res.cases)          # some answers it scores, some it cannot
    assert all("my evaluator cannot read this answer" in c.score_error and c.query_id in c.score_error
               for c in failed)
    # counted: as score errors, and among the case errors every view of a run shows
    assert res.score_errors == len(failed) and res.case_errors == len(failed)
    scored = [c for c in res.cases if c.scored]
    assert res.mean_score == pytest.approx(sum(c.score for c in scored) / len(scored))
    # a category whose every case failed to score has no mean (not 0)
    lost = {c.category for c in failed} - {c.category for c in scored}
    assert lost and not lost & set(res.per_category)


def test_a_scorer_that_fails_on_every_case_scores_nothing_and_says_so_not_zero():
    task = prepare_task(pets_task(picky, cities=False))   # the probe passes: gold and empty answers
    with pytest.raises(ScorerOutage) as caught:
        _evaluate(task, task.test[:4])
    message = str(caught.value)
    assert message.startswith("the task's scorer failed on all 4 answers")
    assert "no score, not 0" in message and "RuntimeError: my evaluator cannot read this answer" in message
    assert "task 'pets': scorer on query 'q-" in message


def test_two_unscorable_cases_are_their_cases_errors_not_an_outage():
    """A race buys one or two items at a time: a scorer that fails on some answers fails on all of
    those as often as not, which says nothing of the scorer as a whole."""
    task = prepare_task(pets_task(picky, cities=False))
    res = _evaluate(task, task.test[:2])
    assert res.case_errors == res.score_errors == 2 and not any(c.scored for c in res.cases)
    assert res.per_category == {}


# ------------------------------------------------------------------ a run
def test_a_run_shows_the_cases_its_scorer_failed_on_beside_every_score(tmp_path, capsys):
    run = mstar.evolve(pets_task(picky), out=tmp_path / "run", iterations=1, static_size=4, no_preflight=True)
    out = capsys.readouterr().out
    best = run.champion
    test_cases = json.loads((run.path / "cases" / f"{best.id}.test.json").read_text())
    scorer, llm = _unscored(test_cases["cases"])
    assert scorer > 0 and llm == 0
    # summary.json and the test event: counted, and said to be the scorer's
    assert run.summary["test_case_errors"] == scorer and run.summary["test_score_errors"] == scorer
    test = next(e for e in run.events if isinstance(e, events.TestEvent))
    assert (test.case_errors, test.score_errors) == (scorer, scorer)
    # each seed's event counts what its static cases file holds
    for seed in (e for e in run.events if isinstance(e, events.SeedEvent)):
        static = json.loads((run.path / "cases" / f"{seed.program_id}.static.json").read_text())
        assert seed.case_errors == sum(_unscored(static["cases"])) == static["case_errors"]
    # the console, as the run went and at its end
    assert f"[{scorer} case errors, {scorer} by the task's scorer]" in out
    assert f"{best.id} {best.test:.3f} ({scorer} cases not scored: the task's scorer failed)" in out
    # `mstar lineage`
    assert main(["lineage", str(run.path)]) == 0
    lineage = capsys.readouterr().out
    assert f"test {best.id} {best.test:.3f} on the held-out set ({scorer} cases not scored: the task's scorer " \
           "failed)" in lineage
    failing = [e for e in events.seeds(run.events) if e.case_errors]
    assert failing
    for seed in failing:
        n = seed.case_errors
        assert f"({n} case{'s' if n > 1 else ''} not scored: the task's scorer failed)  {seed.title}" in lineage
    # `mstar show`: each such case marked, never a score
    assert main(["show", str(run.path), best.id, "--no-source"]) == 0
    shown = capsys.readouterr().out
    assert f"{scorer} not scored: the task's scorer failed" in shown
    assert shown.count("[scorer error, not scored: task 'pets': scorer on query") >= scorer
    # the export header: the mean is over the scored queries only
    header = run.export(tmp_path / "best.py").read_text()
    n = len(test_cases["cases"])
    assert f"on {n - scorer} of {n} held-out queries ({scorer} cases not scored: the task's scorer failed)" in header


def test_mstar_eval_counts_the_unscored_cases_and_shows_the_category_nothing_scored(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    assert main(["eval", "vector_search", "--task", "test_scorer_errors:make_picky_task", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["score_errors"] == out["case_errors"] > 0 and out["failed_cases"] == 0
    assert sum(out["not_scored"].values()) == out["score_errors"]
    assert main(["eval", "vector_search", "--task", "test_scorer_errors:make_picky_task"]) == 0
    text = capsys.readouterr().out
    assert f"warning {out['score_errors']} case(s) not scored, left out of the mean: the task's scorer failed " \
           f"on {out['score_errors']}" in text
    for cat, lost in out["not_scored"].items():
        scored = cat in out["per_category"]
        assert (f"  {cat:<24} " + (f"{out['per_category'][cat]:.4f}" if scored else "  -   ")
                + f"  (n={out['counts'][cat]}, {lost} not scored)") in text


def test_mstar_eval_prints_no_score_when_the_scorer_failed_on_every_case(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    assert main(["eval", "vector_search", "--task", "test_scorer_errors:make_pets_only_task"]) == 3
    captured = capsys.readouterr()
    assert "score" not in captured.out
    assert "mstar: vector_search was not scored: the task's scorer failed on all" in captured.err
    assert "RuntimeError: my evaluator cannot read this answer" in captured.err


def test_a_scorer_that_goes_down_mid_run_stops_it_resumably_and_the_resume_finishes_it(tmp_path, capsys):
    SERVICE["down"] = False
    task = pets_task(flaky_service)

    def outage(event):   # the scorer's service goes down once the first iteration is recorded
        if isinstance(event, events.IterationEvent):
            SERVICE["down"] = True
    try:
        run = mstar.evolve(task, out=tmp_path / "run", iterations=3, static_size=4, no_preflight=True,
                           on_event=outage)
    finally:
        SERVICE["down"] = False
    out = capsys.readouterr().out
    summary = json.loads((run.path / "summary.json").read_text())
    stopped = run.events[-1]
    assert run.status == "stopped" and isinstance(stopped, events.StoppedEvent)
    assert stopped.kind == summary["stop_kind"] == "scorer" and stopped.reason == summary["stop_reason"]
    assert run.stop_reason.startswith("the task's scorer failed on all")
    assert "ConnectionError: evaluator unreachable" in run.stop_reason and "LLM endpoint" not in run.stop_reason
    assert "once the task's scorer works again" in out and "no program was scored" not in out
    # nothing was scored 0: every program in the pool kept the score its scored cases gave it
    kept = run.scores()
    assert kept and all(score > 0 for score in kept.values())
    assert summary["test_score"] is None and run.iterations_done >= 1
    before = [events.to_dict(e) for e in run.events if not isinstance(e, events.StoppedEvent)]
    resumed = mstar.resume(run.path, task=task, quiet=True, no_preflight=True)
    assert resumed.status == "finished" and resumed.iterations_done == 3 and resumed.champion.test is not None
    # what was done before the stop is kept as it was
    assert [events.to_dict(e) for e in resumed.events][:len(before)] == before

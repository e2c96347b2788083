"""What a resume checks before it touches its folder: a resume refused (a task not given, a scorer
that cannot be imported, a failing preflight) leaves the folder byte for byte as it was, so the
right call goes on afterwards; a task given again must be the one the run began with in what it
scores; a finished run is not resumed, and more iterations for one are refused, not ignored."""
from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import pytest

import mstar
from mstar.cli import main
from mstar.library.task_match import task_differences, task_record
from mstar.library.task_files import task_for_run
from mstar.testing.fake_server import FakeOpenAIServer, HTTPErrorReply, offline_responder

PETS = ["cat", "dog", "parrot", "hamster", "rabbit", "turtle", "goldfish", "lizard"]
NAMES = ["Ann", "Ben", "Cleo", "Dan", "Eve", "Finn", "Gia", "Hugo", "Ines", "Jon", "Kai", "Lea"]
SMALL = dict(iterations=2, static_size=4, quiet=True, no_preflight=True)
BUDGET_STOP = "budget nearly reached: 950 tokens spent, --max-tokens is 1,000 tokens"


def contains_the_answer(answer: str, query) -> float:
    """Module level: a run of a task scored by it names it by import path in task.json."""
    return float(query.answer.lower() in answer.lower())


def starts_with_the_answer(answer: str, query) -> float:
    return float(answer.lower().startswith(query.answer.lower()))


def pets_task(scorer=contains_the_answer) -> mstar.Task:
    episodes, queries = [], []
    for i, name in enumerate(NAMES):
        episodes.append(mstar.Episode(f"{name}-pet", f"{name} adopted a {PETS[i % 8]} last spring."))
        queries.append(mstar.query(f"q-{name}", f"What pet did {name} adopt?", PETS[i % 8], category="pet",
                                   evidence_episodes=[f"{name}-pet"]))
    return mstar.Task("pets", episodes, validation=queries[:8], test=queries[8:], scorer=scorer)


def a_lambda_task() -> mstar.Task:
    return pets_task(scorer=lambda answer, query: float(query.answer in answer))


def _files(run: Path) -> dict[str, bytes]:
    """Every file of the folder and its bytes (the lock aside: it is the resume's own)."""
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file() and p.name != ".lock"}


def _stopped_by_budget(run: Path) -> None:
    """The run cut back to its seeds and first iteration and stopped there by --max-tokens 1000,
    as a run its budget stopped is left."""
    lines = (run / "lineage.jsonl").read_text().splitlines()
    stop = {"event": "stopped", "reason": BUDGET_STOP, "iteration": 1, "kind": "budget", "llm": {}}
    (run / "lineage.jsonl").write_text("\n".join([*lines[:4], json.dumps(stop)]) + "\n")
    config = json.loads((run / "config.json").read_text())
    config["llm"]["max_tokens"] = 1000
    (run / "config.json").write_text(json.dumps(config))
    (run / "summary.json").unlink()


def _max_tokens(run: Path) -> int:
    return json.loads((run / "config.json").read_text())["llm"]["max_tokens"]


# ------------------------------------------------------------------ a refused resume writes nothing
def test_a_resume_refused_for_its_task_leaves_the_folder_and_the_right_call_then_goes_on(tmp_path):
    run = mstar.evolve(a_lambda_task(), out=tmp_path / "run", **SMALL).path
    _stopped_by_budget(run)
    before = _files(run)
    with pytest.raises(mstar.SetupError, match="resume it from Python with the same task"):
        mstar.resume(run, max_tokens=10**7, quiet=True, no_preflight=True)     # the task forgotten
    assert _files(run) == before and _max_tokens(run) == 1000
    resumed = mstar.resume(run, max_tokens=10**7, task=a_lambda_task(), quiet=True, no_preflight=True)
    assert resumed.status == "finished" and _max_tokens(run) == 10**7


def test_the_command_line_refused_for_a_scorer_it_cannot_import_leaves_the_folder(tmp_path, capsys):
    run = mstar.evolve(pets_task(), out=tmp_path / "run", **SMALL).path
    _stopped_by_budget(run)
    task_file = json.loads((run / "task.json").read_text())
    assert task_file["scorer"]["ref"] == f"{__name__}:contains_the_answer"
    task_file["scorer"]["ref"] = "not_on_this_path:contains_the_answer"   # run from another folder
    (run / "task.json").write_text(json.dumps(task_file))
    before = _files(run)
    assert main(["resume", str(run), "--max-tokens", "10000000", "--quiet", "--no-preflight"]) == 2
    assert "not_on_this_path:contains_the_answer cannot be imported" in capsys.readouterr().err
    assert _files(run) == before


def test_a_resume_its_preflight_refuses_leaves_the_folder_and_goes_on_once_the_endpoint_answers(tmp_path):
    refused, base = threading.Event(), offline_responder()

    def respond(model, messages):
        if refused.is_set():
            raise HTTPErrorReply(401, "Incorrect API key provided")
        return base(model, messages)

    with FakeOpenAIServer(respond) as srv:
        run = mstar.evolve(pets_task(), out=tmp_path / "run", base_url=srv.base_url, model="m", no_cache=True,
                           **SMALL).path
        _stopped_by_budget(run)
        before = _files(run)
        refused.set()
        with pytest.raises(mstar.SetupError) as info:
            mstar.resume(run, max_tokens=10**7, quiet=True)
        assert info.value.code == 3 and _files(run) == before    # no new budget, no preflight record
        refused.clear()
        assert mstar.resume(run, max_tokens=10**7, quiet=True).status == "finished"
    assert _max_tokens(run) == 10**7


# ------------------------------------------------------------------ the task given again
def test_a_task_changed_in_what_was_scored_is_refused_naming_the_differences(tmp_path):
    run = mstar.evolve(a_lambda_task(), out=tmp_path / "run", **SMALL).path
    _stopped_by_budget(run)
    before = _files(run)
    base = a_lambda_task()
    changed = dataclasses.replace(base, test=base.test[:1], validation=tuple(
        dataclasses.replace(q, answer="zebra") for q in base.validation))
    with pytest.raises(mstar.SetupError) as info:
        mstar.resume(run, max_tokens=10**7, task=changed, quiet=True, no_preflight=True)
    message = str(info.value)
    assert f"is not the task {run} began with ({run / 'task.json'})" in message
    assert "test: 3 of the run's 4 are missing ('q-Jon', 'q-Kai', 'q-Lea')" in message
    assert "validation: 8 answer field(s) differ (e.g. 'q-Ann': 'cat' -> 'zebra')" in message
    assert _files(run) == before
    renamed = dataclasses.replace(a_lambda_task(), name="pets again", description="the same data")
    resumed = mstar.resume(run, max_tokens=10**7, task=renamed, quiet=True, no_preflight=True)
    assert resumed.status == "finished"     # a name and a description score nothing


def test_a_task_scored_by_another_importable_scorer_is_refused(tmp_path):
    run = mstar.evolve(pets_task(), out=tmp_path / "run", **SMALL).path
    _stopped_by_budget(run)
    with pytest.raises(mstar.SetupError, match=rf"scorer {__name__}:contains_the_answer -> "
                                               rf"{__name__}:starts_with_the_answer"):
        mstar.resume(run, max_tokens=10**7, task=pets_task(starts_with_the_answer), quiet=True,
                     no_preflight=True)
    assert mstar.resume(run, max_tokens=10**7, task=pets_task(), quiet=True, no_preflight=True).status == "finished"


def test_task_differences_name_what_is_scored_and_nothing_else():
    saved = json.loads(json.dumps(task_record(pets_task())))
    assert task_differences(saved, pets_task()) == []        # built again from the same data
    base = pets_task()
    reordered = dataclasses.replace(base, episodes=base.episodes[::-1])
    assert task_differences(saved, reordered) == [
        "episodes: the same ids in another order (the saved split names them by position)"]
    edited = dataclasses.replace(base, episodes=(dataclasses.replace(base.episodes[0], text="Ann has no pet."),
                                                 *base.episodes[1:]))
    assert task_differences(saved, edited) == [
        "episodes: 1 text field(s) differ (e.g. 'Ann-pet': 'Ann adopted a cat last spring.' -> 'Ann has no pet.')"]
    assert task_differences(saved, pets_task(scorer="exact_match")) == [
        f"scored by the scorer {__name__}:contains_the_answer, now by the metric 'exact_match'"]
    # A lambda has no import path: it cannot be told from another, so it is not compared.
    lambdas = json.loads(json.dumps(task_record(a_lambda_task())))
    assert lambdas["scorer"]["ref"] is None and task_differences(lambdas, a_lambda_task()) == []


def test_a_run_begun_by_name_is_compared_with_the_task_its_name_loads(tmp_path):
    from mstar.config import RunConfig
    from mstar.run.store import RunStore

    run = mstar.evolve("sample", size=0.2, iterations=1, static_size=4, quiet=True, no_preflight=True,
                       out=tmp_path / "run").path
    lines = (run / "lineage.jsonl").read_text().splitlines()
    (run / "lineage.jsonl").write_text("\n".join(lines[:3]) + "\n")      # killed after its seeds
    (run / "summary.json").unlink()
    cfg = RunConfig.from_dict(RunStore(run).read_config()[1])
    same = task_for_run(None, cfg)
    wrong = dataclasses.replace(same, test=tuple(dataclasses.replace(q, answer="nobody") for q in same.test))
    with pytest.raises(mstar.SetupError, match=r"\(task 'sample' loaded again\): test: \d+ answer field"):
        mstar.resume(run, task=wrong, quiet=True, no_preflight=True)
    assert mstar.resume(run, task=same, quiet=True, no_preflight=True).status == "finished"


# ------------------------------------------------------------------ a finished run
def test_more_iterations_for_a_finished_run_are_refused_and_bad_values_as_evolve_refuses_them(tmp_path, capsys):
    run = mstar.evolve(pets_task(), out=tmp_path / "run", **SMALL).path
    before = _files(run)
    with pytest.raises(mstar.SetupError, match=r"has finished \(2 iteration\(s\), then the test\): a finished "
                                               r"run is not resumed.*iterations=5"):
        mstar.resume(run, iterations=5, quiet=True, no_preflight=True)
    with pytest.raises(mstar.SetupError, match=r"^iterations=-1: give 0 or more$"):
        mstar.resume(run, iterations=-1, quiet=True, no_preflight=True)
    with pytest.raises(mstar.SetupError, match=r"^iterations=1: 2 iteration\(s\) are done already"):
        mstar.resume(run, iterations=1, quiet=True, no_preflight=True)
    with pytest.raises(mstar.OptionError, match=r"mstar.resume: iterations must be an integer, got '5'"):
        mstar.resume(run, iterations="5", quiet=True, no_preflight=True)
    assert mstar.resume(run, iterations=2, quiet=True, no_preflight=True).status == "finished"
    assert "has already finished; nothing to resume" in capsys.readouterr().out
    assert main(["resume", str(run), "--iterations", "5", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "a finished run is not resumed" in err and "--iterations 5" in err
    assert main(["resume", str(run), "--iterations", "-1", "--quiet"]) == 2
    assert "--iterations -1: give 0 or more" in capsys.readouterr().err
    assert main(["resume", str(run), "--max-tokens", "0", "--quiet"]) == 2
    assert "--max-tokens 0: give a budget above 0" in capsys.readouterr().err
    assert _files(run) == before

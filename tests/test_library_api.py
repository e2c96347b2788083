"""mstar as a library (issue 38): a task defined in Python with its own scorer, `mstar.evolve`
and the CLI on one code path, the Run handle, on_event, resume from Python, and bad tasks
refused before anything is spent."""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

import mstar
from mstar.testing.fake_server import FakeOpenAIServer, offline_responder

TOOLS = ["Vim", "Emacs", "Helix", "Nano", "Kate", "Zed", "Atom", "Geany"]
NAMES = ["Ada", "Bo", "Cai", "Dee", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo", "Kit", "Lu"]


def names_only_the_answer(answer: str, query) -> float:
    """A scorer the project does not ship (module level: importable by name for resume)."""
    named = {t for t in TOOLS if t.lower() in answer.lower().replace(",", " ").split()}
    return float(named == {query.answer})


def editors_task(scorer=names_only_the_answer, **changes) -> mstar.Task:
    episodes, queries = [], []
    for i, name in enumerate(NAMES):
        old, new = TOOLS[i % 8], TOOLS[(i + 3) % 8]
        episodes.append(mstar.Episode(f"{name}-1", f"{name} started out with the {old} editor."))
        episodes.append(mstar.Episode(f"{name}-2", f"{name} now uses the {new} editor."))
        queries.append(mstar.query(f"q-{name}", f"Which editor does {name} use now?", new,
                                   category="editor", evidence_episodes=[f"{name}-2"]))
    fields = dict(name="editors", episodes=episodes, validation=queries[:8], test=queries[8:], scorer=scorer)
    fields.update(changes)
    return mstar.Task(**fields)


SMALL = dict(iterations=2, static_size=4, quiet=True, no_preflight=True)


def _lineage(run: Path, spend: bool = True) -> list[dict]:
    """The lineage without what differs between two identical runs: wall times (and, for a
    resumed run, the spend: a lost knowledge base is written again)."""
    skip = ("timing", "seconds") if spend else ("timing", "seconds", "llm")

    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k not in skip and not k.endswith("_s")}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value
    return [clean(json.loads(line)) for line in (run / "lineage.jsonl").read_text().splitlines()]


# ------------------------------------------------------------------ a Python task, end to end
def test_a_python_task_with_its_own_scorer_runs_and_its_champion_is_exported_and_opened(tmp_path):
    events = []
    run = mstar.evolve(editors_task(), out=tmp_path / "run", on_event=events.append, **SMALL)
    assert run.status == "finished" and run.iterations_done == 2
    best = run.champion
    assert best.id in run.scores() and best.source.startswith(("\"\"\"", "from", "import", "#"))
    assert best.test is not None and 0.0 <= best.test <= 1.0 and best.static == run.scores()[best.id]
    # The task's scorer scored every case: each recorded score is what it says of the answer.
    cases = json.loads((tmp_path / "run" / "cases" / f"{best.id}.test.json").read_text())["cases"]
    task = editors_task()
    gold = {q.id: q for q in task.test}
    assert [c["score"] for c in cases] == [names_only_the_answer(c["answer"], gold[c["query_id"]]) for c in cases]
    # The X-ray got the evidence the episode ids name.
    static = json.loads((tmp_path / "run" / "cases" / f"{best.id}.static.json").read_text())
    assert any(c.get("attribution") for c in static["cases"])
    # on_event saw every lineage event, typed, in the order written.
    assert [type(e).__name__ for e in events] == [type(e).__name__ for e in run.events]
    assert {"SeedEvent", "IterationEvent", "TestEvent"} <= {type(e).__name__ for e in events}
    exported = run.export(tmp_path / "best.py")
    assert best.source in exported.read_text()
    with run.open_memory(store=tmp_path / "memory") as memory:
        memory.ingest("Mo now uses the Kakoune editor.")
        assert "Kakoune" in memory.ask("Which editor does Mo use now?")
    time.sleep(1.05)   # exported again a second later: its header's time differs, the program does not
    with run.open_memory(store=tmp_path / "memory") as memory:
        assert "Kakoune" in memory.ask("Which editor does Mo use now?")
    assert mstar.open_run(tmp_path / "run").champion == best


def test_a_champion_that_is_the_best_seed_carries_its_own_test_as_the_best_seed_s(tmp_path):
    run = mstar.evolve(editors_task(), out=tmp_path / "run", **{**SMALL, "iterations": 0})
    best = run.champion
    assert run.status == "finished" and best.id.startswith("seed_") and best.test is not None
    assert (best.best_seed, best.best_seed_test, best.vs_best_seed) == (best.id, best.test, None)
    assert best.test - best.best_seed_test == 0.0 and best.gain_holds is None


def test_a_run_s_task_json_given_as_a_task_file_is_scored_by_the_run_s_own_scorer(tmp_path):
    from mstar.tasks import TaskError, load_task
    run = mstar.evolve(editors_task(), out=tmp_path / "run", **{**SMALL, "iterations": 0})
    again = load_task(str(tmp_path / "run" / "task.json"))
    assert again.scorer.__name__ == "names_only_the_answer" and again.metric_name == "names_only_the_answer"
    # mstar eval with that file scores as the run did (token_f1, the file's metric field, would not).
    from mstar.cli import main
    assert main(["eval", str(run.export(tmp_path / "best.py")), "--task", str(tmp_path / "run" / "task.json"),
                 "--json", "--cases-out", str(tmp_path / "cases.json")]) == 0
    scored = json.loads((tmp_path / "cases.json").read_text())
    assert (scored["metric"], scored["mean_score"]) == ("names_only_the_answer", run.champion.test)
    mstar.evolve(editors_task(scorer=lambda a, q: float(q.answer in a)), out=tmp_path / "lam",
                 **{**SMALL, "iterations": 0})
    with pytest.raises(TaskError, match="cannot be imported again"):
        load_task(str(tmp_path / "lam" / "task.json"))


def test_the_cli_and_the_api_write_identical_lineages(tmp_path):
    from mstar.cli import main

    args = ["evolve", "--task", "sample", "--size", "0.2", "--iterations", "2", "--static-size", "4",
            "--seed", "3", "--quiet", "--no-preflight", "--no-cache"]
    assert main([*args, "--out", str(tmp_path / "cli")]) == 0
    run = mstar.evolve("sample", size=0.2, iterations=2, static_size=4, seed=3, quiet=True, no_preflight=True,
                       no_cache=True, out=tmp_path / "api")
    assert _lineage(tmp_path / "cli") == _lineage(run.path)
    cli_cfg = json.loads((tmp_path / "cli" / "config.json").read_text())
    api_cfg = json.loads((run.path / "config.json").read_text())
    assert {k: v for k, v in cli_cfg.items() if k not in ("name", "runs_dir")} == \
        {k: v for k, v in api_cfg.items() if k not in ("name", "runs_dir")}


def test_a_scorer_that_raises_on_one_case_makes_it_an_error_not_a_zero(tmp_path):
    """The probe tries the first queries only; a later one raises during the run."""
    def picky(answer: str, query) -> float:
        if query.id == "q-Hal" and answer:
            raise ValueError("cannot score Hal")
        return names_only_the_answer(answer, query)

    task = editors_task(scorer=picky)
    run = mstar.evolve(task, out=tmp_path / "run", iterations=0, static_size=8, quiet=True, no_preflight=True)
    res = json.loads((run.path / "cases" / "seed_vector_search.static.json").read_text())
    hal = next(c for c in res["cases"] if c["query_id"] == "q-Hal")
    assert "cannot score Hal" in hal["score_error"] and "q-Hal" in hal["score_error"]
    assert res["score_errors"] == 1
    others = [c["score"] for c in res["cases"] if c["query_id"] != "q-Hal"]
    assert res["mean_score"] == pytest.approx(sum(others) / len(others))


# ------------------------------------------------------------------ bad input, refused before any spend
def _bad(**changes):
    return editors_task(**changes)


BAD_TASKS = {
    "duplicate episode id": (lambda: _bad(episodes=[mstar.Episode("e", "a"), mstar.Episode("e", "b")]),
                             "episodes[1]: duplicate episode id 'e'"),
    "empty episode text": (lambda: _bad(episodes=[mstar.Episode("e", " ")]), "episodes[0] ('e'): the text"),
    "missing question": (lambda: _bad(validation=[mstar.QueryItem("q1", "", "Vim")]),
                         "validation[0] ('q1'): the question must be a non-empty string"),
    "duplicate query id": (lambda: _bad(test=[mstar.query("q-Ada", "Which?", "Vim")]),
                           "test[0]: duplicate query id 'q-Ada' (first in validation)"),
    "empty test split": (lambda: _bad(test=[]), "the test split is empty"),
    "empty validation split": (lambda: _bad(validation=[]), "the validation split is empty"),
    "unknown evidence episode": (lambda: _bad(test=[mstar.query("t1", "Which?", "Vim", evidence_episodes=["nope"])]),
                                 "evidence names no episode 'nope'"),
    "scorer returns NaN": (lambda: _bad(scorer=lambda a, q: math.nan), "returned NaN"),
    "scorer out of range": (lambda: _bad(scorer=lambda a, q: 1.5), "returned 1.5, outside [0, 1]"),
    "scorer raises": (lambda: _bad(scorer=lambda a, q: 1 / 0), "raised ZeroDivisionError"),
    "scorer returns text": (lambda: _bad(scorer=lambda a, q: "yes"), "returned str"),
}


@pytest.mark.parametrize("case", sorted(BAD_TASKS))
def test_a_bad_task_is_refused_with_one_line_and_nothing_is_spent(case, tmp_path):
    make, expected = BAD_TASKS[case]
    with FakeOpenAIServer(offline_responder()) as server:
        with pytest.raises(mstar.SetupError) as err:
            mstar.evolve(make(), out=tmp_path / "run", base_url=server.base_url, model="m", iterations=1,
                         quiet=True)
        assert server.stats()["requests"] == 0
    message = str(err.value)
    assert "'editors'" in message and expected in message and "\n" not in message
    assert not (tmp_path / "run").exists()


def test_an_unknown_or_mistyped_option_is_refused_with_the_close_names(tmp_path):
    with pytest.raises(mstar.OptionError, match=r"unknown option 'iteration'; did you mean iterations"):
        mstar.evolve("sample", iteration=3, out=tmp_path / "a")
    with pytest.raises(mstar.OptionError, match=r"static_size must be an integer, got '4'"):
        mstar.evolve("sample", static_size="4", out=tmp_path / "a")
    with pytest.raises(mstar.OptionError, match=r"selection='best': choose one of softmax, max, latest"):
        mstar.evolve("sample", selection="best", out=tmp_path / "a")
    assert not (tmp_path / "a").exists()
    opts = mstar.options()
    assert opts["iterations"] == 20 and opts["static_size"] == 25 and "confirm_budget" in opts


# ------------------------------------------------------------------ resume from Python
def test_a_python_task_is_resumed_from_its_folder_when_its_scorer_can_be_imported(tmp_path):
    run = mstar.evolve(editors_task(), out=tmp_path / "run", **SMALL)
    full = _lineage(run.path, spend=False)
    lines = (run.path / "lineage.jsonl").read_text().splitlines()
    (run.path / "lineage.jsonl").write_text("\n".join(lines[:4]) + "\n")   # the seeds and iteration 1
    (run.path / "summary.json").unlink()
    assert mstar.open_run(run.path).status == "crashed"
    resumed = mstar.resume(run.path, quiet=True, no_preflight=True)
    assert resumed.status == "finished" and _lineage(resumed.path, spend=False) == full


def test_a_python_task_whose_scorer_has_no_name_is_resumed_with_the_task(tmp_path):
    def make():
        return editors_task(scorer=lambda answer, query: float(query.answer in answer))
    run = mstar.evolve(make(), out=tmp_path / "run", **SMALL)
    lines = (run.path / "lineage.jsonl").read_text().splitlines()
    (run.path / "lineage.jsonl").write_text("\n".join(lines[:4]) + "\n")
    (run.path / "summary.json").unlink()
    with pytest.raises(mstar.SetupError, match=r"resume it from Python with the same task"):
        mstar.resume(run.path, quiet=True, no_preflight=True)
    assert mstar.resume(run.path, task=make(), quiet=True, no_preflight=True).status == "finished"


def test_a_task_named_by_import_path_runs_from_the_command_line(tmp_path, monkeypatch):
    from mstar.cli import main

    (tmp_path / "my_tasks.py").write_text(
        "import sys\nsys.path.insert(0, %r)\nfrom test_library_api import editors_task\n"
        "def make():\n    return editors_task()\n" % str(Path(__file__).parent))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    code = main(["evolve", "--task", "my_tasks:make", "--iterations", "1", "--static-size", "4", "--quiet",
                 "--no-preflight", "--out", str(tmp_path / "run")])
    assert code == 0
    cfg = json.loads((tmp_path / "run" / "config.json").read_text())
    assert cfg["task"] == "my_tasks:make"
    assert mstar.open_run(tmp_path / "run").champion.test is not None


# ------------------------------------------------------------------ Ctrl-C in a script
SCRIPT = """
import sys
import time
from pathlib import Path
import mstar
from mstar.run import events

def mark(event):
    if isinstance(event, events.IterationEvent) and event.iteration == 1:
        # The first iteration is held until the test has sent its Ctrl-C (it then writes `.sent`):
        # on a busy machine the run could otherwise end before the signal is sent.
        Path(sys.argv[2]).write_text(str(event.iteration))
        sent = Path(sys.argv[2] + ".sent")
        for _ in range(600):
            if sent.exists():
                break
            time.sleep(0.1)

mstar.evolve("sample", size=0.2, iterations=6, static_size=4, quiet=True, no_preflight=True, no_cache=True,
             base_url=sys.argv[3], model="m", out=sys.argv[1], on_event=mark)
"""


def test_ctrl_c_in_a_script_stops_the_run_resumably_and_mstar_resume_finishes_it(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    marker, folder = tmp_path / "first-iteration", tmp_path / "run"
    with FakeOpenAIServer(offline_responder(), latency_s=0.05) as server:
        env = {**os.environ, "OPENAI_API_KEY": "sk-test"}
        proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(folder), str(marker), server.base_url],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                # as from a terminal: a suite run in the background (`pytest &`)
                                # hands its children SIGINT ignored, and Python then keeps it so
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 300
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), proc.communicate()[1][-2000:]
        proc.send_signal(signal.SIGINT)
        Path(f"{marker}.sent").write_text("")
        _, err = proc.communicate(timeout=300)
        assert proc.returncode != 0, err[-3000:]        # the script stopped: the exception reached it
        assert f"interrupted (Ctrl-C); what was done is saved -- continue with: mstar.resume('{folder}')" in err
        assert "RunInterrupted" in err
        run = mstar.open_run(folder)
        assert run.status == "stopped" and run.stop_reason.startswith("interrupted (Ctrl-C)")
        done = run.iterations_done
        assert 1 <= done < 6
        resumed = mstar.resume(folder, quiet=True, no_preflight=True)
    assert resumed.status == "finished" and resumed.iterations_done == 6 and resumed.champion.test is not None


def test_an_interactive_task_of_games_is_evolved_through_the_same_door(tmp_path):
    """mstar.game: the agent plays the environment a factory builds, in its own process."""
    from mstar.testing.fake_games import FACTORY

    episodes = [mstar.Episode(f"walk-{n}", f"Goal: reach the end of the corridor. Did: step forward x{n}. Won.")
                for n in range(1, 5)]
    games = [mstar.game(f"g{n}", "reach the end of the corridor.", factory=FACTORY, kwargs={"length": n},
                        category="corridor") for n in range(1, 9)]
    task = mstar.Task("corridors", episodes, validation=games[:6], test=games[6:], scorer="success")
    assert task.interactive and task.metric_name == "success"
    run = mstar.evolve(task, out=tmp_path / "run", iterations=1, static_size=3, quiet=True, no_preflight=True)
    cases = json.loads((run.path / "cases" / "seed_vector_search.static.json").read_text())["cases"]
    assert len(cases) == 3 and all(c["answer"] in ("won", "lost") for c in cases)
    assert all(c["score"] == (1.0 if c["answer"] == "won" else 0.0) for c in cases)
    assert run.champion.test is not None


def test_games_need_an_importable_factory_and_the_success_metric():
    with pytest.raises(mstar.TaskError, match=r"factory must be 'module:callable'"):
        mstar.game("g", "win", factory="not a path")
    from mstar.testing.fake_games import FACTORY
    games = [mstar.game(f"g{n}", "win", factory=FACTORY) for n in range(2)]
    with pytest.raises(mstar.SetupError, match=r"its queries are games; score them with scorer='success'"):
        mstar.evolve(mstar.Task("g", [mstar.Episode("e", "x")], games[:1], games[1:]), quiet=True)

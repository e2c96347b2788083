"""What a Python task and `mstar.evolve` take as the user wrote it: splits given as generators or
`map`s, a single evidence id, numpy scores, an `out=` that is a file, a task name with a "/".
Each was a crash or a misleading refusal (a generator read empty by the run, an id split into
characters, NotADirectoryError after the checks, np.float32 refused, a run folder `mstar runs`
never lists)."""
from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

import mstar
from mstar.library.options import evolve_parser, resolve_config
from mstar.run.store import RunStore
from mstar.run.views import list_runs
from mstar.tasks import TaskError, prepare_task
from mstar.tasks.model import ScorerError, own_score
from mstar.testing.fake_server import FakeOpenAIServer, offline_responder

PETS = ["cat", "dog", "parrot", "hamster", "rabbit", "turtle"]
NAMES = ["Ann", "Ben", "Cleo", "Dan", "Eve", "Finn", "Gia", "Hugo", "Ines", "Jon"]
QUICK = dict(iterations=0, static_size=4, quiet=True, no_preflight=True)


def names_the_pet(answer: str, query) -> float:
    return float(query.answer in answer.lower())


def pet_records():
    episodes = [mstar.Episode(f"{n}-pet", f"{n} adopted a {PETS[i % 6]} last spring.") for i, n in enumerate(NAMES)]
    queries = [mstar.query(f"q-{n}", f"What pet did {n} adopt?", PETS[i % 6], category="pet",
                           evidence_episodes=[f"{n}-pet"]) for i, n in enumerate(NAMES)]
    return episodes, queries


def pets(scorer=names_the_pet, **fields) -> mstar.Task:
    episodes, queries = pet_records()
    return mstar.Task(**{"name": "pets", "episodes": episodes, "validation": queries[:6], "test": queries[6:],
                         "scorer": scorer, **fields})


# ------------------------------------------------------------------ splits from any iterable
def test_splits_given_as_generators_or_map_are_read_once_and_the_run_gets_all_of_them(tmp_path):
    episodes, queries = pet_records()
    task = mstar.Task("pets", episodes=(e for e in episodes), validation=map(lambda q: q, queries[:6]),
                      test=(q for q in queries[6:]), scorer=names_the_pet)
    assert task == pets() and isinstance(task.episodes, tuple)
    # The evidence links name episodes the checks can still see (they read the same tuple).
    resolved = prepare_task(task)
    assert resolved.test[0].meta["evidence_text"][0]["episode"] == "Gia-pet"
    run = mstar.evolve(task, out=tmp_path / "run", **QUICK)
    assert run.status == "finished"
    saved = json.loads((run.path / "task.json").read_text())
    assert len(saved["episodes"]) == 10 and len(saved["validation"]) == 6 and len(saved["test"]) == 4


@pytest.mark.parametrize("split, value, kind", [("episodes", mstar.Episode("e", "a text"), "Episode"),
                                                ("validation", "q-Ann", "str"), ("test", None, "NoneType"),
                                                ("episodes", {"e": "a text"}, "dict")])
def test_a_split_that_is_not_a_collection_of_records_is_refused_naming_the_field(split, value, kind):
    with pytest.raises(TaskError, match=rf"task 'pets': {split} must be a list \(or any iterable\) .*got {kind}$"):
        pets(**{split: value})


def test_an_error_inside_the_users_generator_is_its_own_not_a_bad_split():
    def broken():
        yield mstar.Episode("e", "a text")
        raise KeyError("row 2 has no text")
    with pytest.raises(KeyError, match="row 2"):
        pets(episodes=broken())


# ------------------------------------------------------------------ one evidence id or text alone
def test_a_single_evidence_id_or_text_is_one_item_not_its_characters():
    q = mstar.query("q-Ann-again", "What pet did Ann adopt?", "cat", evidence_episodes="Ann-pet",
                    evidence="Ann adopted a cat")
    assert q.meta["evidence_episodes"] == ["Ann-pet"]
    assert [u["text"] for u in q.meta["evidence_text"]] == ["Ann adopted a cat"]
    task = prepare_task(pets(test=[q]))
    assert {u["id"] for u in task.test[0].meta["evidence_text"]} == {"e1", "episode:Ann-pet"}
    one_object = mstar.query("q", "?", "cat", evidence={"text": "Ann adopted a cat", "episode": "Ann-pet"})
    assert one_object.meta["evidence_text"][0]["episode"] == "Ann-pet"
    with pytest.raises(TaskError, match=r"query 'q': evidence_episodes must be a text or a list of them, got int"):
        mstar.query("q", "?", "cat", evidence_episodes=7)


# ------------------------------------------------------------------ numpy scores
@pytest.mark.parametrize("value, expected", [(np.float32(0.5), 0.5), (np.int64(1), 1.0), (np.float64(0.25), 0.25),
                                             (Fraction(3, 4), 0.75), (0, 0.0)])
def test_any_real_number_in_range_is_a_score_and_comes_back_a_float(value, expected):
    score = own_score(lambda a, q: value, "cat", pets().test[0], "pets")
    assert score == expected and type(score) is float


@pytest.mark.parametrize("value, message", [
    (np.float32("nan"), "returned NaN; give a float in [0, 1]"),
    (np.float64(1.5), "returned 1.5, outside [0, 1]"),
    (np.float32("inf"), "returned inf, outside [0, 1]"),
    pytest.param(10 ** 400, "outside [0, 1]", id="an int too large for a float"),
    (np.bool_(True), "returned bool np.True_; give a float in [0, 1] (a bool is refused"),
    (True, "returned bool True; give a float in [0, 1] (a bool is refused"),
    ("0.5", "returned str '0.5'; give a float in [0, 1]")])
def test_a_score_that_is_not_a_real_number_in_range_is_refused_with_what_it_was(value, message):
    with pytest.raises(ScorerError) as err:
        own_score(lambda a, q: value, "cat", pets().test[0], "pets")
    assert str(err.value).startswith("task 'pets': scorer on query 'q-Gia' ") and message in str(err.value)


def test_a_run_scored_with_numpy_floats_records_plain_floats(tmp_path):
    run = mstar.evolve(pets(scorer=lambda a, q: np.float32(names_the_pet(a, q))), out=tmp_path / "run", **QUICK)
    cases = json.loads((run.path / "cases" / "seed_vector_search.static.json").read_text())
    assert cases["cases"] and all(c["score_error"] is None and c["score"] in (0.0, 1.0) for c in cases["cases"])


# ------------------------------------------------------------------ where the run folder goes
@pytest.mark.parametrize("under", ["", "sub"])
def test_out_that_is_a_file_or_inside_one_is_refused_before_anything_is_spent(under, tmp_path):
    notes = tmp_path / "results.json"
    notes.write_text("my notes\n")
    out = notes / under if under else notes
    with FakeOpenAIServer(offline_responder()) as server:
        with pytest.raises(mstar.SetupError) as err:
            mstar.evolve(pets(), out=out, base_url=server.base_url, model="m", iterations=1, quiet=True)
        assert server.stats()["requests"] == 0
    where = "is a file" if not under else f"would be inside {notes}, which is a file"
    assert str(err.value) == f"run folder {out} {where}, not a folder; choose another --out (or --name)"
    assert notes.read_text() == "my notes\n" and sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_a_new_run_folder_may_be_missing_or_empty_but_not_a_file(tmp_path):
    RunStore(tmp_path / "a" / "b").check_new()
    (tmp_path / "empty").mkdir()
    RunStore(tmp_path / "empty").check_new()
    (tmp_path / "gone").symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileExistsError, match="is a file, not a folder"):
        RunStore(tmp_path / "gone").check_new()


def test_a_task_name_with_a_slash_names_one_run_folder_that_mstar_runs_lists(tmp_path):
    run = mstar.evolve(pets(name="team/pets"), runs_dir=tmp_path, **QUICK)
    assert run.path.parent == tmp_path and run.path.name.startswith("team-pets-s0-")
    assert [r.name for r in list_runs(tmp_path)] == [run.path.name]
    with pytest.raises(mstar.SetupError, match=r"^--name 'team/pets': a run's name is one folder under --runs-dir; "
                                               r"give a path with --out"):
        mstar.evolve(pets(), runs_dir=tmp_path, name="team/pets", **QUICK)
    assert not (tmp_path / "team").exists()


def test_a_task_file_names_its_run_by_its_file_not_its_folders():
    cfg = resolve_config(evolve_parser().parse_args(["--task", "/data/tasks/helpdesk.toml", "--seed", "2"]))
    assert cfg.runs_dir == "runs" and cfg.name.startswith("helpdesk.toml-s2-")

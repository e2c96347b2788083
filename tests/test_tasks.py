import json
import re
from collections import Counter
from importlib import resources

import pytest

from mstar import tasks
from mstar.tasks.metrics import normalize_answer
from mstar.tasks import Episode, QueryItem, Task, TaskError, load_json_task, load_task, task_from_dict

MARKER_RE = re.compile(r"^\[(\d{1,2}:\d{2} [ap]m) on (\d{1,2} [A-Z][a-z]+, \d{4})\] Session (\d+) — (\w+) and (\w+)$")
TURN_RE = re.compile(r"^([A-Z][a-z]+): (\S.*)$")
CATEGORIES = {"single-hop", "temporal", "multi-hop", "open-domain"}


@pytest.fixture(scope="module")
def sample() -> Task:
    # The small hand-written task file; load_task("sample") alone now generates a bigger one
    # (mstar/tasks/sample_gen.py, tested in tests/test_sample_gen.py).
    from mstar.tasks.sample import bundled_sample_path
    return load_task("sample", bundled_sample_path())


def _by_id(task):
    return {e.id: e for e in task.episodes}


# ----------------------------------------------------------------------------- the sample task

def test_sample_shape(sample):
    assert sample.name == "sample" and sample.metric_name == "token_f1" and sample.description
    convs = Counter(e.meta["conversation"] for e in sample.episodes)
    assert len(convs) == 5 and set(convs.values()) == {4}
    assert len(sample.episodes) == 20
    queries = sample.validation + sample.test
    assert 60 <= len(queries) <= 80
    # ~2/3 validation, stratified: every conversation and every category appears on both sides.
    assert 0.6 <= len(sample.validation) / len(queries) <= 0.72
    for part in (sample.validation, sample.test):
        assert {q.category for q in part} == CATEGORIES
        assert {q.meta["conversation"] for q in part} == set(convs)
    ids = [q.id for q in queries]
    assert len(ids) == len(set(ids))
    assert len(resources.files("mstar").joinpath("data", "sample_task.json").read_bytes()) < 150_000


def test_every_episode_is_a_dated_session_of_turns(sample):
    for ep in sample.episodes:
        lines = ep.text.split("\n")
        m = MARKER_RE.match(lines[0])
        assert m, f"{ep.id}: first line is not a date marker: {lines[0]!r}"
        assert m.group(2) == ep.meta["date"] and int(m.group(3)) == ep.meta["session"]
        speakers = {m.group(4), m.group(5)}
        assert 12 <= len(lines) - 1 <= 25, f"{ep.id}: {len(lines) - 1} turns"
        for line in lines[1:]:
            t = TURN_RE.match(line)
            assert t and t.group(1) in speakers, f"{ep.id}: bad turn line {line!r}"
        # Long enough that keeping only the first 500 characters loses most of the session.
        assert len(ep.text) > 1000


def test_temporal_answers_are_session_dates(sample):
    eps = _by_id(sample)
    all_dates = {e.meta["date"] for e in sample.episodes}
    temporal = [q for q in sample.validation + sample.test if q.category == "temporal"]
    assert len(temporal) >= 10
    for q in temporal:
        assert q.answer in all_dates, q
        assert q.answer == eps[q.meta["evidence"][0]].meta["date"], q
        assert q.question.startswith("When ")


def test_single_hop_answers_are_in_the_text(sample):
    eps = _by_id(sample)
    episode_tokens = [set(normalize_answer(e.text).split()) for e in sample.episodes]
    single = [q for q in sample.validation + sample.test if q.category == "single-hop"]
    verbatim = late = 0
    for q in single:
        tokens = set(normalize_answer(q.answer).split())
        assert tokens and any(tokens <= toks for toks in episode_tokens), f"{q.id}: {q.answer!r} not in any episode"
        text = eps[q.meta["evidence"][0]].text
        pos = text.lower().find(q.answer.lower())
        verbatim += pos >= 0
        late += pos > 500
    assert verbatim >= 0.8 * len(single)
    # Facts mostly sit past the first 500 characters, so truncating programs visibly lose them.
    assert late >= 0.5 * len(single)


def test_evidence_refers_to_episodes_of_the_same_conversation(sample):
    eps = _by_id(sample)
    for q in sample.validation + sample.test:
        assert q.meta["evidence"], q.id
        for ev in q.meta["evidence"]:
            assert ev in eps and eps[ev].meta["conversation"] == q.meta["conversation"]
        if q.category == "multi-hop":
            assert len(q.meta["evidence"]) >= 2, q.id


def test_gold_answers_score_one_and_wrong_answers_less(sample):
    for q in sample.validation + sample.test:
        assert sample.metric(q.answer, q) == 1.0
    q = next(q for q in sample.validation if q.category == "temporal")
    assert sample.metric("I don't know", q) == 0.0


# ----------------------------------------------------------------------------- format, loaders, errors

def _minimal():
    return {"name": "tiny", "metric": "exact_match",
            "episodes": [{"id": "e1", "text": "[1:00 pm on 1 May, 2024] Session 1\nA: hi"}],
            "validation": [{"id": "q1", "question": "Year?", "answer": 2024, "category": None}],
            "test": []}


def test_round_trip_and_number_answers(tmp_path):
    task = task_from_dict(_minimal(), "mem")
    assert task.validation[0].answer == "2024" and task.validation[0].category is None
    assert task.metric("2024!", task.validation[0]) == 1.0           # exact_match after normalisation
    path = tmp_path / "t.json"
    path.write_text(json.dumps(task.to_dict()))
    again = load_json_task(path)
    assert again == task
    # A .json path works as a task name, and through the "json" loader.
    assert load_task(str(path)) == task
    assert load_task("json", str(path)) == task
    # The sample loader can be pointed at an edited copy.
    assert load_task("sample", str(path)).name == "tiny"


@pytest.mark.parametrize("mutate,message", [
    (lambda d: d.pop("episodes"), "missing 'episodes' list"),
    (lambda d: d.update(episodes={}), "episodes: must be a list"),
    (lambda d: d.update(episodes=[]), "episodes: is empty"),
    (lambda d: d["validation"][0].pop("question"), r"validation\[0\]: missing 'question'"),
    (lambda d: d["validation"][0].update(answer=["x"]), r"validation\[0\]: 'answer' must be a string or number"),
    (lambda d: d["episodes"][0].update(text=""), r"episodes\[0\]: 'text' must be a non-empty string"),
    (lambda d: d["episodes"].append({"id": "e1", "text": "again"}), r"episodes\[1\]: duplicate id 'e1'"),
    (lambda d: d["test"].append({"id": "q1", "question": "?", "answer": "x"}), "duplicate id 'q1'"),
    (lambda d: d.update(metric="bleu"), "unknown metric 'bleu'"),
    (lambda d: d["validation"][0].update(meta="oops"), "'meta' must be an object"),
])
def test_malformed_files_name_file_and_problem(tmp_path, mutate, message):
    data = _minimal()
    mutate(data)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TaskError, match=message) as info:
        load_json_task(path)
    assert str(path) in str(info.value)


def test_unreadable_files(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"episodes": [')
    with pytest.raises(TaskError, match=r"bad.json: not valid JSON"):
        load_json_task(bad)
    arr = tmp_path / "arr.json"
    arr.write_text("[]")
    with pytest.raises(TaskError, match="top level must be a JSON object"):
        load_json_task(arr)
    with pytest.raises(TaskError, match="no such task file"):
        load_json_task(tmp_path / "missing.json")


def test_unknown_task_and_registry(monkeypatch):
    with pytest.raises(TaskError, match="unknown task 'nope'.*sample"):
        load_task("nope")
    with pytest.raises(TaskError, match="needs a data path"):
        load_task("json")
    monkeypatch.setattr(tasks, "LOADERS", dict(tasks.LOADERS))
    fake = Task("fake", (Episode("e", "t"),), (QueryItem("q", "?", "a"),), ())
    tasks.register_loader("fake", lambda data: fake)
    assert load_task("fake") is fake
    with pytest.raises(TaskError, match="unknown metric"):
        Task("x", (), (), (), metric_name="nope")

"""Users' own data: episodes/queries JSONL files, a TOML description, and one clear error per bad input."""
import json
import re

import pytest

from mstar.cli import main
from mstar.tasks import TaskError, load_task

EPISODES = [{"id": "t1", "text": "Ticket 1: printer on floor 3 jams; fixed by replacing the fuser."},
            {"text": "Ticket 2: VPN drops every hour; fixed by updating the client to 5.2.", "meta": {"team": "net"}},
            {"id": "t3", "text": "Ticket 3: laptop will not charge; the USB-C cable was faulty."}]
QUERIES = [{"id": "a", "question": "How was the printer jam fixed?", "answer": "replacing the fuser", "category": "hardware"},
           {"question": "Which VPN client version fixed the drops?", "answer": 5.2, "category": "network"},
           {"id": "c", "question": "What was wrong with the laptop charger?", "answer": "faulty cable", "split": "test"}]


def _jsonl(path, rows):
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "tickets"
    d.mkdir()
    _jsonl(d / "episodes.jsonl", EPISODES)
    _jsonl(d / "queries.jsonl", QUERIES)
    return d


def test_folder_format(folder):
    task = load_task("jsonl", str(folder))
    assert task.name == "tickets" and task.metric_name == "token_f1"
    assert [e.id for e in task.episodes] == ["t1", "e2", "t3"] and task.episodes[1].meta == {"team": "net"}
    assert [q.id for q in task.validation] == ["a", "q2"] and [q.id for q in task.test] == ["c"]
    assert task.validation[1].answer == "5.2" and task.validation[1].category == "network"
    _jsonl(folder / "test.jsonl", [{"id": "d", "question": "Which floor had the printer?", "answer": "3"}])
    assert [q.id for q in load_task("jsonl", str(folder)).test] == ["c", "d"]


def test_toml_description(folder):
    (folder / "rubric.jsonl").write_text(json.dumps(
        {"id": "r1", "question": "Explain the VPN fix", "rubric": [{"criterion": "Mentions version 5.2", "points": 5}]}) + "\n")
    toml = folder / "task.toml"
    toml.write_text('name = "helpdesk"\ndescription = "Tickets"\nmetric = "rubric"\nepisodes = "episodes.jsonl"\n'
                    'queries = "rubric.jsonl"\ntrain_ratio = 0\n')
    for task in (load_task(str(toml)), load_task("jsonl", str(toml)), load_task("jsonl", str(folder))):
        assert task.name == "helpdesk" and task.metric_name == "rubric" and task.train_ratio == 0
        assert task.validation[0].meta["rubric"][0]["points"] == 5 and task.validation[0].answer == ""


@pytest.mark.parametrize("file,row,problem", [
    ("episodes.jsonl", "{broken", "not valid JSON"),
    ("episodes.jsonl", {"id": "x"}, "missing 'text'"),
    ("episodes.jsonl", {"id": "t1", "text": "again"}, r"duplicate id 't1'"),
    ("episodes.jsonl", {"text": "x", "meta": []}, "'meta' must be an object"),
    ("queries.jsonl", {"question": "?"}, "missing 'answer'"),
    ("queries.jsonl", {"question": "?", "answer": None}, "'answer' must be a string or number"),
    ("queries.jsonl", {"question": "", "answer": "x"}, "'question' must be a non-empty string"),
    ("queries.jsonl", {"question": "?", "answer": "x", "split": "train"}, "'split' must be 'validation' or 'test'"),
    ("queries.jsonl", {"question": "?", "answer": "x", "category": [1]}, "'category' must be a string or null"),
    ("queries.jsonl", {"id": 7, "question": "?", "answer": "x"}, "'id' must be a non-empty string"),
])
def test_malformed_rows_name_file_line_and_problem(folder, file, row, problem):
    rows = (EPISODES if file == "episodes.jsonl" else QUERIES)[:2]
    path = _jsonl(folder / file, [rows[0], row, rows[1]])
    with pytest.raises(TaskError, match=f"{re.escape(str(path))}: line 2: .*{problem}"):
        load_task("jsonl", str(folder))


def test_bad_folders_and_descriptions(folder, tmp_path):
    with pytest.raises(TaskError, match="needs --data"):
        load_task("jsonl")
    with pytest.raises(TaskError, match="expected a folder"):
        load_task("jsonl", str(folder / "episodes.jsonl"))
    (folder / "queries.jsonl").unlink()
    with pytest.raises(TaskError, match=r"queries.jsonl: no such queries file"):
        load_task("jsonl", str(folder))
    _jsonl(folder / "queries.jsonl", [dict(QUERIES[2])])
    with pytest.raises(TaskError, match="no validation queries"):
        load_task("jsonl", str(folder))
    toml = tmp_path / "t.toml"
    for text, problem in [('episodes = "e.jsonl"\nqueries = ', "not valid TOML"),
                          ('episodes = "e.jsonl"\nqueries = "q.jsonl"\nmetrc = "x"\n', r"unknown key\(s\) metrc"),
                          ('queries = "q.jsonl"\n', "'episodes' must name a JSONL file"),
                          ('episodes = "e.jsonl"\nqueries = "q.jsonl"\ntrain_ratio = -1\n', "'train_ratio' must be"),
                          (f'episodes = "{folder}/episodes.jsonl"\nqueries = "{folder}/queries.jsonl"\nmetric = "bleu"\n',
                           "unknown metric 'bleu'")]:
        toml.write_text(text)
        with pytest.raises(TaskError, match=f"{re.escape(str(toml)) if 'metric' not in problem else ''}.*{problem}"):
            load_task(str(toml))


def test_a_run_on_users_data_with_the_ratio_from_the_command_line(folder, tmp_path):
    more = [{"id": f"x{i}", "text": f"Ticket {i}: issue number {i} fixed by step {i}."} for i in range(30)]
    _jsonl(folder / "episodes.jsonl", EPISODES + more)
    out = tmp_path / "run"
    assert main(["evolve", "--task", "jsonl", "--data", str(folder), "--iterations", "1", "--seeds", "vector_search",
                 "--train-ratio", "2", "--static-size", "2", "--embed-model", "hashing", "--out", str(out), "--quiet"]) == 0
    split = json.loads((out / "split.json").read_text())
    assert len(split["train_episodes"]) == 4 and split["config"]["train_ratio"] == 2
    assert split["config"]["embedder"] == "hashing-1024"
    config = json.loads((out / "config.json").read_text())
    assert config["task"] == "jsonl" and config["evolution"]["train_ratio"] == 2

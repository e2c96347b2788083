"""ACE finance tasks (Formula, FiNER): folders and single files, their metrics, bad rows."""
import json
import re
from pathlib import Path

import pytest

from mstar.tasks.metrics import tag_list_match
from mstar.tasks import TaskError, load_task

ROOT = Path(__file__).resolve().parents[1]
ACE = (ROOT / "../shared/data/ace_finance").resolve()
needs_data = pytest.mark.skipif(not ACE.exists(), reason="../shared/data is not beside this clone")

CONTEXT = ("Use formula Current Ratio to answer the question. Answer with a numerical answer with 2 decimal "
           "places. Formula: Current Ratio = Current Assets / Current Liabilities. Question: \"A shop has "
           "assets of $%d and liabilities of $%d. Find the current ratio.\". Answer:")


def _rows(n, start=0):
    return [{"context": CONTEXT % (100 * (i + 2), 100), "target": f"{i + 2}.0"} for i in range(start, start + n)]


def _write(path: Path, rows) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


@needs_data
def test_formula_folder_uses_the_three_ace_files():
    task = load_task("formula", str(ACE))
    assert (len(task.episodes), len(task.validation), len(task.test)) == (500, 300, 200)
    assert task.metric_name == "numeric_match"
    first = json.loads((ACE / "formula_val_subset_300.jsonl").read_text().splitlines()[0])
    q = task.validation[0]
    assert q.question == first["context"] and q.answer == first["target"] and q.id == "formula_val_subset_300:1"
    assert len({q.category for q in task.validation}) == 50 and q.category and "formula" not in q.category.lower()
    assert task.episodes[0].text.endswith(" " + json.loads(
        (ACE / "formula_train_subset_500.jsonl").read_text().splitlines()[0])["target"])
    assert task.metric("8.333", q) == float(abs(8.333 - float(q.answer)) <= 0.005)
    assert task.metric(q.answer, q) == 1.0


@needs_data
def test_finer_without_a_training_file_holds_out_episodes():
    task = load_task("finer", str(ACE))
    assert task.metric_name == "tag_list_match"
    assert (len(task.episodes), len(task.validation), len(task.test)) == (200, 300, 441)
    assert {e.id for e in task.episodes}.isdisjoint(q.id for q in task.validation)
    assert "held out as episodes" in task.description
    q = task.validation[0]
    assert task.metric(q.answer, q) == 1.0
    tags = q.answer.split(",")
    assert task.metric(",".join(["Wrong"] + tags[1:]), q) == pytest.approx((len(tags) - 1) / len(tags))


def test_tag_list_match_is_positional():
    assert tag_list_match("A, B,C", "A,B,C") == 1.0
    assert tag_list_match("A,C,B", "A,B,C") == pytest.approx(1 / 3)
    assert tag_list_match("A", "A,B") == 0.5
    assert tag_list_match("A,B,X", "A,B") == 1.0          # extra predicted tags are ignored, as in ACE
    with pytest.raises(ValueError):
        tag_list_match("A", " ")


def test_single_file_and_folder_splits(tmp_path):
    task = load_task("formula", str(_write(tmp_path / "mine.jsonl", _rows(20))))
    assert (len(task.episodes), len(task.validation), len(task.test)) == (8, 8, 4)
    assert task.validation[0].category == "Current Ratio"
    folder = tmp_path / "ace"
    folder.mkdir()
    _write(folder / "formula_train_a.jsonl", _rows(6))
    _write(folder / "formula_val_a.jsonl", _rows(4, 10))
    task = load_task("formula", str(folder))
    assert (len(task.episodes), len(task.validation), len(task.test)) == (6, 4, 0)
    _write(folder / "formula_val_b.jsonl", _rows(4, 20))
    with pytest.raises(TaskError, match="several formula val files"):
        load_task("formula", str(folder))


@pytest.mark.parametrize("row,problem", [
    ("{oops", "not valid JSON"),
    ('"just a string"', "expected a JSON object, got str"),
    ({"target": "1.0"}, "missing 'context' string"),
    ({"context": "Q?", "target": ""}, "'target' must be a non-empty string or number"),
    ({"context": "Q?", "target": "about two"}, "Formula 'target' must be a number"),
])
def test_malformed_formula_rows_name_file_line_and_problem(tmp_path, row, problem):
    path = _write(tmp_path / "formula_val_x.jsonl", _rows(2) + [row] + _rows(1))
    with pytest.raises(TaskError, match=f"{re.escape(str(path))}: line 3: {problem}"):
        load_task("formula", str(path))


def test_unusable_finance_data(tmp_path):
    with pytest.raises(TaskError, match="needs --data"):
        load_task("finer")
    with pytest.raises(TaskError, match="no formula_val"):
        load_task("formula", str(tmp_path))
    with pytest.raises(TaskError, match="no such formula JSONL file"):
        load_task("formula", str(tmp_path / "missing.jsonl"))
    with pytest.raises(TaskError, match="too few rows"):
        load_task("formula", str(_write(tmp_path / "one.jsonl", _rows(1))))

"""Rubric tasks: HealthBench and PRBench rows -> held-out episodes, disjoint queries, rubrics; bad rows."""
import json
import re
from pathlib import Path

import pytest

from mstar.tasks import TaskError, load_task
from mstar.tasks.io import three_way_split

ROOT = Path(__file__).resolve().parents[1]
HEALTHBENCH = (ROOT / "../shared/data/healthbench/oss_eval_sample_9.jsonl").resolve()
PRBENCH = ROOT / "tests" / "fixtures" / "prbench_sample.jsonl"
needs_data = pytest.mark.skipif(not HEALTHBENCH.exists(), reason="../shared/data is not beside this clone")


def _hb_row(i, theme="emergency_referrals", **over):
    row = {"prompt": [{"role": "user", "content": f"Question {i}: my chest hurts, what should I do?"}],
           "rubrics": [{"criterion": f"Advises calling emergency services ({i})", "points": 8, "tags": ["axis:accuracy"]},
                       {"criterion": "Suggests ignoring the pain", "points": -6, "tags": []},
                       {"criterion": "Neutral remark", "points": 0, "tags": []}],
           "example_tags": [f"theme:{theme}"], "prompt_id": f"p{i}",
           "ideal_completions_data": {"ideal_completion": f"Call emergency services now ({i})."}}
    row.update(over)
    return row


def _write(tmp_path, rows, name="rows.jsonl"):
    path = tmp_path / name
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


# ----------------------------------------------------------------------------- HealthBench

@needs_data
def test_real_healthbench_rows():
    task = load_task("healthbench", str(HEALTHBENCH))
    rows = [json.loads(l) for l in HEALTHBENCH.read_text().splitlines()]
    assert (len(task.episodes), len(task.validation), len(task.test)) == (4, 3, 2)
    assert task.metric_name == "rubric"
    by_id = {r["prompt_id"]: r for r in rows}
    ep_ids = {e.id for e in task.episodes}
    assert ep_ids.isdisjoint(q.id for q in task.validation + task.test)
    assert ep_ids | {q.id for q in task.validation + task.test} == set(by_id)
    for q in task.validation + task.test:
        row = by_id[q.id]
        assert q.meta["messages"] == row["prompt"]
        assert [c["criterion"] for c in q.meta["rubric"]] == [r["criterion"] for r in row["rubrics"] if r["points"]]
        assert q.category == next(t[6:] for t in row["example_tags"] if t.startswith("theme:"))
        assert q.question.startswith("user: ") and q.answer.startswith("[+")
    for e in task.episodes:
        ideal = (by_id[e.id].get("ideal_completions_data") or {}).get("ideal_completion")
        assert ("Reference reply:" in e.text) == bool(ideal)
    emergency = load_task("healthbench", str(HEALTHBENCH), theme="emergency_referrals")
    assert emergency.name == "healthbench-emergency_referrals"
    assert {q.category for q in emergency.validation + emergency.test} == {"emergency_referrals"}
    assert len(emergency.episodes) + len(emergency.validation) + len(emergency.test) == 2
    with pytest.raises(TaskError, match="no rows with theme 'cardiology'; themes present: communication, "
                                        "context_seeking, emergency_referrals"):
        load_task("healthbench", str(HEALTHBENCH), theme="cardiology")


def test_split_sizes_reproduce_the_paper_table():
    assert three_way_split(477, 0.54, 0.21, 100) == (257, 120, 100)     # HealthBench health_data_tasks
    assert three_way_split(482, 0.54, 0.21, 100) == (260, 122, 100)     # HealthBench emergency_referrals
    assert three_way_split(250, 0.40, 0.20, 50) == (100, 100, 50)       # PRBench legal
    assert three_way_split(300, 0.40, 0.20, 50) == (120, 130, 50)       # PRBench finance
    assert three_way_split(2, 0.54, 0.21, 100) == (1, 1, 0)
    assert three_way_split(1, 0.54, 0.21, 100) == (0, 1, 0)


def test_a_synthetic_healthbench_file(tmp_path):
    rows = [_hb_row(i) for i in range(20)] + [_hb_row(i, theme="health_data_tasks") for i in range(20, 30)]
    task = load_task("healthbench", str(_write(tmp_path, rows)), theme="emergency_referrals")
    assert (len(task.episodes), len(task.validation), len(task.test)) == (10, 6, 4)
    q = task.validation[0]
    assert [c["points"] for c in q.meta["rubric"]] == [8, -6]            # the 0-point criterion needs no judge call
    assert q.meta["line"] == int(q.id[1:]) + 1
    again = load_task("healthbench", str(_write(tmp_path, rows)), theme="emergency_referrals")
    assert again == task                                                 # a fixed split seed


@pytest.mark.parametrize("row,problem", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object, got list"),
    (_hb_row(1, prompt=[]), "'prompt' must be a non-empty list"),
    (_hb_row(1, prompt=[{"role": "doctor", "content": "x"}]), r"prompt\[0\] must be"),
    (_hb_row(1, rubrics=[]), "'rubrics' must be a non-empty list"),
    (_hb_row(1, rubrics=[{"criterion": "x", "points": "ten"}]), r"rubrics\[0\] needs numeric 'points'"),
    (_hb_row(1, rubrics=[{"points": 3}]), r"rubrics\[0\] needs a non-empty 'criterion'"),
    (_hb_row(1, rubrics=[{"criterion": "bad", "points": -3}]), "no rubric criterion has positive points"),
    (_hb_row(1, example_tags="theme:x"), "'example_tags' must be a list of strings"),
    (_hb_row(1, ideal_completions_data="ideal"), "'ideal_completions_data' must be null"),
    (_hb_row(0), r"duplicate id 'p0' \(first on line 1\)"),
])
def test_malformed_healthbench_rows_name_file_line_and_problem(tmp_path, row, problem):
    path = _write(tmp_path, [_hb_row(0), "", row, _hb_row(5)])          # the bad row is on line 3
    with pytest.raises(TaskError, match=f"{re.escape(str(path))}: line 3: .*{problem}"):
        load_task("healthbench", str(path))


def test_unusable_healthbench_files(tmp_path):
    with pytest.raises(TaskError, match="needs --data"):
        load_task("healthbench")
    with pytest.raises(TaskError, match="is empty"):
        load_task("healthbench", str(_write(tmp_path, [""])))
    with pytest.raises(TaskError, match="1 usable rows; a rubric task needs at least 2"):
        load_task("healthbench", str(_write(tmp_path, [_hb_row(0)])))


# ----------------------------------------------------------------------------- PRBench

def test_prbench_fixture_schema():
    task = load_task("prbench", str(PRBENCH))
    rows = [json.loads(l) for l in PRBENCH.read_text().splitlines()]
    assert len(rows) == 9 and sum(bool(r.get("is_hard")) for r in rows) == 2
    items = {x.id: x for x in task.validation + task.test}
    assert len(task.episodes) + len(items) == 7                          # the two hard rows are left out
    assert {"fin-005", "leg-004"}.isdisjoint(items) and {"fin-005", "leg-004"}.isdisjoint(e.id for e in task.episodes)
    assert {x.category for x in items.values()} <= {"finance", "legal"}
    all_rows = {r["task"]: r for r in rows}
    for q in items.values():
        row = all_rows[q.id]
        assert [c["criterion"] for c in q.meta["rubric"]] == [r["title"] for r in row["rubric"]]
        for c, r in zip(q.meta["rubric"], row["rubric"]):
            a = r["annotations"]
            stored = a[a["weight_class"].replace(" ", "_") + "_weight"]
            assert c["points"] == (-abs(stored) if "detrimental" in a["weight_class"] else stored)
        assert q.meta["messages"][-1]["role"] == "user"


def _prbench_query(task_id, **kw):
    task = load_task("prbench", str(PRBENCH), **kw)
    return next((x for x in task.validation + task.test if x.id == task_id), None), task


def test_prbench_weights_references_and_reference_texts(tmp_path):
    rows = [json.loads(l) for l in PRBENCH.read_text().splitlines()]
    # Make every row a query by duplicating the file's rows under new ids (episodes take 40 %).
    many = [dict(r, task=f"{r['task']}-{k}") for k in range(3) for r in rows]
    task = load_task("prbench", str(_write(tmp_path, many)))
    items = {x.id: x for x in task.validation + task.test}
    texts = {e.id: e.text for e in task.episodes}
    fin3 = next(items[i] for i in items if i.startswith("fin-003"))
    assert [c["points"] for c in fin3.meta["rubric"]] == [8, 5, 2, -5]   # "detrimental" stored as +5
    leg3 = [k for k in list(items) + list(texts) if k.startswith("leg-003")]
    for k in leg3:   # its last prompt was answered in the file: the answer is the reference, not a turn
        if k in items:
            assert [m["role"] for m in items[k].meta["messages"]] == ["user"]
            assert "Article 3(2)" not in items[k].question
        else:
            assert "Reference reply:\nYes: GDPR applies" in texts[k]
    leg2 = next(items.get(k) or texts[k] for k in list(items) + list(texts) if k.startswith("leg-002"))
    body = leg2.question if hasattr(leg2, "question") else leg2
    assert "Reference texts:\n[1] Clause 14.2" in body and "assistant: Possibly" in body
    legal = load_task("prbench", str(_write(tmp_path, many)), theme="Legal")
    assert {x.category for x in legal.validation + legal.test} == {"legal"}


def _pr_row(**over):
    row = json.loads(PRBENCH.read_text().splitlines()[0])
    row.update(over)
    return row


def _bad_item(**ann):
    row = _pr_row()
    row["rubric"] = [dict(row["rubric"][0], annotations=dict(row["rubric"][0]["annotations"], **ann))]
    return row


@pytest.mark.parametrize("row,problem", [
    (_bad_item(critically_important_weight=None), "weight_class 'critically important' names the field "
                                                  "'critically_important_weight', which is missing"),
    (_bad_item(critically_important_weight="9"), "not a number"),
    (_bad_item(weight_class=None), "missing 'weight_class'"),
    (dict(_pr_row(), rubric=[{"id": "c1", "title": "", "annotations": {}}]), r"rubric\[0\] needs a non-empty 'title'"),
    (dict(_pr_row(), rubric="all good"), "'rubric' must be a non-empty list"),
    ({k: v for k, v in _pr_row().items() if not k.startswith("prompt_")}, "no 'prompt_0'"),
    (dict(_pr_row(), prompt_0=42), "'prompt_0' must be a string or null"),
    (dict(_pr_row(), reference_texts_0="doc"), "'reference_texts_0' must be a list of strings"),
    (dict(_pr_row(), field=3), "'field' must be a string"),
])
def test_malformed_prbench_rows_name_file_line_and_problem(tmp_path, row, problem):
    good = [json.loads(l) for l in PRBENCH.read_text().splitlines()[1:3]]
    path = _write(tmp_path, [good[0], row, good[1]])
    with pytest.raises(TaskError, match=f"{re.escape(str(path))}: line 2: .*{problem}"):
        load_task("prbench", str(path))

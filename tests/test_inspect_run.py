"""Inspection: `mstar runs`, `mstar lineage`, `mstar show` (text and --json) on a real offline run
and on a synthetic run folder with failed and duplicate iterations."""
from __future__ import annotations

import json

import pytest

from mstar.cli import main
from mstar.run.views import RunView, lineage_nodes, lineage_tree, list_runs, render_tree
from mstar.run.store import RunStore
from run_helpers import lineage, make_synthetic_run, small_run


@pytest.fixture
def synthetic(tmp_path):
    return make_synthetic_run(tmp_path / "runs" / "syn")


def test_lineage_tree_marks_best_regressions_failures_and_duplicates(synthetic):
    view = RunView(synthetic)
    assert view.best_id == "iter_001" and view.status == "finished" and view.iterations_done == 4
    roots = lineage_tree(view.nodes())
    assert [r.label for r in roots] == ["seed_a"]
    seed = roots[0]
    assert [c.label for c in seed.children] == ["iter_001", "iter_004"]
    iter1 = seed.children[0]
    assert [c.label for c in iter1.children] == ["iter_002", "iter_003"]
    assert iter1.markers == ["BEST"]
    assert iter1.children[0].markers == ["REGRESSION"] and iter1.children[0].delta == pytest.approx(-0.125)
    assert iter1.children[1].markers == ["FAILED"] and iter1.children[1].error == "reply: no patch"
    assert seed.children[1].markers == ["DUPLICATE"]
    text = "\n".join(render_tree(roots))
    assert "├── iter_001" in text and "│   ├── iter_002" in text and "│   └── iter_003" in text
    assert "(+0.250) [BEST]  Keep the newest text" in text
    assert "[FAILED]  Broken signature  -- reply: no patch" in text


def test_lineage_cli_text_and_json(synthetic, capsys):
    assert main(["lineage", "syn", "--runs-dir", str(synthetic.parent)]) == 0
    out = capsys.readouterr().out
    assert "status finished" in out and "[DUPLICATE]" in out and "[REGRESSION]" in out
    assert main(["lineage", str(synthetic), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["best_id"] == "iter_001"
    child = data["roots"][0]["children"][0]
    assert child["program_id"] == "iter_001" and child["delta"] == 0.25
    assert [c["status"] for c in child["children"]] == ["ok", "failed"]


def test_show_gives_source_diff_cases_and_reflector_reasoning(synthetic, capsys):
    assert main(["show", str(synthetic), "iter_001"]) == 0
    out = capsys.readouterr().out
    assert "== iter_001  [ok, best]  static 0.500 (+0.250 against seed_a)" in out
    assert "Title: Keep the newest text" in out and "- read() keeps the tail" in out
    assert '-        return "\\n".join(self.items)[:2000]' in out
    assert '+        return "\\n".join(self.items)[-2000:]' in out
    assert "Where does Maya work?" in out and "expected: the bakery" in out
    assert "class KnowledgeBase" in out  # the source
    # an iteration that added no child: its attempts and the rejected source
    assert main(["show", str(synthetic), "3", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["status"] == "failed" and d["program_id"] is None and d["source_name"] == "iter_003_rejected"
    assert [a["stage"] for a in d["attempts"]] == ["gates", "reply"]
    assert "def read(self, query: Query) -> str\n" in d["source"] and d["diff"].startswith("--- iter_001")
    assert main(["show", str(synthetic), "best", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["program_id"] == "iter_001"
    assert main(["show", str(synthetic), "iter_099"]) == 2
    assert "no program or iteration 'iter_099'" in capsys.readouterr().err


def test_runs_lists_status_progress_best_and_spend(tmp_path, capsys):
    runs = tmp_path / "runs"
    make_synthetic_run(runs / "a-finished")
    make_synthetic_run(runs / "b-crashed", finished=False)
    (runs / "c-broken").mkdir()
    (runs / "c-broken" / "config.json").write_text("{not json")
    held = make_synthetic_run(runs / "d-running", finished=False)
    store = RunStore(held)
    store.acquire_lock()
    try:
        rows = {r.name: r for r in list_runs(runs)}
        assert main(["runs", "--runs-dir", str(runs)]) == 0
        out = capsys.readouterr().out
    finally:
        store.release_lock()
    assert rows["a-finished"].status == "finished" and rows["a-finished"].test_score == 0.4
    assert rows["b-crashed"].status == "crashed" and rows["d-running"].status == "running"
    assert rows["b-crashed"].best_id == "iter_001" and rows["b-crashed"].best_static == 0.5  # best so far
    assert rows["a-finished"].iterations_done == 4 and rows["a-finished"].iterations_total == 4
    assert rows["a-finished"].llm_calls == 7 and rows["a-finished"].tokens == 770
    assert rows["c-broken"].status == "unreadable" and "not valid JSON" in rows["c-broken"].problem
    for name in ("a-finished", "b-crashed", "c-broken", "d-running"):
        assert name in out
    assert main(["runs", "--runs-dir", str(runs), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in data] == ["finished", "crashed", "unreadable", "crashed"]  # lock released


def test_inspection_of_a_real_run(tmp_path_factory, capsys):
    run = small_run(tmp_path_factory)
    events = lineage(run)
    assert main(["lineage", str(run), "--json"]) == 0
    tree = json.loads(capsys.readouterr().out)
    summary = json.loads((run / "summary.json").read_text())
    assert tree["best_id"] == summary["best_id"]
    labels = []

    def walk(n):
        labels.append(n["program_id"] or f"iter_{n['iteration']:03d}")
        for c in n["children"]:
            walk(c)
    for r in tree["roots"]:
        walk(r)
    expected = [e["program_id"] for e in events if e["event"] == "seed"] + \
        [e.get("program_id") or f"iter_{e['iteration']:03d}" for e in events if e["event"] == "iteration"]
    assert sorted(labels) == sorted(expected)
    child = next(e for e in events if e["event"] == "iteration" and e["status"] == "ok")
    assert main(["show", str(run), child["program_id"], "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["title"] == child["title"] and d["static_score"] == child["static_score"]
    assert d["diff"].startswith(f"--- {child['parent_id']}\n+++ {child['program_id']}")
    assert len(d["cases"]["static"]["cases"]) == 8
    assert main(["runs", "--runs-dir", str(run.parent), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)[0]
    assert row["status"] == "finished" and row["iterations_done"] == 4
    assert row["llm_calls"] == sum(1 for _ in (run / "llm_usage.jsonl").open())


def test_lineage_nodes_of_an_empty_or_unknown_event_stream():
    assert lineage_nodes([]) == []
    from mstar.run.events import from_dict

    lines = [{"event": "something-new"}, {"event": "seed", "program_id": "s", "static_score": 0.1}]
    assert from_dict(lines[0]) is None  # a kind from a later version is skipped, not an error
    nodes = lineage_nodes([e for e in map(from_dict, lines) if e is not None])
    assert [n.label for n in nodes] == ["s"]


def test_spend_counts_cache_hits_as_calls_but_not_as_tokens_spent():
    from mstar.run.spend import spend_by_role, total

    records = [
        {"role": "task", "backend": "openai", "model": "m", "prompt_tokens": 100, "completion_tokens": 10,
         "cost_usd": 0.002},
        {"role": "task", "backend": "openai", "model": "m", "prompt_tokens": 100, "completion_tokens": 10,
         "cost_usd": 0.0, "cache_hit": True},
        {"role": "reflector", "backend": "openai", "model": "r", "prompt_tokens": 900, "completion_tokens": 300,
         "cache_hit": True},
        {"role": "reflector", "backend": "openai", "model": "r", "prompt_tokens": 0, "completion_tokens": 0,
         "error": "HTTP 500"},
    ]
    spend = spend_by_role(records)
    task, reflector = spend["task"], spend["reflector"]
    assert (task.calls, task.tokens, task.cache_hits, task.saved_tokens) == (2, 110, 1, 110)
    assert task.cost_usd == pytest.approx(0.002)
    assert (reflector.calls, reflector.errors, reflector.tokens, reflector.saved_tokens) == (2, 1, 0, 1200)
    t = total(spend)
    assert (t.calls, t.tokens, t.cache_hits, t.saved_tokens) == (4, 110, 2, 1310)


def test_a_missing_run_is_named_once(tmp_path, capsys):
    # Issue 41: an absolute path was both places looked at: "looked at X and X".
    gone = tmp_path / "gone"
    assert main(["lineage", str(gone)]) == 2
    err = capsys.readouterr().err
    assert err == f"mstar: no run folder at {gone}\n" and err.count(str(gone)) == 1
    assert main(["lineage", "gone", "--runs-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"mstar: no run folder 'gone': neither gone nor {gone} exists\n"
    (tmp_path / "file.txt").write_text("x")
    assert main(["lineage", str(tmp_path / "file.txt")]) == 2
    assert "is a file, not a run folder" in capsys.readouterr().err

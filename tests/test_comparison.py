"""The comparison table (mstar.final.comparison), `mstar baselines`, program resolution of baseline
names, and evolution runs seeded from baselines. Real sandbox workers, offline LLM backend."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mstar.cli import main
from mstar.final.comparison import (DEFAULT_PROGRAMS, ComparisonTable, ProgramScore, category_columns,
                              compare, render_markdown, select_queries)
from mstar.config import LLMConfig
from mstar.llm.router import LLMRouter
from mstar.program.sources import baseline_names, builtin_programs, load_program_source, seed_names
from mstar.tasks import QueryItem, load_task

BASELINES = Path(__file__).resolve().parents[1] / "baselines"


def row(label, overall, per_category, group="", error=None, failed=0):
    return ProgramScore(program=label.lower(), label=label, group=group, overall=overall,
                        per_category=per_category, n=4, failed_cases=failed, error=error)


# ------------------------------------------------------------------ pure table logic

def test_category_columns_put_known_categories_first_with_counts():
    qs = [QueryItem(str(i), "q", "a", c) for i, c in enumerate(
        ["temporal", "zeta", "single-hop", "temporal", None, "multi-hop"])]
    assert category_columns(qs) == [("single-hop", 1), ("multi-hop", 1), ("temporal", 2), ("none", 1), ("zeta", 1)]


def test_alfworld_task_types_get_the_papers_order_and_names_and_corrupt_games_leave_the_n():
    from mstar.final.comparison import category_label
    qs = [QueryItem(str(i), "g", "", c) for i, c in enumerate(
        ["pick_two_obj_and_place", "pick_heat_then_place_in_recep", "pick_and_place_simple",
         "look_at_obj_in_light", "look_at_obj_in_light"])]
    assert category_columns(qs, left_out=["3"]) == [("pick_and_place_simple", 1), ("look_at_obj_in_light", 1),
                                                     ("pick_heat_then_place_in_recep", 1), ("pick_two_obj_and_place", 1)]
    assert [category_label(c) for c, _ in category_columns(qs)] == ["Simple", "Light", "Heat", "2-Obj"]


def test_markdown_bolds_the_best_per_column_groups_rows_and_notes_failures():
    table = ComparisonTable(task="t", split="test", metric="token_f1", n=4,
                            categories=[("single-hop", 2), ("temporal", 2)], rows=[
        row("No Memory", 0.0, {"single-hop": 0.0, "temporal": 0.0}),
        row("Vector Search", 0.5, {"single-hop": 0.75, "temporal": 0.25}, group="Retrieval"),
        row("Mem0", 0.5, {"single-hop": 0.5, "temporal": 0.5}, group="Retrieval", failed=1),
        row("Broken", 0.0, {}, group="Other", error="[static] line 3: import os"),
    ])
    md = render_markdown(table).splitlines()
    assert md[2] == "| Method | Single-hop (n=2) | Temporal (n=2) | Overall (n=4) |"   # the paper's capitalisation
    assert md[3] == "|---|---:|---:|---:|"
    assert md[4] == "| No Memory | 0.000 | 0.000 | 0.000 |"
    assert md[5] == "| *Retrieval* | | | |"
    assert md[6] == "| Vector Search | **0.750** | 0.250 | **0.500** |"
    assert md[7] == "| Mem0 | 0.500 | **0.500** | **0.500** |"          # ties are both bold
    assert md[9] == "| Broken | failed | failed | failed |"
    assert "- Mem0: 1 of 4 cases raised in write/read (scored 0)" in md
    assert "- Broken: failed -- [static] line 3: import os" in md
    data = json.loads(table.to_json())
    assert data["categories"] == [{"name": "single-hop", "n": 2}, {"name": "temporal", "n": 2}]
    assert data["rows"][1]["per_category"] == {"single-hop": 0.75, "temporal": 0.25}


def test_select_queries_checks_split_and_limit():
    task = load_task("sample")
    assert len(select_queries(task, "test", 3)) == 3
    assert len(select_queries(task, "validation")) == len(task.validation)
    with pytest.raises(ValueError, match="unknown split 'train'"):
        select_queries(task, "train")
    with pytest.raises(ValueError, match="limit must be >= 1"):
        select_queries(task, "test", 0)


# ------------------------------------------------------------------ program resolution

def test_baseline_names_resolve_like_seeds_and_paths_still_work():
    names = builtin_programs()
    assert set(DEFAULT_PROGRAMS) <= set(names)
    assert names["ace"] == "baselines" and names["vector_search"] == "seeds"
    assert not set(seed_names()) & set(baseline_names())            # one package per name
    label, source = load_program_source("graph_memory")
    assert label == "graph_memory" and "class KnowledgeBase" in source
    assert load_program_source(str(BASELINES / "selfmem.py")) == ("selfmem", (BASELINES / "selfmem.py").read_text())
    with pytest.raises(ValueError, match="baselines: ace, dynamic_cheatsheet"):
        load_program_source("no_such_program")
    with pytest.raises(FileNotFoundError):
        load_program_source("missing/program.py")


def test_every_baseline_documents_what_the_contract_forced():
    for name in baseline_names():
        doc = load_program_source(name)[1].split('"""')[1]
        assert "contract" in doc.lower(), name


# ------------------------------------------------------------------ evaluation and CLI

def test_compare_scores_programs_in_order_and_no_memory_scores_zero():
    task = load_task("sample")
    router = LLMRouter.from_config(LLMConfig())
    events = []
    table = compare(task, ["no_memory", "trajectory_retrieval"], router=router, limit=8, progress=events.append)
    assert [r.program for r in table.rows] == ["no_memory", "trajectory_retrieval"]
    assert table.n == 8 and sum(k for _, k in table.categories) == 8
    none, traj = table.rows
    assert none.overall == 0.0 and none.error is None and none.group == ""
    assert traj.overall > 0.0 and traj.group.startswith("Self-evolution")
    assert set(traj.per_category) == {c for c, _ in table.categories}
    assert [row.program for row in events] == ["no_memory", "trajectory_retrieval"]
    with pytest.raises(ValueError, match="unknown program 'nope'"):
        compare(task, ["no_memory", "nope"], router=router)


def test_baselines_command_prints_and_writes_the_table(tmp_path, capsys):
    out = tmp_path / "tables" / "sample.md"
    code = main(["baselines", "--task", "sample", "--programs", "no_memory,mem0," + str(BASELINES / "ace.py"),
                 "--limit", "6", "--out", str(out), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    md = (tmp_path / "tables" / "sample.md").read_text()
    assert printed == md
    assert "| No Memory | 0.000 |" in md and "| Mem0 |" in md
    assert "| *Other programs* |" in md and "| ace |" in md     # a file is labelled by its stem
    data = json.loads((tmp_path / "tables" / "sample.json").read_text())
    assert [r["label"] for r in data["rows"]] == ["No Memory", "Mem0", "ace"]
    assert data["split"] == "test" and data["n"] == 6


def test_baselines_command_rejects_unknown_programs(capsys):
    assert main(["baselines", "--programs", "no_memory,nope", "--quiet"]) == 2
    assert "unknown program 'nope'" in capsys.readouterr().err


# ------------------------------------------------------------------ evolution from baselines

def test_evolution_can_start_from_baselines_by_name_and_path(tmp_path):
    run = tmp_path / "run"
    code = main(["evolve", "--task", "sample", "--iterations", "1", "--static-size", "4", "--out", str(run),
                 "--seeds", "no_memory," + str(BASELINES / "dynamic_cheatsheet.py"), "--quiet"])
    assert code == 0
    seeds = [json.loads(l) for l in (run / "lineage.jsonl").read_text().splitlines() if '"seed"' in l]
    assert [e["program_id"] for e in seeds if e["event"] == "seed"] == ["seed_no_memory", "seed_dynamic_cheatsheet"]
    assert (run / "programs" / "seed_dynamic_cheatsheet.py").read_text() == (BASELINES / "dynamic_cheatsheet.py").read_text()


def test_evolve_rejects_an_unknown_seed_before_creating_a_run(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["evolve", "--task", "sample", "--seeds", "ace,nope", "--out", str(run), "--quiet"]) == 2
    assert "unknown program 'nope'" in capsys.readouterr().err
    assert not run.exists()

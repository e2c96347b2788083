"""The program work an evaluation records -- what the benchmarks' critical-path bound leaves out:
its write time (EvalResult.write_seconds, `write_s` in the lineage's timing), the worker's writes
one after another, each write keeping its own seconds in the cases file, the final evaluation
reporting its slowest program; and its reads' CPU (EvalResult.read_cpu_seconds, `read_cpu_s` /
`child_read_cpu_s`), summed over the cases. Both from one small run."""
from __future__ import annotations

import json

import pytest

from mstar.cli import main
from mstar.evaluation.records import EvalResult, WriteRecord, summarise
from mstar.run import events as ev_types

SMALL = ["--task", "sample", "--size", "0.3", "--static-size", "6", "--confirm-size", "0", "--quiet",
         "--iterations", "2"]


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("timing") / "run"
    assert main(["evolve", *SMALL, "--out", str(out)]) == 0
    return out


def test_each_write_is_timed_and_the_evaluation_sums_them(small_run):
    out = small_run
    evs = ev_types.read_lineage(out / "lineage.jsonl")
    seeds = ev_types.seeds(evs)
    assert seeds
    for e in seeds:
        record = json.loads((out / "cases" / f"{e.program_id}.static.json").read_text())
        seconds = [w["seconds"] for w in record["writes"]]
        assert seconds and all(s > 0 for s in seconds)              # every write was timed
        assert record["write_seconds"] == pytest.approx(sum(seconds), abs=2e-3)
        assert e.timing["write_s"] == record["write_seconds"]
        assert record["write_seconds"] < e.timing["eval_s"]          # a part of the evaluation
    test = next(e for e in evs if isinstance(e, ev_types.TestEvent))
    tested = [json.loads(p.read_text())["write_seconds"] for p in (out / "cases").glob("*.test.json")]
    assert tested and test.timing["write_s"] == max(tested)


def test_an_evaluation_on_a_kept_knowledge_base_wrote_nothing():
    writes = [WriteRecord("e1", "text", {}, seconds=0.25), WriteRecord("e2", "text", {}, seconds=0.5)]
    assert summarise([], writes, None, 1.0, 0.8, 0, 0, reused=False).write_seconds == 0.75
    assert summarise([], writes, None, 1.0, 0.8, 0, 0, reused=True).write_seconds == 0.0
    old = EvalResult.from_dict({"mean_score": 0.5, "cases": [], "writes": [{"episode_id": "e1", "raw_text": "",
                                                                            "item": {}}], "per_category": {}})
    assert old.write_seconds == 0.0 and old.writes[0].seconds == 0.0   # files from before the field


def test_the_evaluation_sums_its_reads_cpu_into_the_lineage(small_run):
    out = small_run
    evs = ev_types.read_lineage(out / "lineage.jsonl")
    for e in ev_types.seeds(evs):
        record = json.loads((out / "cases" / f"{e.program_id}.static.json").read_text())
        per_read = [c["read_cpu_s"] for c in record["cases"]]
        assert per_read and all(x >= 0 for x in per_read) and sum(per_read) > 0
        assert record["read_cpu_seconds"] == pytest.approx(sum(per_read), abs=2e-3)
        assert e.timing["read_cpu_s"] == record["read_cpu_seconds"]
    children = [e for e in ev_types.iterations(evs) if e.program_id]
    assert children and all(e.timing["child_read_cpu_s"] >= 0 for e in children)
    for e in children:
        record = json.loads((out / "cases" / f"{e.program_id}.static.json").read_text())
        assert e.timing["child_read_cpu_s"] == record["read_cpu_seconds"]


def test_an_evaluation_counts_what_its_questions_and_its_writes_asked(small_run):
    """EvalResult.question_tokens (what the confirmation's race prices a racer's items by,
    mstar/final/race_budget.py) and write_tokens, against the ledger's own records of each seed: the
    extractions are the writes' tokens, every other call of the seed (formulations, the reads'
    toolkit calls, answers) the questions'."""
    out = small_run
    usage = [json.loads(line) for line in (out / "llm_usage.jsonl").read_text().splitlines()]
    counted = 0
    for e in ev_types.seeds(ev_types.read_lineage(out / "lineage.jsonl")):
        record = json.loads((out / "cases" / f"{e.program_id}.static.json").read_text())
        mine = [r for r in usage if r["scope"] == e.program_id]
        tokens = lambda rs: sum(r["prompt_tokens"] + r["completion_tokens"] for r in rs)   # noqa: E731
        writes = [r for r in mine if r["kind"] == "extract_knowledge_item"]
        assert record["write_tokens"] == tokens(writes) > 0
        assert record["question_tokens"] == tokens(mine) - tokens(writes) > 0
        counted += any(r["kind"] == "toolkit" for r in mine)
    assert counted      # a seed whose reads ask the toolkit (the LLM summariser) was among them

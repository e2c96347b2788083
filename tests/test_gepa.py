"""GEPA and GEPA + Vector Search rows: the real `gepa` library over mstar's evaluator, offline."""
import json

import pytest

import mstar.gepa
from mstar.cli import main
from mstar.config import LLMConfig, SandboxConfig
from mstar.gepa import COMPONENT
from mstar.gepa.adapter import MemoryProgramAdapter, kb_ignores_constant, reflective_record, with_constant
from mstar.llm.router import LLMRouter
from mstar.offline import gepa_proposer
from mstar.offline.source_edits import constant_value
from mstar.program.sources import load_program_source
from mstar.split import make_split
from mstar.tasks import load_task

needs_gepa = pytest.mark.skipif(not mstar.gepa.available(), reason="the gepa extra is not installed")


@pytest.fixture(scope="module")
def sample():
    return load_task("sample")


def test_a_candidate_differs_from_its_seed_only_in_always_on_knowledge():
    _, seed = load_program_source("vector_search")
    cand = with_constant(seed, 'Dates matter.\nSay "when" exactly.')
    assert constant_value(cand, COMPONENT) == 'Dates matter.\nSay "when" exactly.'
    assert [l for l in seed.splitlines() if COMPONENT not in l] == [l for l in cand.splitlines() if COMPONENT not in l]
    assert kb_ignores_constant(seed) and not kb_ignores_constant(seed + f"\nX = {COMPONENT}\n")


@needs_gepa
def test_the_adapter_scores_with_mstars_evaluator_and_shares_one_knowledge_base(sample):
    _, seed = load_program_source("vector_search")
    router = LLMRouter.from_config(LLMConfig())
    seen = []
    adapter = MemoryProgramAdapter(seed, sample.episodes[:8], metric=sample.score, router=router,
                                   sandbox=SandboxConfig(), workers=4, embed=None, on_eval=seen.append)
    queries = sample.validation[:4]
    try:
        first = adapter.evaluate(queries, {COMPONENT: ""}, capture_traces=True)
        second = adapter.evaluate(queries, {COMPONENT: "RULE-MARKER: answer briefly."}, capture_traces=True)
    finally:
        adapter.close()
    assert len(first.scores) == len(first.outputs) == 4 and all(0.0 <= s <= 1.0 for s in first.scores)
    assert not seen[0].reused_kb and seen[1].reused_kb                 # ingested once, read twice
    answer_prompt = second.trajectories[0]["conversation"][2]["content"]
    assert "RULE-MARKER: answer briefly." in answer_prompt           # the candidate reached the agent
    assert "RULE-MARKER" not in first.trajectories[0]["conversation"][2]["content"]
    data = adapter.make_reflective_dataset({COMPONENT: ""}, first, [COMPONENT])
    records = data[COMPONENT]
    failed = [t for t in first.trajectories if t["score"] < 1.0] or first.trajectories
    assert len(records) == len(failed) and {"Inputs", "Generated Outputs", "Feedback"} <= set(records[0])


def test_reflective_records_carry_the_expected_answer_and_rubric_verdicts():
    case = {"question": "Is 92 normal?", "expected": "(rubric)", "answer": "Yes.", "score": 0.5, "retrieved": "",
            "score_details": {"criteria": [{"criterion": "Asks about HDL", "points": 3, "met": False,
                                            "explanation": "no"}]}}
    rec = reflective_record(case)
    assert rec["Inputs"]["question"] == "Is 92 normal?" and rec["Generated Outputs"] == "Yes."
    assert "Score: 0.50" in rec["Feedback"] and "[NOT MET] (+3 points) Asks about HDL" in rec["Feedback"]


def test_the_offline_proposer_adds_rules_and_facts_deterministically_and_stays_short():
    side = ("# Example 1\n## Inputs\n### question\nWhen did Ines adopt a rabbit?\n\n### retrieved_memory\nnothing\n\n"
            "## Generated Outputs\nunknown\n\n## Feedback\nScore: 0.00 (1.00 is a perfect answer)\n"
            "Expected answer: 1 March, 2023\n\n")
    prompt = (f"{gepa_proposer.OPENING} to perform a task for me:\n```\nBe kind.\n```\n\nexamples:\n```\n{side}```\n\n"
              f"Your task is to {gepa_proposer.REQUEST}.\nProvide the new instructions within ``` blocks.")
    assert gepa_proposer.is_proposal_prompt(prompt)
    reply = gepa_proposer.propose(prompt)
    assert reply == gepa_proposer.propose(prompt)
    text = reply.strip("`\n")
    assert text.startswith("Be kind.") and gepa_proposer.RULES["when_no_date"] in text
    assert "- When did Ines adopt a rabbit? -> 1 March, 2023" in text
    long_side = "".join(side.replace("Example 1", f"Example {i}").replace("rabbit", f"rabbit {i}") for i in range(80))
    long = prompt.replace(side, long_side)
    assert len(gepa_proposer.propose(long)) <= gepa_proposer.MAX_CHARS + 10


@needs_gepa
def test_optimise_runs_gepa_within_its_budget_and_keeps_the_history(sample):
    from mstar.gepa.optimise import optimise
    split = make_split(sample, static_size=8, rotating_size=5, train_ratio=2, seed=42)
    router = LLMRouter.from_config(LLMConfig())
    run = optimise("gepa", sample, split, router=router, sandbox=SandboxConfig(), budget=30, embed=None)
    assert run.seed == "no_memory" and run.history[0][COMPONENT] == run.seed_constant == ""
    assert 8 <= run.total_metric_calls <= 30 + 8 + 2 * 3       # gepa checks its budget between iterations
    assert run.best_score == max(h["val_score"] for h in run.history)
    assert constant_value(run.source, COMPONENT) == run.constant
    assert len(run.valset) == 8 and run.episodes == 16


@needs_gepa
def test_baselines_command_runs_the_gepa_rows_and_saves_constant_and_history(tmp_path, capsys):
    out = tmp_path / "t"
    code = main(["baselines", "--task", "sample", "--programs", "no_memory,gepa,gepa_vector_search", "--limit", "4",
                 "--gepa-budget", "30", "--static-size", "8", "--train-ratio", "2", "--embed-model", "hashing",
                 "--out", str(out), "--quiet"])
    assert code == 0
    md = capsys.readouterr().out
    assert "| *Prompt-optimising systems (memorising traction)* |" in md
    assert "| GEPA |" in md and "| GEPA + Vector Search |" in md and "optimised by GEPA" in md
    for row, seed in (("gepa", "no_memory"), ("gepa_vector_search", "vector_search")):
        saved = json.loads((tmp_path / f"t.{row}.json").read_text())
        assert saved["seed"] == seed and saved["budget"] == 30 and saved["history"]
        assert all("val_score" in h and COMPONENT in h for h in saved["history"])
        assert constant_value((tmp_path / f"t.{row}.py").read_text(), COMPONENT) == saved["constant"]
    table = json.loads((tmp_path / "t.json").read_text())
    assert [r["program"] for r in table["rows"]] == ["no_memory", "gepa", "gepa_vector_search"]
    assert table["program_embeddings"].startswith("feature hashing")


def test_without_the_package_the_gepa_rows_are_skipped_with_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(mstar.gepa, "available", lambda: False)
    code = main(["baselines", "--task", "sample", "--programs", "no_memory,gepa,gepa_vector_search", "--limit", "3",
                 "--embed-model", "hashing", "--out", str(tmp_path / "t")])
    assert code == 0
    captured = capsys.readouterr()
    assert "pip install 'mstar-evolve[gepa]'" in captured.err
    assert "| No Memory |" in captured.out and "| GEPA" not in captured.out
    assert "GEPA rows skipped" in captured.out                          # the note under the table
    assert not (tmp_path / "t.gepa.json").exists()

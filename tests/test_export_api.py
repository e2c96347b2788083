"""Export and use: `mstar export` -> `MemoryProgram.load` -> ingest -> ask, sandboxed as during
evolution; `mstar eval` gives an exported program the score the run gave it."""
from __future__ import annotations

import json
import os

import pytest

from mstar.api import MemoryProgram, MemoryProgramError
from mstar.cli import main
from mstar.llm.offline_backend import OfflineBackend
from mstar.tasks import load_task
from run_helpers import small_run
from sandbox.engine.session import SandboxError, SandboxLimits


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    run = small_run(tmp_path_factory)
    out = tmp_path_factory.mktemp("export") / "best.py"
    assert main(["export", str(run), "--out", str(out)]) == 0
    return run, out


def test_export_writes_the_program_under_a_provenance_header(exported, capsys):
    run, out = exported
    summary = json.loads((run / "summary.json").read_text())
    text = out.read_text()
    header = text.split("\n# " + "-" * 96 + "\n", 1)[0]
    assert f"# mstar memory program {summary['best_id']}" in header
    assert f"# run:      {run.name} ({run})" in header and "# task:     sample" in header
    assert f"static:   {summary['best_static']:.4f}" in header
    n_test = len(load_task("sample").test)
    assert f"test:     {summary['test_score']:.4f} on {n_test} held-out queries" in header
    assert "# models:   task offline:offline" in header and "# lineage (oldest first):" in header
    assert text.endswith((run / "programs" / f"{summary['best_id']}.py").read_text())
    assert all(line.startswith("#") for line in header.splitlines())
    # refuses to overwrite; --program picks another program; unknown ids are named
    assert main(["export", str(run), "--out", str(out)]) == 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert main(["export", str(run), "--program", "seed_vector_search", "--out", str(out.with_name("vs.py"))]) == 0
    assert "seed_vector_search" in out.with_name("vs.py").read_text().splitlines()[1]
    assert main(["export", str(run), "--program", "nope", "--out", str(out.with_name("x.py"))]) == 2
    assert "'nope' is not a program of this run" in capsys.readouterr().err


def test_exported_program_answers_as_it_did_during_the_run(exported):
    """Ingest the run's training episodes through the API and ask the static questions: the
    answers are the ones the run's evaluation recorded (same prompts, same sandbox)."""
    run, out = exported
    summary = json.loads((run / "summary.json").read_text())
    cases = json.loads((run / "cases" / f"{summary['best_id']}.static.json").read_text())["cases"]
    split = json.loads((run / "split.json").read_text())
    task = load_task("sample")
    with MemoryProgram.load(out) as memory:  # llm="offline" by default
        assert memory.worker_pid not in (None, os.getpid())  # a separate worker process
        for i in split["train_episodes"]:
            result = memory.ingest(task.episodes[i].text)
            assert result.error is None and result.item
        for case in cases:
            got = memory.ask_detailed(case["question"])
            assert got.error is None
            assert got.answer == case["answer"], case["question"]
            assert got.retrieved == case["retrieved"]


def test_user_llm_callables_serve_the_agent_and_the_toolkit(exported):
    _, out = exported
    calls = {"task": 0, "toolkit": 0}
    task_backend, toolkit_backend = OfflineBackend("task"), OfflineBackend("toolkit")

    def task_llm(messages):
        calls["task"] += 1
        return task_backend.complete(messages).text

    def toolkit_llm(messages):
        calls["toolkit"] += 1
        return toolkit_backend.complete(messages)  # a response object with .text works too

    with MemoryProgram.load(out, llm=task_llm, toolkit_llm=toolkit_llm) as memory:
        memory.ingest("Maya: I adopted a cat named Biscuit yesterday.\n[date: 8 May 2023]")
        answer = memory.ask("What is the name of Maya's cat?")
    assert "Biscuit" in answer
    assert calls["task"] == 3  # extract, formulate the query, answer
    with pytest.raises(MemoryProgramError, match="llm must be a callable"):
        MemoryProgram.load(out, llm=42)


HOSTILE_IMPORT = '''
import os
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = INSTRUCTION_QUERY = INSTRUCTION_RESPONSE = "x"
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str = field(default="", metadata={"description": "t"})


@dataclass
class Query:
    text: str = field(default="", metadata={"description": "t"})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.items = []

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.items.append(raw_text)

    def read(self, query: Query) -> str:
        return os.environ.get("OPENAI_API_KEY", "none")
'''


def test_the_api_is_sandboxed_like_evolution(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(HOSTILE_IMPORT)
    with pytest.raises(SandboxError) as info:
        MemoryProgram.load(bad)
    assert info.value.verdict.stage == "static" and "os" in info.value.verdict.message
    # a read() that never returns: the worker is killed at the deadline and the program is gone
    looping = tmp_path / "loop.py"
    looping.write_text(HOSTILE_IMPORT.replace("import os\n", "").replace(
        'return os.environ.get("OPENAI_API_KEY", "none")', "while True:\n            pass"))
    with MemoryProgram.load(looping, limits=SandboxLimits(call_timeout_s=1.0)) as memory:
        memory.ingest("hello")
        with pytest.raises(MemoryProgramError, match="sandbox worker is gone"):
            memory.ask("anything?")


def test_eval_scores_an_exported_program_as_the_run_did(exported, capsys):
    run, out = exported
    summary = json.loads((run / "summary.json").read_text())
    capsys.readouterr()
    assert main(["eval", str(out), "--task", "sample", "--split", "static", "--static-size", "8", "--json"]) == 0
    static = json.loads(capsys.readouterr().out)
    assert static["mean_score"] == summary["best_static"] and static["queries"] == 8
    assert main(["eval", str(out), "--task", "sample", "--json"]) == 0  # --split test is the default
    test = json.loads(capsys.readouterr().out)
    assert test["mean_score"] == summary["test_score"] and test["per_category"] == summary["test_per_category"]
    task = load_task("sample")
    assert sum(test["counts"].values()) == len(task.test)
    assert main(["eval", "vector_search", "--task", "sample", "--split", "validation"]) == 0
    text = capsys.readouterr().out
    assert (f"split validation: {len(task.validation)} queries, {len(task.episodes)} episodes ingested" in text
            and "single-hop" in text)
    assert main(["eval", "no_such_seed", "--task", "sample"]) == 2
    assert "unknown" in capsys.readouterr().err


def test_eval_of_a_run_folder_scores_its_champion(exported, capsys, tmp_path):
    """Issue 30, 9: `mstar eval RUN_FOLDER` said the program file did not exist."""
    run, out = exported
    summary = json.loads((run / "summary.json").read_text())
    capsys.readouterr()
    assert main(["eval", str(run), "--task", "sample", "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert scored["name"] == f"{run.name}/best_program" and scored["mean_score"] == summary["test_score"]
    (tmp_path / "plain").mkdir()
    assert main(["eval", str(tmp_path / "plain"), "--task", "sample"]) == 2
    assert "is a folder, not a program" in capsys.readouterr().err

"""sandbox.engine.gates and sandbox.engine.check through real worker processes (sandbox.engine.session)."""
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from sandbox.contract import DEFAULT_ALLOWED_IMPORTS
from sandbox.engine import check
from sandbox.engine.gates import MOCK_CORPUS, mock_item, mock_query, run_gates
from sandbox.engine.session import SandboxLimits

ROOT = Path(__file__).resolve().parent.parent
SEEDS = sorted((ROOT / "seeds").glob("[a-z]*.py"))
RICH = Path(__file__).parent / "programs" / "rich_memory_program.py"
BASE = (ROOT / "seeds" / "experience_learner.py").read_text()
LIMITS = SandboxLimits(call_timeout_s=20)


def echo_llm(messages):
    return "LLM: " + messages[-1]["content"][-40:]


def gates(source, limits=LIMITS, llm=echo_llm, **kwargs):
    return run_gates(source, allowed_imports=DEFAULT_ALLOWED_IMPORTS, limits=limits, llm=llm, **kwargs)


GOOD = [*SEEDS, RICH]


@pytest.fixture(scope="module")
def reports():
    """Every table-driven gate run, started together: a worker spends most of its ~2 s start-up
    waiting, so a few at a time keep this file fast. Each session lives in one pool thread."""
    jobs = {path.stem: (path.read_text(), {}) for path in GOOD}
    jobs.update({case[0]: (case[1], {"writes": 1, "reads": 1}) for case in FAILURES})
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(gates, source, **kw) for name, (source, kw) in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.stem)
def test_good_programs_pass_every_gate(path, reports):
    report = reports[path.stem]
    assert report.ok, report.error
    assert (report.stage, report.error, report.verdict["stage"]) == ("ok", None, "ok")
    assert len(report.read_outputs) == 3
    assert all(isinstance(o, str) and 0 < len(o) <= LIMITS.read_max_chars for o in report.read_outputs)
    assert "worker_process" in report.layers
    assert json.loads(report.to_json())["read_outputs"] == report.read_outputs
    if path.stem == "llm_summarizer":  # one toolkit call per read, labelled by window
        assert [c["window"] for c in report.llm_calls] == ["read#0", "read#1", "read#2"]
        assert report.read_outputs[0].startswith("LLM: ")
        assert all(c["reply"].startswith("LLM: ") for c in report.llm_calls)
    if path.stem == "vector_search":  # logger.debug lines come back labelled too
        assert any(line.startswith("[write#3] stored 1 chunks") for line in report.logs)


FAILURES = [
    # (id, source, stage, gate, rule, text in error)
    ("import os", "import os\n" + BASE, "static", "imports", "import_not_allowed",
     "line 1: import os is not allowed"),
    ("import-time exception", BASE + "\nX = 1 // 0\n", "import", "import", "ZeroDivisionError",
     "ZeroDivisionError"),
    ("__init__ raises", BASE.replace("self.lessons = []", "raise ValueError('no init')"),
     "init", "runtime", "exception", "no init"),
    ("write raises", BASE.replace("self.lessons.append(item.lesson_learned)",
                                  "raise KeyError('bad write')"),
     "write", "runtime", "exception", "bad write"),
    ("read returns a list", BASE.replace('return "No information stored."', "return []")
     .replace("        if not self.lessons and not self.facts:\n", "        if True:\n"),
     "read", "contract", "read output not str", "list"),
    ("read too long", BASE.replace('return f"Lessons:', 'return "x" * 5000 + f"Lessons:')
     .replace("[:3000]", ""), "read", "limits", "read output too long", "characters; the limit is 3000"),
]


@pytest.mark.parametrize("name,stage,gate,rule,needle", [(f[0], *f[2:]) for f in FAILURES],
                         ids=[f[0] for f in FAILURES])
def test_failures_name_stage_gate_and_rule(name, stage, gate, rule, needle, reports):
    report = reports[name]
    assert not report.ok
    assert (report.stage, report.verdict["gate"], report.verdict["rule"]) == (stage, gate, rule), report.error
    assert report.error.startswith(f"[{stage}/{gate}/{rule}]")
    assert needle in report.error
    json.loads(report.to_json())


def test_timeout_kills_a_looping_read():
    source = BASE.replace('if not self.lessons and not self.facts:',
                          'while True:\n            pass\n        if False:')
    report = gates(source, limits=SandboxLimits(call_timeout_s=1.5), writes=1, reads=1)
    assert (report.ok, report.stage, report.verdict["rule"]) == (False, "read", "timeout")
    assert report.seconds < 15


def test_llm_budget_and_failures_are_recorded_per_window():
    source = BASE.replace("self.facts.append(item.fact_to_remember)", '''self.facts.append(item.fact_to_remember)
        try:
            self.toolkit.llm_completion([{"role": "user", "content": "one"}])
        except Exception as exc:
            self.toolkit.logger.debug("first call failed: " + str(exc))
        try:
            self.toolkit.llm_completion([{"role": "user", "content": "two"}])
        except Exception as exc:
            self.toolkit.logger.debug("second call refused: " + type(exc).__name__)
        print("wrote", len(self.facts))''')
    calls = []

    def flaky(messages):
        calls.append(messages)
        if len(calls) == 2:
            raise RuntimeError("provider down")
        return "fine"

    report = gates(source, llm=flaky, writes=2, reads=1)
    assert report.ok, report.error
    # One call per write reaches the LLM; the second is refused by the budget in the engine.
    assert [c["window"] for c in report.llm_calls] == ["write#0", "write#1"]
    assert report.llm_calls[0]["reply"] == "fine"
    assert report.llm_calls[1]["error"] == "RuntimeError: provider down"
    assert "[write#1] first call failed: RuntimeError: provider down" in report.logs
    assert report.logs.count("[write#0] second call refused: LLMBudgetExceeded") == 1
    assert report.logs.count("[write#1] second call refused: LLMBudgetExceeded") == 1
    assert "[write#1] wrote 2" in report.logs  # print() inside a method lands in that op's logs


def test_mock_items_follow_the_schema():
    schema = [{"name": "when_said", "type": "Optional[str]"}, {"name": "facts", "type": "list[str]"},
              {"name": "n", "type": "int"}, {"name": "x", "type": "float"}, {"name": "ok", "type": "bool"},
              {"name": "text", "type": "str"}]
    item = mock_item(schema, MOCK_CORPUS[2], 2)
    assert item["when_said"] == "2023-07-02" and item["n"] == 3 and item["x"] == 0.5
    assert item["facts"][:2] == ["Jon", "Gina"] and "dance studio" in item["text"]
    query = mock_query([{"name": "top_k", "type": "int"}, {"name": "q", "type": "str"}], "Where is Jon?", 0)
    assert query == {"top_k": 5, "q": "Where is Jon?"}


def test_check_cli(tmp_path, capsys):
    assert check.main([str(SEEDS[0])]) == 0
    text = capsys.readouterr().out
    assert text.startswith("ok: True\nstage: ok\n") and "read_outputs (3):" in text
    bad = tmp_path / "bad.py"
    bad.write_text("from typing import sys\n" + BASE)
    assert check.main([str(bad), "--json", "--timeout", "10"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert (data["ok"], data["stage"], data["verdict"]["rule"]) == (False, "static", "import_name_not_allowed")
    assert set(data) >= {"ok", "stage", "error", "read_outputs", "logs", "llm_calls", "layers"}


def test_the_gates_hand_their_worker_to_the_given_closer():
    source = SEEDS[0].read_text()
    handed = []
    report = gates(source, close=handed.append)
    assert report.ok and len(handed) == 1
    session = handed[0]
    assert session.alive()          # the caller disposes of it (mstar closes it in the background)
    session.close()
    assert not session.alive()

"""`python -m sandbox PROGRAM.py [--json]` as a user runs it: a real subprocess, real workers.

Checks the documented JSON fields, the window labels of toolkit LLM calls, the text rendering
and the exit statuses (0 pass, 1 a gate failed, 2 bad usage).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "seeds" / "experience_learner.py"
HOSTILE = Path(__file__).parent / "hostile"
def hostile(name: str) -> str:
    [path] = HOSTILE.glob(f"h[0-9][0-9][0-9]_{name}.py")
    return str(path)


FIELDS = {"ok", "stage", "error", "verdict", "read_outputs", "logs", "llm_calls", "llm_refused", "layers",
          "seconds"}

LLM_EVERY_OP = SEED.read_text().replace(
    "self.facts.append(item.fact_to_remember)", '''self.facts.append(item.fact_to_remember)
        note = self.toolkit.llm_completion([{"role": "user", "content": "note " + raw_text[:40]}])
        self.toolkit.logger.debug("noted " + str(len(note)))
        try:
            self.toolkit.llm_completion([{"role": "user", "content": "a second call"}])
        except Exception as exc:
            self.toolkit.logger.debug("second: " + type(exc).__name__)''').replace(
    "        if not self.lessons and not self.facts:", '''        summary = self.toolkit.llm_completion([{"role": "user", "content": "sum " + query.query_text}])
        print("summary", len(summary))
        if not self.lessons and not self.facts:''')
RUNTIME_FAILURE = SEED.read_text().replace("self.lessons.append(item.lesson_learned)",
                                           "raise KeyError('no lessons today')")


def check(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run([sys.executable, "-m", "sandbox", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("programs")
    files = {"llm": base / "llm_every_op.py", "runtime": base / "runtime_failure.py"}
    files["llm"].write_text(LLM_EVERY_OP)
    files["runtime"].write_text(RUNTIME_FAILURE)
    jobs = {
        "seed_json": (str(SEED), "--json"),
        "seed_text": (str(SEED),),
        "llm_json": (str(files["llm"]), "--json"),
        "llm_text": (str(files["llm"]),),
        "hostile_json": (hostile("import_os"), "--json"),
        "runtime_json": (str(files["runtime"]), "--json", "--timeout", "15"),
        "timeout_json": (hostile("loop_in_read"), "--json", "--timeout", "1.5"),
        "missing": (str(base / "nope.py"),),
        "bad_timeout": (str(SEED), "--timeout", "0"),
    }
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(check, *args) for name, args in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


def as_json(proc: subprocess.CompletedProcess) -> dict:
    data = json.loads(proc.stdout)  # stdout is exactly one JSON object
    assert set(data) >= FIELDS, set(FIELDS) - set(data)
    return data


def test_passing_program_json(runs):
    proc = runs["seed_json"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = as_json(proc)
    assert (data["ok"], data["stage"], data["error"]) == (True, "ok", None)
    assert data["verdict"]["stage"] == "ok"
    assert len(data["read_outputs"]) == 3 and all(isinstance(o, str) and o for o in data["read_outputs"])
    assert {"worker_process", "rlimits", "toolkit_capabilities"} <= set(data["layers"])
    assert data["llm_calls"] == [] and data["llm_refused"] == []


def test_llm_calls_are_labelled_by_window(runs):
    proc = runs["llm_json"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = as_json(proc)
    windows = [call["window"] for call in data["llm_calls"]]
    assert windows == ["write#0", "write#1", "write#2", "write#3", "read#0", "read#1", "read#2"]
    assert all(isinstance(call["reply"], str) and call["messages"][0]["role"] == "user"
               for call in data["llm_calls"])
    assert data["llm_calls"][0]["messages"][0]["content"].startswith("note ")
    assert data["llm_refused"] == [{"window": f"write#{i}", "count": 1} for i in range(4)]
    assert "[write#0] second: LLMBudgetExceeded" in data["logs"]
    assert any(line.startswith("[read#2] summary ") for line in data["logs"])


def test_text_rendering(runs):
    text = runs["seed_text"].stdout
    assert runs["seed_text"].returncode == 0
    assert text.startswith("ok: True\nstage: ok\nerror: -\n")
    assert "read_outputs (3):" in text and "--- read#0" in text and "layers: worker_process" in text
    llm = runs["llm_text"].stdout
    assert "- write#0: 1 message(s)" in llm and "- read#2: 1 message(s)" in llm
    assert "- write#3: 1 more call(s) refused (over the per-op budget)" in llm


def test_static_rejection(runs):
    proc = runs["hostile_json"]
    assert proc.returncode == 1
    data = as_json(proc)
    assert (data["ok"], data["stage"]) == (False, "static")
    assert data["error"].startswith("[static/imports/import_not_allowed] line 7: import os is not allowed")
    assert data["verdict"]["line"] == 7 and data["read_outputs"] == []


def test_runtime_failure_and_timeout(runs):
    proc = runs["runtime_json"]
    assert proc.returncode == 1
    data = as_json(proc)
    assert (data["stage"], data["verdict"]["gate"], data["verdict"]["rule"]) == ("write", "runtime", "exception")
    assert "KeyError: 'no lessons today'" in data["error"] and data["verdict"]["line"]
    proc = runs["timeout_json"]
    assert proc.returncode == 1
    data = as_json(proc)
    assert (data["stage"], data["verdict"]["rule"]) == ("read", "timeout")
    assert "1.5-second wall-clock limit" in data["error"]


def test_usage_errors_exit_2(runs):
    assert runs["missing"].returncode == 2 and "cannot read" in runs["missing"].stderr
    assert runs["bad_timeout"].returncode == 2 and "--timeout must be > 0" in runs["bad_timeout"].stderr


def test_the_old_name_python_m_sandbox_check_still_works(tmp_path):
    """Issue 30, 9: `python -m sandbox.check`, the documented checker command, had gone when the
    checker moved to `python -m sandbox`; it is an alias again, with the same output and exit codes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    new, old = ([sys.executable, "-m", module, hostile("import_os"), "--json"] for module in ("sandbox", "sandbox.check"))
    results = [subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120) for cmd in (new, old)]
    assert [r.returncode for r in results] == [1, 1], results[1].stderr[-2000:]
    verdicts = [json.loads(r.stdout)["verdict"] for r in results]
    assert verdicts[0] == verdicts[1] and verdicts[0]["stage"] == "static"
    usage = subprocess.run([sys.executable, "-m", "sandbox.check"], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=60)
    assert usage.returncode == 2 and "usage: python -m sandbox.check" in usage.stderr

"""Hostile memory programs (tests/hostile/h*.py) against the real sandbox, effects checked from outside.

Each file is a complete memory program with the contract's shape, so it gets past the shape
checks and actually tries its attack. Its header says the attack and what must happen:

    # outcome: static imports import_not_allowed      stage gate rule (alternatives joined by ||)
    # outcome: ok                                      ran to the end, harmlessly
    # message: <text>                                  must appear in the verdict's message
    # output: <text>                                   must appear in a read() output

Every program runs in its own worker (one fork server for the whole corpus, started after a fake
secret was put into this process's environment), with the same driver: load, two writes, two reads.
The raw text and every str field of items and queries is a unique marker path in an empty
world-writable directory. Checked from outside, for every program:
- the verdict (stage, gate, rule, message) or the harmless outcome;
- the marker directory is still empty (no file written by any route);
- the secret appears nowhere the engine received: outputs, logs, verdicts, LLM prompts, worker output;
- at most one toolkit LLM call per op reached the engine's LLM, none during load, no huge prompt;
- logs stay within the per-op cap;
- the worker's process group is gone after the session ends;
and, after the whole corpus, the engine (its fork server included) still runs a normal program.
The same corpus also goes through `sandbox.engine.gates.run_gates` (what `python -m sandbox` runs).
"""
from __future__ import annotations

import json
import os
import re
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sandbox.contract import DEFAULT_ALLOWED_IMPORTS
from sandbox.engine.forkserver import ForkServerLauncher
from sandbox.engine.gates import run_gates
from sandbox.engine.session import ProgramSession, SandboxError, SandboxLimits, SubprocessLauncher
from sandbox.worker.toolkit import MAX_LOG_LINES

HOSTILE = Path(__file__).parent / "hostile"
PROGRAMS = sorted(HOSTILE.glob("h*.py"))
ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "seeds" / "vector_search.py"
LIMITS = SandboxLimits(call_timeout_s=2.5, memory_mb=768, cpu_s=60, max_log_chars=8000)
SECRET_VAR = "MSTAR_HOSTILE_SECRET"  # the programs ask for this name
SECRET = f"sk-hostile-{uuid.uuid4().hex}"
LLM_PROMPT_CAP = 200_000  # sandbox.engine.llm_proxy.LLM_PROMPT_MAX_CHARS
LOG_SLACK = 500  # the "[n more log messages dropped]" note and cut markers
STAGES = ("static", "compile", "import", "init", "write", "read", "ok")


@dataclass(frozen=True)
class Expectation:
    attack: str
    outcomes: tuple[tuple[str, str, str], ...]  # (stage, gate, rule); ("ok", "", "") = ran harmlessly
    message: str = ""
    output: str = ""

    @property
    def ok(self) -> bool:
        return self.outcomes == (("ok", "", ""),)


def read_expectation(path: Path) -> Expectation:
    header: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        key, _, value = line[1:].strip().partition(":")
        header.setdefault(key.strip(), value.strip())
    if "outcome" not in header or "ATTACK" not in header or "EXPECTED" not in header:
        raise ValueError(f"{path.name}: header needs # ATTACK:, # EXPECTED: and # outcome: lines")
    outcomes = []
    for alternative in header["outcome"].split("||"):
        words = alternative.split()
        if words == ["ok"]:
            outcomes.append(("ok", "", ""))
        elif len(words) >= 3 and words[0] in STAGES:
            outcomes.append((words[0], words[1], " ".join(words[2:])))
        else:
            raise ValueError(f"{path.name}: bad outcome {alternative!r}")
    return Expectation(header["ATTACK"], tuple(outcomes), header.get("message", ""), header.get("output", ""))


@dataclass
class HostileRun:
    verdict: dict | None = None  # None: every op succeeded
    outputs: list[str] = field(default_factory=list)
    logs: dict[str, list[str]] = field(default_factory=dict)  # window -> lines
    llm_calls: list[tuple[str, int]] = field(default_factory=list)  # (window, prompt chars) that reached the LLM
    llm_text: list[str] = field(default_factory=list)
    worker_group: int | None = None  # the process group: keeper, init and worker
    group_left: list[int] = field(default_factory=list)
    marker_dir_left: list[str] = field(default_factory=list)
    worker_output: str = ""
    seconds: float = 0.0

    def everything_the_engine_saw(self) -> str:
        return json.dumps([self.verdict, self.outputs, self.logs, self.llm_text, self.worker_output])


def processes_in_group(pgid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()  # after "pid (comm)": state ppid pgrp ...
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry))
    return found


def field_values(schema: list[dict], marker: str) -> dict:
    values = {"str": marker, "Optional[str]": marker, "list[str]": [marker], "int": 1, "float": 0.5,
              "bool": False}
    return {spec["name"]: values.get(spec.get("type"), marker) for spec in schema}


def run_hostile(path: Path, launcher, limits: SandboxLimits = LIMITS) -> HostileRun:
    run = HostileRun()
    marker_dir = tempfile.mkdtemp(prefix="mstar-hostile-", dir="/tmp")
    os.chmod(marker_dir, 0o1777)  # the worker runs as nobody: a successful attack must be able to write
    marker = os.path.join(marker_dir, "marker")
    window = ["load"]

    def llm(messages: list[dict]) -> str:
        text = "\n".join(m["content"] for m in messages)
        run.llm_calls.append((window[0], len(text)))
        run.llm_text.append(text)
        return "toolkit reply"

    started = time.monotonic()
    session = ProgramSession(path.read_text(), allowed_imports=DEFAULT_ALLOWED_IMPORTS, limits=limits,
                             llm=llm, launcher=launcher)
    try:
        info = session.start()
        run.worker_group = session.group_pid
        run.logs["load"] = list(info.logs)
        for i in range(2):
            window[0] = f"write#{i}"
            run.logs[window[0]] = session.write(field_values(info.knowledge_item_schema, marker), marker).logs
        for i in range(2):
            window[0] = f"read#{i}"
            result = session.read(field_values(info.query_schema, marker))
            run.logs[window[0]] = result.logs
            run.outputs.append(result.output)
    except SandboxError as exc:
        run.verdict = {"stage": exc.verdict.stage, "gate": exc.verdict.gate, "rule": exc.verdict.rule,
                       "message": exc.verdict.message, "line": exc.verdict.line}
        run.logs.setdefault(window[0], []).extend(getattr(exc, "logs", None) or [])
    finally:
        run.worker_group = run.worker_group or session.group_pid
        session.close()
        run.worker_output = session.worker_output()
        run.seconds = time.monotonic() - started
    if run.worker_group:
        deadline = time.monotonic() + 5
        while (left := processes_in_group(run.worker_group)) and time.monotonic() < deadline:
            time.sleep(0.05)
        run.group_left = left
    run.marker_dir_left = os.listdir(marker_dir)
    for name in run.marker_dir_left:  # leave /tmp clean even when a test fails
        os.remove(os.path.join(marker_dir, name))
    os.rmdir(marker_dir)
    return run


@pytest.fixture(scope="module")
def launcher():
    """One fork server for the corpus, started after the secret entered this process's environment
    (so a leak of the engine's environment into the server or its workers would show)."""
    previous = os.environ.get(SECRET_VAR)
    os.environ[SECRET_VAR] = SECRET
    server = ForkServerLauncher()
    server.start()
    yield server
    server.shutdown()
    if previous is None:
        os.environ.pop(SECRET_VAR, None)
    else:
        os.environ[SECRET_VAR] = previous


@pytest.fixture(scope="module")
def runs(launcher):
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {path.stem: pool.submit(run_hostile, path, launcher) for path in PROGRAMS}
        return {name: future.result() for name, future in futures.items()}


def test_corpus_is_large_and_every_header_parses():
    assert len(PROGRAMS) >= 45
    expectations = [read_expectation(path) for path in PROGRAMS]
    assert sum(e.ok for e in expectations) >= 10  # contained at run time, not only refused statically
    assert sum(e.outcomes[0][0] == "static" for e in expectations) >= 20
    assert sum(any(o[2] == "timeout" for o in e.outcomes) for e in expectations) >= 8


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_hostile_program_is_rejected_or_contained(path, runs):
    expected = read_expectation(path)
    run = runs[path.stem]
    # 1. The outcome the header promises.
    if expected.ok:
        assert run.verdict is None, f"expected to run harmlessly, got {run.verdict}"
        if expected.output:
            assert any(expected.output in out for out in run.outputs), run.outputs
    else:
        assert run.verdict is not None, f"expected a failed gate, but every op succeeded: {run.outputs}"
        got = (run.verdict["stage"], run.verdict["gate"], run.verdict["rule"])
        assert got in expected.outcomes, f"{got} not in {expected.outcomes}: {run.verdict['message']}"
        assert expected.message in run.verdict["message"], run.verdict
        if got[0] in ("static", "compile"):
            assert run.verdict["message"]
        if got[2] == "timeout":
            assert run.seconds < LIMITS.call_timeout_s * 4 + 10
    # 2. Effects, from outside.
    assert run.marker_dir_left == [], "the program created files in the marker directory"
    assert SECRET not in run.everything_the_engine_saw(), "the engine's secret reached the program"
    assert [w for w, _ in run.llm_calls if w == "load"] == [], "toolkit LLM served during import/__init__"
    windows = [w for w, _ in run.llm_calls]
    assert all(windows.count(w) <= 1 for w in windows), f"more than one LLM call per op: {windows}"
    assert all(size <= LLM_PROMPT_CAP for _, size in run.llm_calls)
    for window, lines in run.logs.items():
        assert sum(map(len, lines)) <= LIMITS.max_log_chars + LOG_SLACK, f"log cap broken in {window}"
        assert len(lines) <= MAX_LOG_LINES + 1, f"log line cap broken in {window}"
    assert run.worker_group is not None or run.verdict["stage"] == "static"
    assert run.group_left == [], f"processes of worker group {run.worker_group} survived: {run.group_left}"


def test_llm_budget_attacks_reach_the_llm_once_per_op(runs):
    def windows(name):
        [key] = [k for k in runs if k.endswith(name)]
        return [w for w, _ in runs[key].llm_calls]

    assert windows("llm_two_calls_one_op") == ["read#0", "read#1"]
    assert windows("llm_stored_function") == ["read#0", "read#1"]
    assert windows("llm_retry_loop") == ["write#0", "write#1"]
    assert windows("llm_in_init") == []
    assert windows("llm_prompt_bomb") == []  # refused before it reached the provider
    assert windows("llm_budget_exception_swallowed") == ["read#0", "read#1"]


def test_floods_are_capped(runs):
    [flood] = [r for name, r in runs.items() if name.endswith("log_flood")]
    assert any("dropped" in line for line in flood.logs["write#0"])
    assert sum(map(len, flood.logs["read#0"])) <= LIMITS.max_log_chars + LOG_SLACK
    [empty] = [r for name, r in runs.items() if name.endswith("log_flood_empty_lines")]
    for window in ("write#0", "read#0"):
        assert len(empty.logs[window]) == MAX_LOG_LINES + 1
        assert empty.logs[window][-1].endswith(f"per-op log cap of {MAX_LOG_LINES} lines]")


def test_engine_and_fork_server_survive_the_corpus(runs, launcher):
    assert launcher.servers_started == 1, "a hostile program took the fork server down"
    assert launcher.server_pid is not None
    report = run_gates(SEED.read_text(), allowed_imports=DEFAULT_ALLOWED_IMPORTS, limits=LIMITS,
                       llm=lambda messages: "reply")
    assert report.ok, report.error


ENV_PROBES = ("exfil_repr_probe", "proc_environ_via_sqlite", "optional_import_guarded")


@pytest.mark.parametrize("name", ENV_PROBES)
def test_environment_probes_with_fresh_interpreters(name, monkeypatch):
    """The fallback launcher (a fresh `python -I` per worker) must scrub the environment too."""
    monkeypatch.setenv(SECRET_VAR, SECRET)
    [path] = [p for p in PROGRAMS if p.stem.endswith(name)]
    run = run_hostile(path, SubprocessLauncher(), SandboxLimits(call_timeout_s=20, memory_mb=1024))
    assert run.verdict is None, run.verdict
    assert SECRET not in run.everything_the_engine_saw()
    assert run.group_left == [] and run.marker_dir_left == []


def _spins_until_killed(path: Path) -> bool:
    return any(o[2] == "timeout" for o in read_expectation(path).outcomes)


# Programs that spin until the deadline burn a core each for the whole timeout; the session pass
# above already proved them contained, so the run_gates pass keeps one of them only.
GATE_PROGRAMS = [p for p in PROGRAMS if not _spins_until_killed(p) or p.stem.endswith("_loop_in_read")]


@pytest.fixture(scope="module")
def gate_reports(runs, launcher):
    """The corpus through run_gates (mock corpus, no marker paths): the path `sandbox.engine.check` takes."""
    def gates(path):
        return run_gates(path.read_text(), allowed_imports=DEFAULT_ALLOWED_IMPORTS, limits=LIMITS,
                         llm=lambda messages: "reply", writes=2, reads=2)

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {path.stem: pool.submit(gates, path) for path in GATE_PROGRAMS}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("path", GATE_PROGRAMS, ids=lambda p: p.stem)
def test_run_gates_agrees(path, gate_reports):
    expected = read_expectation(path)
    report = gate_reports[path.stem]
    assert report.ok == expected.ok, report.error
    if not expected.ok:
        got = (report.verdict["stage"], report.verdict["gate"], report.verdict["rule"])
        assert got in expected.outcomes, report.error
        assert report.error.startswith(f"[{got[0]}/{got[1]}/{got[2]}]")
    assert SECRET not in report.to_json()
    windows = [c["window"] for c in report.llm_calls]
    assert "load" not in windows and all(windows.count(w) <= 1 for w in windows)


def test_header_parser_rejects_a_missing_outcome(tmp_path):
    bad = tmp_path / "h999_bad.py"
    bad.write_text("# ATTACK: x\n# EXPECTED: y\nimport os\n")
    with pytest.raises(ValueError, match="outcome"):
        read_expectation(bad)
    assert re.match(r"h\d{3}_", PROGRAMS[0].name)

"""Hostile programs served as a memory get no more than they get during evolution.

The sandbox's hostile corpus (tests/hostile/, headers read by test_hostile.read_expectation) goes
through the service `mstar serve` serves (mstar.memory.service), with a fake secret in the
engine's environment before its fork server starts: programs refused at load are refused before
any store is made, with the header's gate and rule in one line; programs that run (harmlessly, or
failing at write or read) leave no file, never see the secret, reach the toolkit LLM at most once
per op, and never see what another namespace holds. Then a real `mstar serve` over stdio, its own
environment holding the secret, serves an environment probe and a program that goes after
another namespace's log through every route the toolkit has.
"""
from __future__ import annotations

import asyncio
import os
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mstar.memory.service import MemoryService
from mstar.memory.store import StoreError
from sandbox.engine.forkserver import ForkServerLauncher
from sandbox.engine.launchers import set_default_launcher
from test_hostile import LIMITS, PROGRAMS, SECRET, SECRET_VAR, read_expectation

LOAD_STAGES = ("static", "compile", "import", "init")
EXPECTED = {p.stem: read_expectation(p) for p in PROGRAMS}
# Programs that spin until the deadline burn a core for the whole timeout each: test_hostile
# already proves them contained; here they would only make the suite slower.
SPINS = {name for name, e in EXPECTED.items() if any(o[2] in ("timeout", "cpu limit", "memory limit")
                                                   for o in e.outcomes)}
LOAD_REFUSED = [p for p in PROGRAMS if EXPECTED[p.stem].outcomes[0][0] in LOAD_STAGES and p.stem not in SPINS]
RUNS = [p for p in PROGRAMS if EXPECTED[p.stem].outcomes[0][0] not in LOAD_STAGES and p.stem not in SPINS]
CONFIDENTIAL = f"confidential-{uuid.uuid4().hex}"


@pytest.fixture(scope="module")
def engine():
    """A fork server started after the secret entered this process's environment, as the
    default launcher of the services made here."""
    previous_env = os.environ.get(SECRET_VAR)
    os.environ[SECRET_VAR] = SECRET
    server = ForkServerLauncher()
    server.start()
    previous = set_default_launcher(server)
    yield server
    set_default_launcher(previous)
    server.shutdown()
    if previous_env is None:
        os.environ.pop(SECRET_VAR, None)
    else:
        os.environ[SECRET_VAR] = previous_env


def test_the_corpus_is_split_sensibly():
    assert len(LOAD_REFUSED) >= 60 and len(RUNS) >= 60


@pytest.mark.parametrize("path", LOAD_REFUSED, ids=lambda p: p.stem)
def test_programs_refused_at_load_get_no_store(path, engine, tmp_path):
    expected = EXPECTED[path.stem]
    with pytest.raises(StoreError) as info:
        MemoryService(tmp_path / "mem", path, limits=LIMITS)
    message = str(info.value)
    assert "\n" not in message and SECRET not in message
    assert any(f"fails the sandbox's {stage} gate ({rule})" in message for stage, _, rule in expected.outcomes), message
    assert not (tmp_path / "mem").exists()


def serve_one(path: Path) -> dict:
    """remember x2 and recall x2 through the service, in a namespace beside one holding a secret."""
    marker_dir = tempfile.mkdtemp(prefix="mstar-served-hostile-", dir="/tmp")
    os.chmod(marker_dir, 0o1777)   # the worker runs as nobody: a successful attack must be able to write
    marker = os.path.join(marker_dir, "marker")
    store = Path(tempfile.mkdtemp(prefix="mstar-hostile-store-"))
    calls: list[str] = []
    seen: list[str] = []
    per_op: list[int] = []
    out = {"errors": [], "outputs": []}

    def toolkit(messages):
        text = "\n".join(str(m.get("content")) for m in messages)
        calls.append(text)
        return "toolkit reply"

    try:
        with MemoryService(store / "mem", path, toolkit_llm=toolkit, limits=LIMITS) as service:
            service.remember(f"the vault code is {CONFIDENTIAL}", "victim")
            for op in ("remember", "remember", "recall", "recall"):
                before = len(calls)
                try:
                    if op == "remember":
                        result = service.remember(marker, "probe")
                        seen += [str(result.item), *result.logs, str(result.error)]
                    else:
                        answer = service.recall(marker, "probe", answer=True)
                        out["outputs"].append(answer.retrieved)
                        seen += [answer.retrieved, answer.answer, *answer.logs, str(answer.error)]
                except StoreError as exc:
                    out["errors"].append(str(exc))
                    seen.append(str(exc))
                per_op.append(len(calls) - before)
    finally:
        out["files"] = os.listdir(marker_dir)
        for name in out["files"]:
            os.remove(os.path.join(marker_dir, name))
        os.rmdir(marker_dir)
    out["seen"] = "\n".join(seen + calls)
    out["per_op"] = per_op
    out["store_files"] = sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file())
    return out


@pytest.fixture(scope="module")
def served(engine):
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {p.stem: pool.submit(serve_one, p) for p in RUNS}
        return {name: f.result() for name, f in futures.items()}


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.stem)
def test_programs_that_run_get_no_more_when_served(path, served):
    expected, run = EXPECTED[path.stem], served[path.stem]
    assert run["files"] == [], "the program created files"
    assert SECRET not in run["seen"], "the engine's secret reached the program"
    assert CONFIDENTIAL not in run["seen"], "the program reached another namespace's memory"
    assert all(n <= 1 for n in run["per_op"]), f"more than one toolkit LLM call in an op: {run['per_op']}"
    assert all("\n" not in e and "Traceback" not in e for e in run["errors"])
    # nothing but the store's own files: no file of the program's anywhere in the store
    allowed = {"mem/program.py", "mem/store.json", "mem/namespaces/victim/log.jsonl", "mem/namespaces/probe/log.jsonl"}
    assert set(run["store_files"]) <= allowed, run["store_files"]
    if expected.ok and expected.output:
        assert any(expected.output in o for o in run["outputs"]), run["outputs"]


CROSS_READER = '''"""Goes after another namespace's log through every route the toolkit has."""
import json
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Copy the text."
INSTRUCTION_QUERY = "Copy the question."
INSTRUCTION_RESPONSE = "Answer from the memory."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str = field(default="", metadata={"description": "The text to remember"})


@dataclass
class Query:
    question: str = field(default="", metadata={"description": "The question"})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.targets = []

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.targets.append(raw_text.strip())

    def read(self, query: Query) -> str:
        got = []
        for path in self.targets:
            for sql in ("ATTACH DATABASE ? AS other", "VACUUM INTO ?"):
                try:
                    self.toolkit.db.execute(sql, (path,))
                    got.append(sql + ": " + json.dumps(self.toolkit.db.execute("SELECT * FROM other.sqlite_master").fetchall()))
                except Exception as exc:
                    got.append(sql + " refused")
            try:
                self.toolkit.db.execute("SELECT load_extension(?)", (path,))
                got.append("load_extension ran")
            except Exception:
                got.append("load_extension refused")
            try:
                col = self.toolkit.chroma.get_or_create_collection("spy")
                col.add(documents=[path], ids=["p"])
                got.append("chroma: " + json.dumps(col.get(ids=["p"])["documents"]))
            except Exception:
                got.append("chroma refused")
        return " | ".join(got) or "no targets"
'''


def test_a_real_server_keeps_the_secret_and_the_other_namespaces_out_of_reach(tmp_path):
    pytest.importorskip("mcp", reason="needs the [serve] extra (the MCP SDK): pip install -e '.[serve]'")
    from mcp_helpers import quiet_env, recall, remember, stdio_session

    env = quiet_env(**{SECRET_VAR: SECRET, "OPENAI_API_KEY": SECRET})
    reader = tmp_path / "cross_reader.py"
    reader.write_text(CROSS_READER)
    probe = next(p for p in PROGRAMS if p.stem.endswith("exfil_repr_probe"))

    async def attack(program, store):
        async with stdio_session(program, store, env=env) as session:
            await remember(session, f"the vault code is {CONFIDENTIAL}", "alice")
            victim_log = store / "namespaces" / "alice" / "log.jsonl"
            for target in (str(victim_log), str(store / "store.json")):
                await remember(session, target, "mallory")
            mallory = await recall(session, "what is the vault code?", "mallory", answer=True)
            alice = await recall(session, "what is the vault code?", "alice")
            return mallory, alice

    async def both():
        return await asyncio.gather(attack(reader, tmp_path / "s1"), attack(probe, tmp_path / "s2"))

    (cross, cross_alice), (exfil, _) = asyncio.run(both())
    got = cross["retrieved"]
    assert "ATTACH DATABASE ? AS other refused" in got and "VACUUM INTO ? refused" in got
    assert "load_extension refused" in got
    assert CONFIDENTIAL not in str(cross) and SECRET not in str(cross)
    # alice's worker holds alice's writes only: her own text, none of mallory's targets
    assert CONFIDENTIAL in cross_alice["retrieved"] and "log.jsonl" not in cross_alice["retrieved"]
    assert "<" in exfil["retrieved"] and SECRET not in str(exfil) and CONFIDENTIAL not in str(exfil)

"""`mstar serve` driven by the official MCP SDK's own client, over stdio and streamable HTTP:
50 facts of the sample task in two namespaces survive a SIGKILL (recall after the restart is
exactly what a never-killed server returns), 20 SIGKILLs at random moments during writes lose no
acknowledged write and half-apply none, names with path characters are refused, and HTTP off
loopback needs a bearer token."""
from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="needs the [serve] extra (the MCP SDK): pip install -e '.[serve]'")

from mcp_helpers import (HttpServer, http_session, quiet_env, recall, remember, server_pids,  # noqa: E402
                         stdio_session, wait_gone)
from mstar.cli import main  # noqa: E402
from mstar.memory.log import read_log  # noqa: E402
from mstar.memory.service import MemoryService  # noqa: E402
from mstar.tasks import load_task  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "seeds" / "vector_search.py"
TASK = load_task("sample")
FACTS = [ep.text for ep in TASK.episodes]                      # the 50 sessions of the sample task
assert len(FACTS) == 50
NAMESPACES = ("alice", "bob")
QUESTIONS = [q.question for q in TASK.test[:15]]


def namespace_of(i: int) -> str:
    return NAMESPACES[i % 2]


@pytest.fixture(scope="module")
def never_killed(tmp_path_factory) -> dict:
    """What a server that was never killed returns: the same service in this process, fed the
    same facts, asked while it still holds them."""
    with MemoryService(tmp_path_factory.mktemp("reference") / "mem", SEED) as service:
        for i, fact in enumerate(FACTS):
            service.remember(fact, namespace_of(i))
        return {ns: [(a.retrieved, a.answer) for a in (service.recall(q, ns, answer=True) for q in QUESTIONS)]
                for ns in NAMESPACES}


async def remember_all(session) -> None:
    seqs = {ns: 0 for ns in NAMESPACES}
    for i, fact in enumerate(FACTS):
        got = await remember(session, fact, namespace_of(i))
        seqs[got["namespace"]] += 1
        assert got["seq"] == seqs[got["namespace"]] and got["error"] is None


async def recall_all(session) -> dict:
    out = {}
    for ns in NAMESPACES:
        results = [await recall(session, q, ns, answer=True) for q in QUESTIONS]
        out[ns] = [(r["retrieved"], r["answer"]) for r in results]
    return out


def test_stdio_client_remembers_50_facts_and_recalls_them_the_same_after_a_sigkill(tmp_path, never_killed):
    store = tmp_path / "mem"

    async def before_kill():
        async with stdio_session(SEED, store) as session:
            tools = {t.name for t in (await session.list_tools()).tools}
            assert {"remember", "recall"} <= tools   # and the managing tools (test_memory_manage_server.py)
            program = json.loads((await session.read_resource("memory://program")).contents[0].text)
            assert program["program"] == "vector_search"
            assert program["instructions"]["INSTRUCTION_QUERY"].startswith("Turn the question into a search query")
            assert [f["name"] for f in program["query_schema"]] == ["query_text"]
            await remember_all(session)
            seen = await recall_all(session)
            for bad in ("../alice", "alice/../bob", "/etc", "", ".hidden", "a\\b"):
                result = await session.call_tool("recall", {"question": "x", "namespace": bad})
                assert result.is_error and "refused" in result.content[0].text
                assert "\n" not in result.content[0].text and "Traceback" not in result.content[0].text
            [pid] = server_pids(store)
            os.kill(pid, signal.SIGKILL)
            wait_gone(pid)
            return seen

    async def after_restart():
        async with stdio_session(None, store) as session:        # the store's own program
            return await recall_all(session)

    assert asyncio.run(before_kill()) == never_killed
    assert asyncio.run(after_restart()) == never_killed


def test_http_client_remembers_50_facts_and_recalls_them_the_same_after_a_sigkill(tmp_path, never_killed):
    store = tmp_path / "mem"
    with HttpServer(SEED, store) as server:
        async def first():
            async with http_session(server.url) as session:
                await remember_all(session)
                return await recall_all(session)
        assert asyncio.run(first()) == never_killed
        server.kill()                                        # SIGKILL
    with HttpServer(SEED, store) as server:
        async def again():
            async with http_session(server.url) as session:
                return await recall_all(session)
        assert asyncio.run(again()) == never_killed


ROUNDS, AT_ONCE = 5, 4              # 20 SIGKILLs: four servers (one namespace each) killed per round
# What is tested is the log, so the program keeps every raw text in order and read() answers with
# their count and a digest of all of them: two knowledge bases read the same only when they hold
# the same writes, whole, in the same order. (No chroma: its replay stays short as the logs grow.)
LEDGER = '''"""Keeps every raw text in order; read() tells how many and a digest of all of them."""
import hashlib
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Write down the facts."
INSTRUCTION_QUERY = "Ask for the fact."
INSTRUCTION_RESPONSE = "Answer briefly."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    content: str = field(default="", metadata={"description": "facts"})


@dataclass
class Query:
    query_text: str = field(default="", metadata={"description": "what to look up"})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.texts = []

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.texts.append(raw_text)

    def read(self, query: Query) -> str:
        digest = hashlib.sha256("|".join(self.texts).encode("utf-8")).hexdigest()
        return f"{len(self.texts)} texts, sha256 {digest}"
'''


async def _write_until_killed(server: HttpServer, namespace: str, round_no: int, delay: float,
                              sent: list[str], acked: list[str]) -> None:
    """Write numbered facts one after another into `namespace`, SIGKILL the server `delay` seconds
    after the first acknowledgement, and keep what was sent and what was acknowledged, in order."""
    async with http_session(server.url) as session:
        for i in range(10_000):
            text = f"[{namespace} r{round_no} #{i}] " + FACTS[(i * 7 + round_no) % len(FACTS)]
            sent.append(text)
            try:
                result = await asyncio.wait_for(
                    session.call_tool("remember", {"text": text, "namespace": namespace}), 30)
            except Exception:  # noqa: BLE001 -- the server died under the call
                return
            if result.is_error:
                return
            acked.append(text)
            if i == 0:        # the namespace is open (replayed): from now on any moment may be the last
                asyncio.get_running_loop().call_later(delay, os.kill, server.proc.pid, signal.SIGKILL)


def test_twenty_sigkills_during_writes_lose_no_acknowledged_write_and_half_apply_none(tmp_path):
    store = tmp_path / "mem"
    killed = tmp_path / "ledger.py"
    killed.write_text(LEDGER)
    rng = random.Random(29)
    expected: dict[str, list[str]] = {f"k{j}": [] for j in range(AT_ONCE)}

    async def one_round(servers, round_no, outcomes):
        async def guarded(server, ns):
            try:
                await _write_until_killed(server, ns, round_no, rng.uniform(0.02, 0.4), *outcomes[ns])
            except Exception:  # noqa: BLE001 -- the client session's own teardown after the kill
                pass
        await asyncio.gather(*(guarded(s, ns) for s, ns in zip(servers, expected)))

    kills = 0
    for round_no in range(ROUNDS):
        outcomes = {ns: ([], []) for ns in expected}
        servers = [HttpServer(killed, store) for _ in expected]
        try:
            asyncio.run(one_round(servers, round_no, outcomes))
        finally:
            for server in servers:
                server.kill()
        for ns, server in zip(expected, servers):
            sent, acked = outcomes[ns]
            assert acked, f"{ns}: no write was acknowledged before the kill: {server.lines[-3:]}"
            assert server.proc.returncode == -signal.SIGKILL
            kills += 1
            logged = [r.text for r in read_log(store / "namespaces" / ns / "log.jsonl")]
            earlier = expected[ns]
            assert logged[:len(earlier)] == earlier, "an earlier round's write changed"
            new = logged[len(earlier):]
            # every acknowledged write is there, in order; at most the one in flight besides
            assert new[:len(acked)] == acked
            assert len(new) - len(acked) in (0, 1) and new == sent[:len(new)]
            expected[ns] = logged
    assert kills == 20
    # What the restarted namespaces hold is exactly the logged writes, whole: the same recall as
    # a fresh store fed only those texts.
    with MemoryService(store, None) as replayed, MemoryService(tmp_path / "fresh", killed) as fresh:
        for ns, texts in expected.items():
            for text in texts:
                fresh.remember(text, ns)
            got = replayed.recall("?", ns).retrieved
            assert got == fresh.recall("?", ns).retrieved and got.startswith(f"{len(texts)} texts")


def _post(url: str, headers: dict) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_http_needs_a_bearer_token_off_loopback_and_enforces_one_when_set(tmp_path, capsys):
    assert main(["serve", str(SEED), "--store", str(tmp_path / "open"), "--transport", "http",
                 "--host", "0.0.0.0", "--token-env", "MSTAR_TEST_NO_SUCH_TOKEN"]) == 2
    err = capsys.readouterr().err
    assert "is not a loopback address: set a bearer token in $MSTAR_TEST_NO_SUCH_TOKEN" in err
    assert not (tmp_path / "open").exists()
    token = "t0ken-" + os.urandom(8).hex()
    with HttpServer(SEED, tmp_path / "mem", env=quiet_env(MSTAR_SERVE_TOKEN=token)) as server:
        assert any("bearer token required" in line for line in server.lines)
        assert _post(server.url, {}) == 401
        assert _post(server.url, {"authorization": "Bearer wrong"}) == 401

        async def with_token():
            async with http_session(server.url, {"Authorization": f"Bearer {token}"}) as session:
                return await remember(session, "the door code is 4512", "alice")
        assert asyncio.run(with_token())["seq"] == 1


def test_serve_refuses_bad_programs_and_stores_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text(SEED.read_text().replace("from dataclasses import", "import os\nfrom dataclasses import"))
    assert main(["serve", str(bad), "--store", str(tmp_path / "mem")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("mstar: program 'bad' cannot be served: it fails the sandbox's static gate")
    assert "\n" not in err and not (tmp_path / "mem").exists()
    assert main(["memory", "info", str(tmp_path / "nothing")]) == 2
    assert "is not a memory store" in capsys.readouterr().err
    MemoryService(tmp_path / "vs", SEED).close()
    assert main(["serve", "llm_summarizer", "--store", str(tmp_path / "vs")]) == 2
    err = capsys.readouterr().err.strip()
    assert "holds the memory of program 'vector_search'" in err and "mstar memory migrate" in err
    assert "\n" not in err


def test_the_server_takes_mstar_evolves_llm_options(tmp_path, monkeypatch, capsys):
    """--base-url/--model as for `mstar evolve`: the task and toolkit roles go to that endpoint
    (the project's fake OpenAI server, through the real `openai` client), checked first by a
    preflight that turns a wrong model into one line and exit status 3."""
    from mstar.testing.fake_server import FakeOpenAIServer, offline_responder

    with FakeOpenAIServer(offline_responder(), models=["mem-model"]) as fake:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
        assert main(["serve", "llm_summarizer", "--store", str(tmp_path / "bad"), "--base-url", fake.base_url,
                     "--model", "no-such-model", "--no-cache"]) == 3
        last = capsys.readouterr().err.strip().splitlines()[-1]       # after a warning: no price for it
        assert last.startswith("mstar: role 'task' (no-such-model at") and "this server serves: mem-model" in last
        assert not (tmp_path / "bad").exists()
        env = quiet_env(OPENAI_API_KEY="sk-test-key")
        args = ("--base-url", fake.base_url, "--model", "mem-model", "--no-cache")

        async def use():
            async with stdio_session("llm_summarizer", tmp_path / "mem", *args, env=env) as session:
                await remember(session, FACTS[0], "alice")
                return await recall(session, QUESTIONS[0], "alice", answer=True)

        before = len(fake.requests)
        got = asyncio.run(use())
        served = fake.requests[before:]
    assert got["answer"] and got["retrieved"]
    assert {body["model"] for body in served} == {"mem-model"}
    prompts = ["\n".join(str(m.get("content")) for m in body["messages"]) for body in served]
    assert sum("<task>" in p for p in prompts) >= 3          # extraction, query, answer: the task role
    assert any("<task>" not in p and "Connection check" not in p for p in prompts)   # the program's toolkit call

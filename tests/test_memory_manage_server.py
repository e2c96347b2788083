"""Managing a served memory with the official MCP SDK's own client: 50 facts in two namespaces,
five forgotten by id and one namespace whole -- no byte of them left in the store folder, and
after a restart recall agrees with a store that never saw them; retries with an id; a failed
extraction returns an error and leaves the log's bytes as they were; wrong arguments get one
line naming them; a refused token's reason reaches the client; the server says its version."""
from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="needs the [serve] extra (the MCP SDK): pip install -e '.[serve]'")

from mcp_helpers import HttpServer, http_session, quiet_env, recall, remember, stdio_session  # noqa: E402
from mstar.memory.mcp_tools import mstar_version  # noqa: E402
from mstar.memory.service import MemoryService  # noqa: E402
from mstar.tasks import load_task  # noqa: E402
from test_memory_forget import grep_store, own_lines, store_bytes  # noqa: E402
from test_memory_store import NOTES  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "seeds" / "vector_search.py"
TASK = load_task("sample")
FACTS = [ep.text for ep in TASK.episodes]
QUESTIONS = [q.question for q in TASK.test[:10]]
MANAGE_TOOLS = {"list_entries", "get_entry", "forget", "forget_namespace", "export_namespace"}


async def call(session, tool: str, **arguments) -> dict:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def refused(session, tool: str, **arguments) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error
    text = result.content[0].text
    assert "\n" not in text and "Traceback" not in text and "pydantic" not in text, text
    return text


def test_forget_over_mcp_erases_every_byte_and_a_restart_agrees_with_a_store_that_never_saw_them(tmp_path):
    store = tmp_path / "mem"
    doomed = [0, 10, 20, 30, 40]                 # five of alice's (the even facts)

    async def manage():
        async with stdio_session(SEED, store) as session:
            assert MANAGE_TOOLS | {"remember", "recall"} == {t.name for t in (await session.list_tools()).tools}
            ids = []
            for i, fact in enumerate(FACTS):
                ids.append((await remember(session, fact, "alice" if i % 2 == 0 else "bob"))["id"])
            page = await call(session, "list_entries", namespace="alice", limit=20)
            assert page["total"] == 25 and page["next_offset"] == 20 and len(page["entries"]) == 20
            rest = await call(session, "list_entries", namespace="alice", offset=20, limit=20)
            assert [e["text"] for e in page["entries"] + rest["entries"]] == FACTS[::2] and rest["next_offset"] is None
            got = await call(session, "get_entry", id=ids[2], namespace="alice")
            assert got["text"] == FACTS[2] and got["item"] and got["seq"] == 2
            done = await call(session, "forget", ids=[ids[i] for i in doomed], namespace="alice")
            assert done == {"namespace": "alice", "forgotten": [ids[i] for i in doomed], "missing": []}
            assert (await call(session, "forget_namespace", namespace="bob"))["forgotten"] == 25
            assert (await call(session, "list_entries", namespace="bob"))["total"] == 0
            exported = await call(session, "export_namespace", namespace="alice")
            return exported

    exported = asyncio.run(manage())
    kept = [f for i, f in enumerate(FACTS) if i % 2 == 0 and i not in doomed]
    assert exported["count"] == 20 and exported["jsonl"].count("\n") == 20
    forgotten = [FACTS[i] for i in doomed] + FACTS[1::2]
    raw = store_bytes(store)
    marks = own_lines(forgotten, kept)
    assert len(marks) > 50 and not [m for m in marks if m.encode("utf-8") in raw]
    assert grep_store(store, marks) == []
    assert sorted(p.name for p in (store / "namespaces").iterdir()) == ["alice"]

    async def after_restart():
        async with stdio_session(None, store) as session:
            return [await recall(session, q, ns, answer=True) for ns in ("alice", "bob") for q in QUESTIONS]

    got = asyncio.run(after_restart())
    with MemoryService(tmp_path / "never", SEED) as never:
        for text in kept:
            never.remember(text, "alice")
        want = [never.recall(q, ns, answer=True) for ns in ("alice", "bob") for q in QUESTIONS]
    assert [(g["retrieved"], g["answer"]) for g in got] == [(w.retrieved, w.answer) for w in want]


def test_retries_arguments_and_version_over_mcp(tmp_path):
    program = tmp_path / "notes.py"
    program.write_text(NOTES)

    async def use():
        async with stdio_session(program, tmp_path / "mem") as session:
            first = await call(session, "remember", text="the door code is 4512", namespace="a", id="turn-1")
            again = await call(session, "remember", text="the door code is 4512", namespace="a", id="turn-1")
            assert (again["seq"], again["id"], again["repeated"], first["repeated"]) == (1, "turn-1", True, False)
            assert "is taken by another text" in await refused(session, "remember", text="other", namespace="a",
                                                                 id="turn-1")
            assert (await call(session, "list_entries", namespace="a"))["total"] == 1
            assert await refused(session, "remember", namespace="a") == "remember: argument 'text' is missing"
            text = await refused(session, "recall", question="q", answer="perhaps")
            assert text.startswith("recall: argument 'answer': input should be a valid boolean") and "perhaps" in text
            assert (await refused(session, "recall", question="q", nmespace="a")).startswith(
                "recall: unknown argument(s) 'nmespace'; it takes answer, namespace, question")
            assert "forget takes either ids" in await refused(session, "forget", namespace="a")
            assert "argument 'namespace' is missing" in await refused(session, "forget_namespace")
            assert "holds no entry 'nope'" in await refused(session, "get_entry", id="nope", namespace="a")
            return (await session.initialize()).server_info     # what the handshake said

    info = asyncio.run(use())
    assert info.name == "mstar-memory" and info.version == mstar_version() not in ("", "unknown")


def test_with_the_endpoint_down_remember_returns_an_error_and_the_log_is_unchanged(tmp_path):
    program = tmp_path / "notes.py"
    program.write_text(NOTES)
    store = tmp_path / "mem"
    with MemoryService(store, program) as service:
        service.remember("kept before the outage", "a")
    log = store / "namespaces" / "a" / "log.jsonl"
    before = log.read_bytes()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]

    async def use():
        async with stdio_session(None, store, "--base-url", f"http://127.0.0.1:{port}/v1", "--model", "m",
                                 "--no-preflight", "--no-cache", "--llm", "task.max_retries=0",
                                 env=quiet_env(OPENAI_API_KEY="sk-test-key")) as session:
            text = await refused(session, "remember", text="lost in the outage", namespace="a")
            return text, (await call(session, "list_entries", namespace="a"))["total"]

    text, total = asyncio.run(use())
    assert "nothing was remembered: the task LLM gave no KnowledgeItem (task LLM failed:" in text
    assert total == 1 and log.read_bytes() == before


def _messages(exc: BaseException) -> list[str]:
    inner = getattr(exc, "exceptions", None)
    return [m for e in inner for m in _messages(e)] if inner else [str(exc)]


def test_a_refused_token_reaches_the_sdk_client_with_its_reason(tmp_path):
    token = "t0ken-for-the-test"
    with HttpServer(SEED, tmp_path / "mem", env=quiet_env(MSTAR_SERVE_TOKEN=token)) as server:
        for headers, reason in (({}, "401 Unauthorized: no bearer token"),
                                ({"Authorization": "Bearer wrong"}, "401 Unauthorized: wrong bearer token")):
            async def connect(headers=headers):
                async with http_session(server.url, headers):
                    pass
            with pytest.raises(BaseException) as info:
                asyncio.run(connect())
            assert any(reason in m for m in _messages(info.value)), _messages(info.value)

        async def with_token():
            async with http_session(server.url, {"Authorization": f"Bearer {token}"}) as session:
                return await remember(session, "the door code is 4512", "alice")
        assert asyncio.run(with_token())["seq"] == 1

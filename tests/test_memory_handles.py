"""What a store's user can count on around the edges: a question too large is one line (API and
MCP, no traceback on the server); a Python handle keeps its namespace while open, however long it
idles; two processes making the same new store both open it; looking, or a write that failed,
makes no namespace (and a namespace forgotten whole stays gone); an empty text is no entry; an
export is written 0600; a log opened while a forget renames its copy over it is the new one.
Real sandbox workers, real logs."""
from __future__ import annotations

import asyncio
import json
import stat
import threading
import time
from pathlib import Path

import pytest

from mstar.api import MemoryProgram
from mstar.memory import pool as pool_module
from mstar.memory import store as store_module
from mstar.memory.log import LogBusyError, LogRecord, WriteLog, read_log
from mstar.memory.service import MemoryService
from mstar.memory.store import StoreError, open_store
from test_memory_store import NOTES

HUGE = "B" * 5_000_000          # over the sandbox's 4 MiB frame cap

# read() keeps every question it was asked: a worker shared by two namespaces would carry one's
# questions into the other's answers.
ASKED = NOTES.replace('''    def read(self, query: Query) -> str:
        return " | ".join(self.notes)[-3000:]''', '''    def read(self, query: Query) -> str:
        self.notes.append("asked " + query.query_text)
        return " | ".join(self.notes)[-3000:]''')


@pytest.fixture()
def notes(tmp_path) -> Path:
    path = tmp_path / "notes.py"
    path.write_text(NOTES)
    return path


def test_a_question_too_large_is_one_line_through_the_api_and_mcp_and_no_traceback_on_the_server(tmp_path, notes):
    pytest.importorskip("mcp", reason="needs the [serve] extra (the MCP SDK): pip install -e '.[serve]'")
    from mcp import ClientSession, StdioServerParameters, stdio_client
    from mcp_helpers import quiet_env, serve_argv
    with MemoryProgram.open(notes, store=tmp_path / "api", namespace="kept") as memory:
        memory.ingest("a fact")
        for handle in (memory, memory.other("never-written")):
            with pytest.raises(StoreError) as info:
                handle.ask(HUGE)
            assert "too large" in str(info.value) and "nothing was read" in str(info.value)
            assert "\n" not in str(info.value)
        assert memory.ask_detailed("?", answer=False).retrieved == "a fact"      # the handle goes on

    # Over stdio: the HTTP transport refuses a body this large itself, before any tool runs.
    argv = serve_argv(notes, tmp_path / "served")
    stderr = tmp_path / "server.err"

    async def session_calls() -> list:
        with open(stderr, "w") as errlog:
            async with stdio_client(StdioServerParameters(command=argv[0], args=argv[1:], env=quiet_env()),
                                    errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await session.call_tool("remember", {"text": "a fact", "namespace": "kept"})
                    out = []
                    for namespace in ("kept", "never-written"):
                        result = await session.call_tool("recall", {"question": HUGE, "namespace": namespace})
                        out.append((result.is_error, result.content[0].text))
                    again = await session.call_tool("recall", {"question": "?", "namespace": "kept"})
                    out.append((again.is_error, again.structured_content["retrieved"]))
                    return out

    results = asyncio.run(session_calls())
    for is_error, text in results[:2]:
        assert is_error and "too large" in text and "nothing was read" in text and "\n" not in text, text
    assert results[2] == (False, "a fact")
    assert "Traceback" not in stderr.read_text() and len(stderr.read_text().splitlines()) <= 2, stderr.read_text()[:3000]


class FastClock:
    """The pool's `time`: hours go by in a moment (an idle reaper would wake and close at once)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def sleep(self, seconds: float) -> None:
        time.sleep(0.02)


def test_a_python_handle_keeps_its_namespace_and_its_lock_however_long_it_idles(tmp_path, notes, monkeypatch):
    clock = FastClock()
    monkeypatch.setattr(pool_module, "time", clock)
    with MemoryProgram.open(notes, store=tmp_path / "mem", namespace="alice") as memory:
        memory.ingest("Alice likes tea.")
        [before] = memory.service.pool.open_namespaces()
        clock.offset = 24 * 3600.0                          # a day later, nobody having asked
        time.sleep(0.5)
        assert memory.service.pool.open_namespaces() == [before] and before.memory.alive
        with pytest.raises(LogBusyError):                   # still held: no other process may take it
            WriteLog(tmp_path / "mem" / "namespaces" / "alice" / "log.jsonl").open()
        assert memory.ingest("Alice likes coffee.").seq == 2
    with pytest.raises(StoreError, match="idle_close_s is the server's"):
        MemoryProgram.open(notes, store=tmp_path / "mem", namespace="alice", idle_close_s=2)


def test_two_makers_of_the_same_new_store_both_open_it(tmp_path, monkeypatch):
    """The other process makes the store while this one has written its program but not yet its
    store.json (the moment the race hit): both get the store. Then threads race for real."""
    source = NOTES
    real_write = store_module.atomic_write_text
    rivals: list = []

    def write_then_rival(path: Path, text: str) -> None:
        real_write(path, text)
        if path.name == "program.py" and not rivals:
            rivals.append(None)
            rivals[0] = open_store(tmp_path / "mem", source, "notes")      # the other process, right now

    monkeypatch.setattr(store_module, "atomic_write_text", write_then_rival)
    mine = open_store(tmp_path / "mem", source, "notes")
    assert rivals and rivals[0].sha256 == mine.sha256 and mine.source == source
    monkeypatch.setattr(store_module, "atomic_write_text", real_write)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mem"]              # nothing left beside it
    assert stat.S_IMODE((tmp_path / "mem").stat().st_mode) == 0o700
    for trial in range(20):
        root, results = tmp_path / f"race{trial}", []
        start = threading.Barrier(3)

        def make() -> None:
            start.wait()
            try:
                results.append(open_store(root, source, "notes").sha256)
            except StoreError as exc:
                results.append(str(exc))

        threads = [threading.Thread(target=make) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert results == [mine.sha256] * 3, results
    with pytest.raises(StoreError, match="holds the memory of program"):
        open_store(tmp_path / "race0", source + "\nANOTHER_PROGRAM = 1\n", "other")


def test_looking_or_a_failed_write_makes_no_namespace_and_one_forgotten_whole_stays_gone(tmp_path, notes):
    store = tmp_path / "mem"
    with MemoryProgram.open(notes, store=store, namespace="alice") as alice:
        alice.ingest("kept")
        empty = alice.other("emptied")
        empty.ingest("soon gone")
        empty.forget_matching("soon gone")
        blank = empty.ask_detailed("?", answer=False).retrieved        # a namespace that holds nothing
        ghost = alice.other("typo-ghost")
        assert ghost.ask_detailed("?", answer=False).retrieved == blank and ghost.ask("?") is not None
        assert ghost.entries().total == 0
        with pytest.raises(StoreError, match="too large"):
            alice.other("big").ingest(HUGE)
        for text in ("", "  \n\t"):
            with pytest.raises(StoreError, match="nothing to remember, the text is empty"):
                alice.other("blank-text").ingest(text)
            with pytest.raises(StoreError, match="nothing to remember, the text is empty"):
                alice.ingest(text)
        bob = alice.other("bob")
        bob.ingest("Bob's secret")
        assert bob.forget_namespace() == 1
        assert bob.ask_detailed("?", answer=False).retrieved == blank and bob.entries().total == 0
        assert alice.service.folder.namespaces() == ["alice", "emptied"]
        assert sorted(p.name for p in (store / "namespaces").iterdir()) == ["alice", "emptied"]
    assert [r.text for r in read_log(store / "namespaces" / "alice" / "log.jsonl")] == ["kept"]
    with MemoryService(store, None, llm=lambda messages: "I'd rather not.") as service:
        with pytest.raises(StoreError, match="gave no KnowledgeItem"):
            service.remember("lost", "new-one")
        assert service.folder.namespaces() == ["alice", "emptied"]


def test_recalls_of_namespaces_that_do_not_exist_share_no_state_when_read_changes_it(tmp_path):
    program = tmp_path / "asked.py"
    program.write_text(ASKED)
    def llm(messages: list[dict]) -> str:
        text = " ".join(m["content"] for m in messages)
        return json.dumps({"query_text": next((q for q in ("q-one", "q-two") if q in text), "")})

    with MemoryService(tmp_path / "mem", program, llm=llm, toolkit_llm="offline") as service:
        first = service.recall("q-one?", "x").retrieved
        second = service.recall("q-two?", "y").retrieved
        assert "q-one" in first and "q-one" not in second and "q-two" in second
        assert service.folder.namespaces() == []


def test_exports_are_written_0600(tmp_path, notes, capsys):
    from mstar.cli import main
    store = tmp_path / "mem"
    with MemoryProgram.open(notes, store=store, namespace="n") as memory:
        memory.ingest("a secret text")
        api = tmp_path / "api.jsonl"
        api.write_text("old")
        api.chmod(0o644)                                   # an older file there: replaced, not reused
        assert memory.export(api) == 1
    cli = tmp_path / "cli.jsonl"
    assert main(["memory", "export", str(store), "-n", "n", "--out", str(cli)]) == 0
    capsys.readouterr()
    for path in (api, cli):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert "a secret text" in path.read_text()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_log_opened_while_a_forget_renames_its_copy_over_it_locks_the_new_file(tmp_path, monkeypatch):
    """Between a log's open and its lock, another process renames a compacted copy over it (a
    forget) and lets go: the lock must be on the file the path now names, not the old one."""
    from mstar.memory import log as log_module
    path = tmp_path / "log.jsonl"
    writer = WriteLog(path)
    writer.open()
    writer.append(LogRecord(seq=1, text="forgotten", item={}))
    writer.close()
    copy = tmp_path / "copy"
    copy.write_bytes(log_module.encode_record(LogRecord(seq=2, text="kept", item={})))
    real_flock, raced = log_module.fcntl.flock, []

    def flock_after_a_forget(fd: int, how: int) -> None:
        if not raced:
            raced.append(copy.rename(path))             # the forget's rename, between open and lock
        real_flock(fd, how)

    monkeypatch.setattr(log_module.fcntl, "flock", flock_after_a_forget)
    reader = WriteLog(path)
    assert [r.text for r in reader.open()] == ["kept"]
    reader.append(LogRecord(seq=3, text="later", item={}))
    reader.close()
    monkeypatch.setattr(log_module.fcntl, "flock", real_flock)
    assert [r.text for r in read_log(path)] == ["kept", "later"]

"""Managing what a stored memory holds, through the Python API (`MemoryProgram.open`, the service
the server uses) with real sandbox workers: entries listed and fetched, forgetting as erasure (no
byte of a forgotten text left in the store folder, a restart agrees with a store that never saw
it), reads during a forget, a full disk during the compaction, retries with a client id, and a
failed extraction that writes nothing."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from mstar.api import MemoryProgram, llm_config
from mstar.memory.log import read_log
from mstar.memory.service import MemoryService
from mstar.memory.store import StoreError
from mstar.tasks import load_task
from test_memory_server import LEDGER
from test_memory_store import NOTES

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "seeds" / "vector_search.py"
TASK = load_task("sample")
FACTS = [ep.text for ep in TASK.episodes]
QUESTIONS = [q.question for q in TASK.test[:12]]


@pytest.fixture()
def notes(tmp_path) -> Path:
    path = tmp_path / "notes.py"
    path.write_text(NOTES)
    return path


@pytest.fixture()
def ledger(tmp_path) -> Path:
    path = tmp_path / "ledger.py"
    path.write_text(LEDGER)
    return path


def store_bytes(store: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file())


def grep_store(store: Path, needles: set[str]) -> list[str]:
    """The files of the store folder in which `grep -r` finds one of the needles (raw bytes)."""
    patterns = store.parent / "needles.txt"
    patterns.write_text("\n".join(sorted(needles)) + "\n", encoding="utf-8")
    found = subprocess.run(["grep", "-rlF", "-f", str(patterns), str(store)], capture_output=True, text=True)
    assert found.returncode in (0, 1), found.stderr
    return found.stdout.splitlines()


def own_lines(texts: list[str], others: list[str]) -> set[str]:
    """Lines of `texts` that no text of `others` holds: what only they put in the store. (A
    multi-line text is JSON-escaped in the log, so its lines are what a byte search can find.)"""
    theirs = {line for t in others for line in t.splitlines()}
    return {line for t in texts for line in t.splitlines() if len(line) > 20 and line not in theirs}


def test_forgotten_entries_leave_no_byte_in_the_store_and_a_restart_agrees_with_a_store_that_never_saw_them(tmp_path):
    store = tmp_path / "mem"
    with MemoryProgram.open(SEED, store=store, namespace="alice") as alice:
        bob = alice.other("bob")
        ids = [(alice if i % 2 == 0 else bob).ingest(fact).id for i, fact in enumerate(FACTS)]
        page = alice.entries(limit=10)
        assert page.total == 25 and len(page.entries) == 10 and page.next_offset == 10
        assert [e.text for e in alice.entries(offset=20, limit=10).entries] == FACTS[40::2]
        assert alice.entries(offset=20, limit=10).next_offset is None
        assert alice.entry(ids[4]).text == FACTS[4] and alice.entry(ids[4]).item
        with pytest.raises(StoreError, match=f"namespace 'alice' holds no entry '{ids[1]}'"):
            alice.entry(ids[1])                                   # bob's
        doomed = [0, 8, 16, 24, 32]                               # five of alice's
        done = alice.forget([ids[i] for i in doomed] + ["no-such-id"])
        assert done.ids == [ids[i] for i in doomed] and done.missing == ["no-such-id"]
        assert bob.forget_namespace() == 25
        assert alice.service.folder.namespaces() == ["alice"]
        assert bob.entries().total == 0                           # looking does not make it again
        kept = [f for i, f in enumerate(FACTS) if i % 2 == 0 and i not in doomed]
        assert [e.text for e in alice.entries(limit=100).entries] == kept
        live = [alice.ask_detailed(q) for q in QUESTIONS]
    forgotten = [FACTS[i] for i in doomed] + FACTS[1::2]
    marks = own_lines(forgotten, kept)
    raw = store_bytes(store)
    assert len(marks) > 50 and not [m for m in marks if m.encode("utf-8") in raw]
    assert grep_store(store, marks) == []
    assert all(m.encode("utf-8") in raw for m in own_lines(kept, forgotten))   # the search finds what is there
    assert grep_store(store, own_lines(kept, forgotten)) == [str(store / "namespaces" / "alice" / "log.jsonl")]
    with MemoryProgram.open(None, store=store, namespace="alice") as alice, \
            MemoryProgram.open(SEED, store=tmp_path / "fresh", namespace="alice") as fresh:
        for text in kept:
            fresh.ingest(text)
        again = [alice.ask_detailed(q) for q in QUESTIONS]
        never = [fresh.ask_detailed(q) for q in QUESTIONS]
        assert alice.other("bob").ask_detailed(QUESTIONS[0], answer=False).retrieved == \
            fresh.other("bob").ask_detailed(QUESTIONS[0], answer=False).retrieved
    assert [(a.retrieved, a.answer) for a in again] == [(a.retrieved, a.answer) for a in never]
    assert [(a.retrieved, a.answer) for a in live] == [(a.retrieved, a.answer) for a in never]


def test_forget_by_text_matches_the_raw_text_and_the_item_in_any_case_and_keeps_ids_and_order(tmp_path, notes):
    with MemoryProgram.open(notes, store=tmp_path / "mem") as memory:
        texts = ["my blood pressure is high", "the meeting is on Friday", "Health: allergic to nuts",
                 "buy milk", "summarise: a long day"]
        acks = [memory.ingest(t) for t in texts]
        assert [e.text for e in memory.entries(contains="HEALTH").entries] == ["Health: allergic to nuts"]
        done = memory.forget_matching("health")
        assert done.ids == [acks[2].id]
        assert memory.forget_matching("nothing like this").ids == []
        with pytest.raises(StoreError, match="the text to match is empty"):
            memory.forget_matching("  ")
        left = memory.entries().entries
        assert [(e.id, e.seq, e.text) for e in left] == [(a.id, a.seq, t) for a, t in zip(acks, texts) if a is not acks[2]]
        assert memory.ask_detailed("?", answer=False).retrieved.startswith("my blood pressure is high | the meeting")
        memory.forget([acks[4].id])           # the last one: its seq is given again, its id never
        later = memory.ingest("later")
        assert later.seq == 5 and later.id not in {a.id for a in acks}


def test_an_export_is_taken_back_by_a_fresh_store_and_a_second_import_writes_nothing(tmp_path, notes):
    with MemoryProgram.open(notes, store=tmp_path / "mem", namespace="n") as memory:
        for t in ("one", "two", "three\nwith a second line", "four é ✓"):
            memory.ingest(t)
        memory.forget_matching("two")
        out = tmp_path / "n.jsonl"
        assert memory.export(out) == 3
        before = memory.ask_detailed("?", answer=False).retrieved
        ids = [e.id for e in memory.entries().entries]
    assert [json.loads(line)["text"] for line in out.read_text().splitlines()] == \
        ["one", "three\nwith a second line", "four é ✓"]
    with MemoryProgram.open(notes, store=tmp_path / "other", namespace="n") as other:
        assert [r.repeated for r in other.import_jsonl(out)] == [False] * 3
        assert [r.repeated for r in other.import_jsonl(out)] == [True] * 3
        assert other.ask_detailed("?", answer=False).retrieved == before
        assert [e.id for e in other.entries().entries] == ids
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"txt": "typo"}\n')
    with MemoryProgram.open(notes, store=tmp_path / "other", namespace="n") as other:
        with pytest.raises(StoreError, match="bad.jsonl: line 2 has no \"text\""):
            other.import_jsonl(bad)


def test_a_retry_with_the_same_id_returns_the_first_acknowledgement_and_writes_once(tmp_path, notes):
    with MemoryProgram.open(notes, store=tmp_path / "mem") as memory:
        first = memory.ingest("the door code is 4512", id="turn-7")
        again = memory.ingest("the door code is 4512", id="turn-7")
        assert (again.seq, again.id, again.item, again.repeated) == (first.seq, "turn-7", first.item, True)
        with pytest.raises(StoreError, match="id 'turn-7' is taken by another text"):
            memory.ingest("another text", id="turn-7")
        with pytest.raises(StoreError, match="refused: give 1-200 printable characters"):
            memory.ingest("x", id="a\nb")
    assert [r.text for r in read_log(tmp_path / "mem" / "namespaces" / "default" / "log.jsonl")] == \
        ["the door code is 4512"]


def test_a_retry_after_a_kill_between_the_sync_and_the_acknowledgement_writes_the_entry_once(tmp_path, notes):
    """The process dies right after the log's fsync, before remember returns: the client saw no
    acknowledgement and retries with the same id; the entry is in the log once."""
    store = tmp_path / "mem"
    script = textwrap.dedent(f"""
        import os, signal
        from mstar.memory import log
        from mstar.memory.service import MemoryService
        real = log.WriteLog.append
        def append_then_die(self, rec):
            real(self, rec)                          # synced ...
            if rec.text.startswith("last"):
                os.kill(os.getpid(), signal.SIGKILL)  # ... and never acknowledged
        log.WriteLog.append = append_then_die
        with MemoryService({str(store)!r}, {str(notes)!r}) as service:
            service.remember("first", id="c-1")
            print("acked", flush=True)
            service.remember("last words", id="c-2")
            print("acked", flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL and done.stdout.split() == ["acked"], done.stderr[-1500:]
    with MemoryService(store, None) as service:
        retried = service.remember("last words", id="c-2")
        assert retried.repeated and retried.seq == 2
        assert service.remember("next", id="c-3").seq == 3
        assert service.recall("?").retrieved == "first | last words | next"
    assert [r.text for r in read_log(store / "namespaces" / "default" / "log.jsonl")] == ["first", "last words", "next"]


def test_reads_during_a_forget_see_the_memory_before_or_after_never_half(tmp_path, ledger):
    with MemoryService(tmp_path / "mem", ledger) as service:
        acks = [service.remember(f"text number {i}", "n") for i in range(40)]
        before = service.recall("?", "n").retrieved
        doomed = {a.id for a in acks[::3]}
        seen: list[str] = []
        stop = threading.Event()

        def reader() -> None:
            while not stop.is_set():
                seen.append(service.recall("?", "n").retrieved)
                seen.append(str(len(service.entries("n", limit=500).entries)))

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        try:
            forgotten = service.forget(sorted(doomed), "n")
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        after = service.recall("?", "n").retrieved
    assert set(forgotten.ids) == doomed and after.startswith(f"{40 - len(doomed)} texts") and after != before
    assert set(seen) <= {before, after, "40", str(40 - len(doomed))}, set(seen) - {before, after}


FULL_DISK = textwrap.dedent("""
    import json, os, resource, sys
    from mstar.memory.service import MemoryService
    from mstar.memory.store import StoreError
    store, program, mode = sys.argv[1:4]
    log = os.path.join(store, "namespaces", "default", "log.jsonl")
    out = {}
    with MemoryService(store, program) as service:
        acks = [service.remember(f"entry {i:<2}" + "x" * 300) for i in range(12)]
        before, read = open(log, "rb").read(), service.recall("?").retrieved
        if mode == "tmpfs":                       # fill the small file system to the last block
            filler = os.open(os.path.join(store, "..", "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
            try:
                while True:
                    os.write(filler, b"\\0" * 512)
            except OSError:
                pass
        else:                                     # the kernel refuses the copy part way (EFBIG)
            resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) // 2, resource.RLIM_INFINITY))
        try:
            service.forget([acks[0].id])
        except StoreError as exc:
            out["refused"] = str(exc)
        out["log_unchanged"] = open(log, "rb").read() == before
        out["files"] = sorted(os.listdir(os.path.dirname(log)))
        out["read_unchanged"] = service.recall("?").retrieved == read
        if mode == "tmpfs":
            os.close(filler)
            os.remove(os.path.join(store, "..", "filler"))
        else:
            resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        out["then"] = service.forget([acks[0].id]).ids == [acks[0].id]
        out["after"] = [e.text[:8] for e in service.entries().entries] == [f"entry {i:<2}" for i in range(1, 12)]
    print(json.dumps(out))
""")


def test_a_full_disk_during_the_compaction_refuses_the_forget_and_leaves_the_store_unchanged(tmp_path, notes):
    """On a small tmpfs filled to the last block (root can mount one; elsewhere a file-size
    limit makes the kernel refuse the copy the same way): the forget is refused with one line,
    the log's bytes and what recall returns are unchanged, no leftover is in the folder; with
    room again the same forget goes through."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)],
                                                   capture_output=True).returncode == 0
    try:
        done = subprocess.run([sys.executable, "-c", FULL_DISK, str(disk / "mem"), str(notes),
                               "tmpfs" if mounted else "rlimit"], capture_output=True, text=True, timeout=180)
    finally:
        if mounted:
            subprocess.run(["umount", str(disk)], check=True)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert "forget refused, the compacted log could not be written" in out["refused"], out
    assert "nothing was forgotten, the store is unchanged" in out["refused"] and "\n" not in out["refused"]
    assert out["log_unchanged"] and out["read_unchanged"] and out["files"] == ["log.jsonl"]
    assert out["then"] and out["after"]


def test_with_the_endpoint_down_ingest_raises_and_the_log_is_unchanged(tmp_path, notes, monkeypatch):
    """The real `openai` client against a port nobody listens on: ingest fails with one line
    naming the cause, and nothing is appended (not an empty item replayed at every restart)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]                   # closed again: nothing listens there
    store = tmp_path / "mem"
    with MemoryProgram.open(notes, store=store, toolkit_llm="offline") as memory:
        memory.ingest("kept before the outage")
    log = store / "namespaces" / "default" / "log.jsonl"
    before = log.read_bytes()
    down = llm_config(base_url=f"http://127.0.0.1:{port}/v1", model="m", no_cache=True,
                      overrides=("task.max_retries=0",))
    with MemoryProgram.open(notes, store=store, llm=down, toolkit_llm="offline") as memory:
        with pytest.raises(StoreError) as info:
            memory.ingest("lost in the outage")
        assert memory.ask_detailed("?", answer=False).retrieved == "kept before the outage"
    message = str(info.value)
    assert "nothing was remembered: the task LLM gave no KnowledgeItem (task LLM failed:" in message
    assert "onnect" in message and "\n" not in message          # the connection error, named
    assert log.read_bytes() == before


def test_a_reply_without_an_item_is_refused_but_a_partial_item_is_kept(tmp_path, notes):
    replies = iter(["I'd rather not.", '{"other": 1}', '{"content": "the cat is black", "colour": "black"}'])
    with MemoryProgram.open(notes, store=tmp_path / "mem", llm=lambda messages: next(replies),
                            toolkit_llm="offline") as memory:
        with pytest.raises(StoreError, match=r"gave no KnowledgeItem \(reply was not JSON\)"):
            memory.ingest("a")
        with pytest.raises(StoreError, match=r"gave no KnowledgeItem \(the reply held none of the KnowledgeItem's "
                                             r"fields \(content\)\)"):
            memory.ingest("b")
        kept = memory.ingest("c")                     # an unknown field beside a known one: dropped, named
        assert kept.item == {"content": "the cat is black"} and any("unknown field" in w for w in kept.warnings)
    assert [r.text for r in read_log(tmp_path / "mem" / "namespaces" / "default" / "log.jsonl")] == ["c"]


def test_a_migration_stops_resumably_at_a_text_whose_re_extraction_fails(tmp_path, notes):
    from mstar.memory.migrate import migrate
    with MemoryService(tmp_path / "old", notes) as old:
        for i in range(6):
            old.remember(f"text {i}", "n", id=f"t{i}")
    newer = tmp_path / "newer.py"
    newer.write_text(NOTES.replace("Write down the facts.", "Write down every fact."))

    def outage_at_text_3(messages):
        if "text 3" in messages[-1]["content"]:
            raise ConnectionError("the endpoint is down")
        return '{"content": "a fact"}'

    with pytest.raises(StoreError) as info:
        migrate(tmp_path / "old", newer, tmp_path / "new", llm=outage_at_text_3, toolkit_llm="offline")
    message = str(info.value)
    assert message.startswith("text 4 of 6 of namespace 'n' (entry t3) could not be migrated: ")
    assert "the endpoint is down" in message and "run the same command again" in message and "\n" not in message
    log = tmp_path / "new" / "namespaces" / "n" / "log.jsonl"
    assert [r.entry_id for r in read_log(log)] == ["t0", "t1", "t2"]            # nothing empty written
    report = migrate(tmp_path / "old", newer, tmp_path / "new", toolkit_llm="offline")
    assert report.resumed == {"n": 3} and report.namespaces == {"n": 6}
    assert [(r.entry_id, r.text) for r in read_log(log)] == [(f"t{i}", f"text {i}") for i in range(6)]


def test_the_cli_lists_gets_forgets_exports_and_imports(tmp_path, notes, capsys):
    from mstar.cli import main
    store = tmp_path / "mem"
    with MemoryService(store, notes) as service:
        acks = [service.remember(t, "n") for t in ("alpha one", "beta two", "Gamma three", "delta four")]
        service.recall("?", "n")                                   # a server holds "n" now
        assert main(["memory", "forget", str(store), "-n", "n", "--matching", "alpha"]) == 2
        err = capsys.readouterr().err.strip()
        assert "is open in another process" in err and "\n" not in err
    assert main(["memory", "list", str(store), "-n", "n", "--limit", "2"]) == 0
    out = capsys.readouterr()
    assert [line.split()[0] for line in out.out.splitlines()] == [acks[0].id, acks[1].id]
    assert "alpha one" in out.out and "(2 of 4 entries in 'n'; next: --offset 2)" in out.err
    assert main(["memory", "get", str(store), "-n", "n", acks[2].id]) == 0
    assert json.loads(capsys.readouterr().out)["text"] == "Gamma three"
    assert main(["memory", "forget", str(store), "-n", "n", "--id", acks[1].id, "--id", "nope"]) == 0
    assert capsys.readouterr().out.strip() == f"forgot 1 entry of 'n' ({acks[1].id}); not there: nope"
    assert main(["memory", "forget", str(store), "-n", "n", "--matching", "GAMMA"]) == 0
    assert b"beta two" not in store_bytes(store) and b"Gamma three" not in store_bytes(store)
    export = tmp_path / "n.jsonl"
    assert main(["memory", "export", str(store), "-n", "n", "--out", str(export)]) == 0
    capsys.readouterr()
    for again in (False, True):
        assert main(["memory", "import", str(tmp_path / "copy"), str(export), "-n", "n", "--program", str(notes)]) == 0
        assert capsys.readouterr().out.strip() == ("imported 0 texts into 'n' (2 were already there)" if again
                                                   else "imported 2 texts into 'n'")
    with MemoryService(tmp_path / "copy", None) as copy:
        assert copy.recall("?", "n").retrieved == "alpha one | delta four"
    assert main(["memory", "forget", str(store), "-n", "n", "--all"]) == 0
    assert "forgot namespace 'n' (2 entries)" in capsys.readouterr().out
    assert not (store / "namespaces" / "n").exists()
    assert main(["memory", "list", str(store), "-n", "../x"]) == 2
    assert "refused" in capsys.readouterr().err


def test_a_store_written_before_ids_replays_and_its_entries_are_managed_by_seq(tmp_path, notes):
    """Lines without an id (the bytes an older mstar wrote) replay as before; their entries are
    `seq-N`; the store is marked format 2 before anything of the new format is written to it."""
    from mstar.memory.log import LogRecord, WriteLog, encode_record
    store = tmp_path / "mem"
    MemoryService(store, notes).close()
    meta = json.loads((store / "store.json").read_text())
    (store / "store.json").write_text(json.dumps({**meta, "format_version": 1}))
    (store / "namespaces" / "old").mkdir(parents=True)
    log = WriteLog(store / "namespaces" / "old" / "log.jsonl")
    log.open()
    for seq, text in enumerate(("first", "second", "third"), 1):
        rec = LogRecord(seq=seq, text=text, item={"content": text})
        assert b'"id"' not in encode_record(rec)
        log.append(rec)
    log.close()
    with MemoryProgram.open(None, store=store, namespace="old") as memory:
        assert json.loads((store / "store.json").read_text())["format_version"] == 2
        assert [e.id for e in memory.entries().entries] == ["seq-1", "seq-2", "seq-3"]
        assert memory.forget(["seq-2"]).ids == ["seq-2"]
        assert memory.ingest("fourth").id.startswith("mem-")
        assert memory.ask_detailed("?", answer=False).retrieved == "first | third | fourth"
    assert [(r.seq, r.entry_id[:4]) for r in read_log(store / "namespaces" / "old" / "log.jsonl")] == \
        [(1, "seq-"), (3, "seq-"), (4, "mem-")]


def test_a_namespace_forgotten_whole_starts_anew_at_the_next_write_and_writers_waiting_go_there(tmp_path, ledger):
    with MemoryService(tmp_path / "mem", ledger) as service:
        for i in range(5):
            service.remember(f"old {i}", "n")
        results: list = []
        writers = [threading.Thread(target=lambda i=i: results.append(service.remember(f"new {i}", "n")))
                   for i in range(4)]
        for w in writers:
            w.start()
        erased = service.forget_namespace("n")
        for w in writers:
            w.join(60)
        texts = [e.text for e in service.entries("n").entries]
        assert 5 <= erased <= 9 and len(results) == 4                      # every writer was answered
        assert not any(t.startswith("old") for t in texts)
        assert len(texts) == 9 - erased and service.recall("?", "n").retrieved.startswith(f"{len(texts)} texts")
        assert service.forget_namespace("never-made") == 0
        assert "never-made" not in service.folder.namespaces()


def test_a_namespace_whose_log_is_damaged_can_still_be_forgotten_whole(tmp_path, notes, capsys):
    from mstar.cli import main
    store = tmp_path / "mem"
    with MemoryService(store, notes) as service:
        for ns in ("a", "b"):
            for i in range(3):
                service.remember(f"{ns} secret {i}", ns)
    for ns in ("a", "b"):                      # a stray byte in the middle: the log is refused
        log = store / "namespaces" / ns / "log.jsonl"
        lines = log.read_bytes().split(b"\n")
        lines[1] = lines[1].replace(b"secret", b"sekret")
        log.write_bytes(b"\n".join(lines))
    with MemoryService(store, None) as service:
        with pytest.raises(StoreError, match="line 2 is damaged"):
            service.recall("?", "a")
        assert service.forget_namespace("a") == 0
        assert service.folder.namespaces() == ["b"]
    assert main(["memory", "forget", str(store), "-n", "b", "--all"]) == 0
    assert "forgot namespace 'b' (its log was damaged)" in capsys.readouterr().out
    assert b"secret" not in store_bytes(store) and not (store / "namespaces" / "b").exists()

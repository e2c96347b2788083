"""The store's files without a worker: the write log (fsync'd lines, torn tails, damage, a
failed append), the store folder (program identity, format version) and namespace names."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from mstar.memory import log as log_module
from mstar.memory.log import LogBusyError, LogError, LogRecord, WriteLog, encode_record, read_log
from mstar.memory.store import StoreError, check_namespace, open_store
from mstar.memory.tape import ReplayMissing, ToolkitTape, prompt_hash

SEED = Path(__file__).resolve().parent.parent / "seeds" / "vector_search.py"


def record(seq: int, text: str = "", **kw) -> LogRecord:
    return LogRecord(seq=seq, text=text or f"text {seq} é ✓", item={"content": f"fact {seq}", "n": seq * 0.5}, **kw)


def write_records(path, n: int) -> None:
    log = WriteLog(path)
    log.open()
    for i in range(1, n + 1):
        log.append(record(i))
    log.close()


def test_records_round_trip_in_order_and_the_file_is_private(tmp_path):
    path = tmp_path / "log.jsonl"
    write_records(path, 5)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    log = WriteLog(path)
    got = log.open()
    assert [r.seq for r in got] == [1, 2, 3, 4, 5]
    assert got[2] == record(3)
    log.append(record(6, toolkit=[{"prompt": "ab", "reply": "r"}], error="ValueError: x"))
    log.close()
    assert read_log(path)[-1].toolkit == [{"prompt": "ab", "reply": "r"}]


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(min_value=1, max_value=10_000))
def test_a_torn_last_line_is_dropped_with_a_warning_and_cut_off(tmp_path_factory, cut):
    """A crash can stop the last append anywhere in its line: whatever is left of it goes (it
    was never acknowledged), everything before it stays, and the next append is a whole line."""
    path = tmp_path_factory.mktemp("torn") / "log.jsonl"
    write_records(path, 3)
    whole = path.read_bytes()
    last = encode_record(record(4))
    cut = cut % len(last) or 1                       # 1 .. len-1 bytes of the fourth line
    path.write_bytes(whole + last[:cut])
    warnings: list[str] = []
    log = WriteLog(path, on_warning=warnings.append)
    assert [r.seq for r in log.open()] == [1, 2, 3]
    assert len(warnings) == 1 and "dropped a half-written last line" in warnings[0] and "3 writes" in warnings[0]
    assert path.read_bytes() == whole
    log.append(record(4))
    log.close()
    assert [r.seq for r in read_log(path)] == [1, 2, 3, 4]


def test_a_damaged_line_with_lines_after_it_is_refused_not_dropped(tmp_path):
    path = tmp_path / "log.jsonl"
    write_records(path, 3)
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1].replace(b"fact 2", b"fact X")   # one changed byte: the checksum says so
    path.write_bytes(b"\n".join(lines))
    with pytest.raises(LogError, match="line 2 is damaged"):
        WriteLog(path).open()
    with pytest.raises(LogError, match="line 2 is damaged"):
        read_log(path)
    assert path.read_bytes() == b"\n".join(lines)        # left as it is


def test_a_damaged_last_line_with_its_newline_is_refused_and_the_file_left_unchanged(tmp_path):
    """Only an unterminated last line can be a torn write (the newline is the last byte of the one
    write call): a whole last line whose checksum fails was written, perhaps acknowledged, and then
    damaged -- refused like a damaged middle line, nothing cut off."""
    path = tmp_path / "log.jsonl"
    write_records(path, 2)
    damaged = path.read_bytes().replace(b"fact 2", b"fact Y")      # one flipped byte in the last line
    assert damaged.endswith(b"\n")
    path.write_bytes(damaged)
    warnings: list[str] = []
    with pytest.raises(LogError, match="line 2 is damaged.*it is the last line, but it ends with its newline"):
        WriteLog(path, on_warning=warnings.append).open()
    with pytest.raises(LogError, match="line 2 is damaged"):
        read_log(path)
    assert path.read_bytes() == damaged and warnings == []
    WriteLog(path).close()                     # the refused open left no lock behind: a second try says the same
    with pytest.raises(LogError, match="line 2 is damaged"):
        WriteLog(path).open()


def test_one_writer_per_log(tmp_path):
    path = tmp_path / "log.jsonl"
    first = WriteLog(path)
    first.open()
    with pytest.raises(LogBusyError, match="open in another process"):
        WriteLog(path).open()
    with pytest.raises(LogBusyError, match="stop it first"):
        read_log(path)
    first.close()
    WriteLog(path).open()


def test_a_failed_append_is_cut_back_and_raised(tmp_path, monkeypatch):
    """The disk refuses the middle of a line: the caller gets the OSError, the file is as before
    (nothing half there), and the log goes on when the disk has room again."""
    path = tmp_path / "log.jsonl"
    write_records(path, 2)
    before = path.read_bytes()
    log = WriteLog(path)
    log.open()
    real_pwrite = os.pwrite

    def full_disk(fd, data, offset):
        real_pwrite(fd, data[:10], offset)             # part of the line reaches the file ...
        raise OSError(errno.ENOSPC, "No space left on device")   # ... then the disk is full

    monkeypatch.setattr(log_module.os, "pwrite", full_disk)
    with pytest.raises(OSError, match="No space left"):
        log.append(record(3))
    assert path.read_bytes() == before and log.count == 2
    monkeypatch.setattr(log_module.os, "pwrite", real_pwrite)
    log.append(record(3))
    log.close()
    assert [r.seq for r in read_log(path)] == [1, 2, 3]


def test_a_file_size_limit_refuses_the_append_in_a_real_process(tmp_path):
    """The same through the kernel: RLIMIT_FSIZE makes the write fail (EFBIG) part way."""
    path = tmp_path / "log.jsonl"
    write_records(path, 2)
    size = path.stat().st_size
    script = textwrap.dedent(f"""
        import resource, sys
        from mstar.memory.log import WriteLog, LogRecord
        log = WriteLog({str(path)!r}); log.open()
        resource.setrlimit(resource.RLIMIT_FSIZE, ({size} + 40, resource.RLIM_INFINITY))
        try:
            log.append(LogRecord(seq=3, text="x" * 500, item={{}}))
        except OSError as exc:
            print("refused", exc.errno)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == f"refused {errno.EFBIG}", out.stderr
    assert path.stat().st_size == size and len(read_log(path)) == 2


def test_namespace_names_never_leave_the_namespaces_folder(tmp_path):
    for good in ("default", "alice", "user-42", "agent_7.v2", "A" * 64):
        assert check_namespace(good) == good
    for bad in ("", ".", "..", "../alice", "a/b", "a\\b", "/etc", ".hidden", "a" * 65, "名前", "a b", "a\x00b", 7, None):
        with pytest.raises(StoreError, match="refused"):
            check_namespace(bad)


@given(st.text(max_size=80))
def test_any_accepted_name_is_one_folder_inside_the_store(name):
    try:
        check_namespace(name)
    except StoreError:
        return
    assert "/" not in name and "\\" not in name and not name.startswith(".") and os.path.basename(name) == name
    assert name.isprintable() and not any(c.isspace() for c in name)      # one line, as `memory info` lists it


def test_a_name_with_a_trailing_newline_is_refused_and_makes_no_second_folder(tmp_path):
    """`$` also matches before a final newline: "alice\n" was a second folder beside "alice"."""
    for bad in ("alice\n", "alice\r\n", "\nalice", "alice\n\n"):
        with pytest.raises(StoreError, match="refused"):
            check_namespace(bad)
    store = open_store(tmp_path / "mem", SEED.read_text(), "vector_search")
    store.log_path("alice").touch()
    with pytest.raises(StoreError, match="refused"):
        store.log_path("alice\n")
    assert [p.name for p in store.namespaces_dir.iterdir()] == ["alice"] and store.namespaces() == ["alice"]


def test_a_store_belongs_to_one_program(tmp_path):
    vector = SEED.read_text()
    store = open_store(tmp_path / "mem", vector, "vector_search")
    assert oct((tmp_path / "mem").stat().st_mode & 0o777) == "0o700"
    assert open_store(tmp_path / "mem", vector, "again").sha256 == store.sha256
    assert open_store(tmp_path / "mem", None).source == vector          # the store's own program
    # The same code with other comments (`mstar export` heads a file with the export's time) is the
    # same program: the store goes on with its own text. Other code is another program.
    assert open_store(tmp_path / "mem", "# exported again\n" + vector + "\n# changed\n", "best").source == vector
    with pytest.raises(StoreError, match="holds the memory of program 'vector_search'.*mstar memory migrate"):
        open_store(tmp_path / "mem", vector + "\nCHANGED = 1\n", "best")
    (tmp_path / "mem" / "program.py").write_text(vector + "# edited by hand\n")
    with pytest.raises(StoreError, match="was changed after the store was made"):
        open_store(tmp_path / "mem", None)


def test_other_format_versions_and_non_stores_are_refused(tmp_path):
    vector = SEED.read_text()
    open_store(tmp_path / "mem", vector, "vector_search")
    meta = json.loads((tmp_path / "mem" / "store.json").read_text())
    (tmp_path / "mem" / "store.json").write_text(json.dumps({**meta, "format_version": 3}))
    with pytest.raises(StoreError, match="format version 3; this mstar reads versions 1, 2"):
        open_store(tmp_path / "mem", vector)
    # a version 1 store is read as it is, and marked 2 once this mstar opens it to write
    (tmp_path / "mem" / "store.json").write_text(json.dumps({**meta, "format_version": 1}))
    open_store(tmp_path / "mem", None, create=False)
    assert json.loads((tmp_path / "mem" / "store.json").read_text())["format_version"] == 1
    open_store(tmp_path / "mem", vector)
    assert json.loads((tmp_path / "mem" / "store.json").read_text())["format_version"] == 2
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="exists and is not a memory store"):
        open_store(tmp_path / "busy", vector)
    with pytest.raises(StoreError, match="not a memory store"):
        open_store(tmp_path / "nothing", None)


def test_the_tape_records_live_replies_and_serves_them_back_without_the_llm():
    calls = []

    def live(messages):
        calls.append(messages)
        if "fail" in messages[0]["content"]:
            raise TimeoutError("provider timed out")
        return f"reply {len(calls)}"

    tape = ToolkitTape(live)
    asked = [[{"role": "user", "content": "first"}], [{"role": "user", "content": "fail"}]]
    with tape.recording() as kept:
        assert tape(asked[0]) == "reply 1"
        with pytest.raises(TimeoutError):
            tape(asked[1])
    assert kept == [{"prompt": prompt_hash(asked[0]), "reply": "reply 1"},
                    {"prompt": prompt_hash(asked[1]), "error": "TimeoutError: provider timed out"}]
    assert tape(asked[0]) == "reply 3" and len(calls) == 3      # outside a write: live, not kept
    with tape.serving(kept) as served:
        assert tape(asked[0]) == "reply 1"
        with pytest.raises(RuntimeError, match="provider timed out"):
            tape(asked[1])
        with pytest.raises(ReplayMissing):
            tape(asked[0])
    assert len(calls) == 3 and "asked the toolkit LLM 3 time(s)" in served.diverged
    with tape.serving(kept) as served:
        tape([{"role": "user", "content": "something else"}])
    assert "another prompt" in served.diverged

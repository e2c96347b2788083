"""Forgetting as erasure for a program whose write() asks the toolkit LLM with what it already
holds (a running profile rewritten at every write): the forget re-asks the toolkit where the
forgotten entry changed the prompt, so no reply restating the forgotten text is kept or served --
through the Python API, and through `mstar memory forget` against a loopback endpoint. A live call
that fails refuses the forget and changes nothing. Real sandbox workers, real logs."""
from __future__ import annotations

import json
import os
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mstar.api import MemoryProgram, llm_config
from mstar.memory.log import read_log
from mstar.memory.store import StoreError
from run_helpers import PROGRAM_HEAD
from test_memory_forget import store_bytes

PROFILE = '''"""Keeps a running profile that the toolkit LLM rewrites from the old profile and the new note."""
''' + PROGRAM_HEAD + '''

class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.profile = ""

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        messages = [{"role": "user", "content": "Rewrite this profile to include the note.\\n\\nPROFILE:\\n"
                     + self.profile + "\\n\\nNEW NOTE:\\n" + raw_text}]
        try:
            self.profile = self.toolkit.llm_completion(messages)[:4000]
        except Exception:                      # what evolved programs do: go on without the LLM
            self.profile = (self.profile + "\\n" + raw_text)[-4000:]

    def read(self, query: Query) -> str:
        return self.profile or "nothing yet"
'''

TEXTS = {"first": "Maya was born in Porto.", "pin": "Maya's bank PIN is 7741-SECRET.",
         "cat": "Maya has a cat named Biscuit.", "city": "Maya lives in Lisbon."}
SECRET = b"7741-SECRET"


def rewrite(messages: list[dict]) -> str:
    """A toolkit LLM that does its job: the new profile restates every fact it was given."""
    old, new = messages[-1]["content"].split("PROFILE:\n", 1)[1].split("\n\nNEW NOTE:\n")
    return "\n".join(part.strip() for part in (old, new) if part.strip())


class Toolkit:
    """`rewrite`, counting its calls; while `down`, every call fails as an endpoint that is down."""

    def __init__(self) -> None:
        self.calls = 0
        self.down = False

    def __call__(self, messages: list[dict]) -> str:
        if self.down:
            raise ConnectionError("the toolkit endpoint is down")
        self.calls += 1
        return rewrite(messages)


def refuse(messages: list[dict]) -> str:
    raise AssertionError("a replay asked the toolkit LLM")


@pytest.fixture()
def profile(tmp_path) -> Path:
    path = tmp_path / "profile.py"
    path.write_text(PROFILE)
    return path


def scratch_files_holding(needle: bytes) -> list[str]:
    """Readable files of the sandbox workers' scratch folders (chroma, sqlite...) holding `needle`."""
    found = []
    for top in Path(tempfile.gettempdir()).glob("mstar-sbx-*"):
        for folder, _dirs, files in os.walk(top):
            for name in files:
                try:
                    if needle in Path(folder, name).read_bytes():
                        found.append(str(Path(folder, name)))
                except OSError:
                    continue
    return found


def test_a_forget_re_asks_the_toolkit_where_the_forgotten_entry_changed_its_prompt_and_keeps_no_byte_of_it(
        tmp_path, profile):
    store = tmp_path / "mem"
    toolkit, warnings = Toolkit(), []
    with MemoryProgram.open(profile, store=store, namespace="u", toolkit_llm=toolkit,
                            on_warning=warnings.append) as memory:
        for ident, text in TEXTS.items():
            memory.ingest(text, id=ident)
        assert SECRET.decode() in memory.ask_detailed("PIN?", answer=False).retrieved
        log = store / "namespaces" / "u" / "log.jsonl"
        first_line = log.read_bytes().split(b"\n")[0]
        calls = toolkit.calls
        assert memory.forget(["pin"]).ids == ["pin"]
        # "first" was asked before the PIN existed: served from its record. "cat" and "city" were
        # asked with a profile holding the PIN: asked again.
        assert toolkit.calls - calls == 2
        after = memory.ask_detailed("PIN?", answer=False).retrieved
        assert after == "\n".join(TEXTS[k] for k in ("first", "cat", "city"))
        assert log.read_bytes().split(b"\n")[0] == first_line          # an unchanged entry keeps its bytes
        assert SECRET not in store_bytes(store)
        assert scratch_files_holding(SECRET) == []
    assert [r.entry_id for r in read_log(log)] == ["first", "cat", "city"]
    assert not [w for w in warnings if "not deterministic" in w], warnings
    with MemoryProgram.open(None, store=store, namespace="u", toolkit_llm=refuse) as again, \
            MemoryProgram.open(profile, store=tmp_path / "fresh", namespace="u", toolkit_llm=rewrite) as fresh:
        for ident in ("first", "cat", "city"):
            fresh.ingest(TEXTS[ident], id=ident)
        assert again.ask_detailed("PIN?", answer=False).retrieved == after \
            == fresh.ask_detailed("PIN?", answer=False).retrieved
    assert SECRET not in store_bytes(store)


def test_a_forget_whose_live_toolkit_call_fails_is_refused_and_changes_nothing(tmp_path, profile):
    """The program catches the failure and goes on; the forget is refused all the same (its state
    would not be a store's that never saw the entry), and goes through once the endpoint is back."""
    store = tmp_path / "mem"
    toolkit = Toolkit()
    with MemoryProgram.open(profile, store=store, namespace="u", toolkit_llm=toolkit) as memory:
        for ident in ("pin", "cat"):
            memory.ingest(TEXTS[ident], id=ident)
        log = store / "namespaces" / "u" / "log.jsonl"
        before, read = log.read_bytes(), memory.ask_detailed("?", answer=False).retrieved
        toolkit.down = True
        with pytest.raises(StoreError) as info:
            memory.forget(["pin"])
        message = str(info.value)
        assert "forget refused" in message and "entry 'cat'" in message and "the toolkit endpoint is down" in message
        assert "nothing was forgotten, the store is unchanged" in message and "\n" not in message
        assert log.read_bytes() == before and sorted(os.listdir(log.parent)) == ["log.jsonl"]
        assert memory.ask_detailed("?", answer=False).retrieved == read
        assert [e.id for e in memory.entries().entries] == ["pin", "cat"]
        toolkit.down = False
        assert memory.forget(["pin"]).ids == ["pin"]
        assert memory.ask_detailed("?", answer=False).retrieved == TEXTS["cat"]
    assert SECRET not in store_bytes(store)


class Endpoint:
    """A loopback OpenAI-compatible endpoint: the profile rewrite for the toolkit's prompts, a
    KnowledgeItem for everything else."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                messages = request["messages"]
                content = rewrite(messages) if "PROFILE:\n" in messages[-1]["content"] else \
                    json.dumps({"content": "a fact", "query_text": "a fact"})
                body = json.dumps({"id": "c1", "object": "chat.completion", "model": "m", "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body.encode())))
                self.end_headers()
                self.wfile.write(body.encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_the_cli_forget_asks_the_stores_endpoint_again_and_refuses_without_llm_options(tmp_path, profile, capsys,
                                                                                     monkeypatch):
    from mstar.cli import main
    for name in ("MSTAR_BASE_URL", "MSTAR_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    endpoint = Endpoint()
    store = tmp_path / "mem"
    try:
        llm = llm_config(base_url=endpoint.url, model="m", no_cache=True)
        with MemoryProgram.open(profile, store=store, namespace="u", llm=llm) as memory:
            for ident in ("pin", "cat", "city"):
                memory.ingest(TEXTS[ident], id=ident)
        log = store / "namespaces" / "u" / "log.jsonl"
        before = log.read_bytes()
        assert main(["memory", "forget", str(store), "-n", "u", "--id", "pin"]) == 2
        err = capsys.readouterr().err.strip()
        assert "forget refused" in err and "no toolkit LLM was given" in err and "\n" not in err
        assert log.read_bytes() == before
        assert main(["memory", "forget", str(store), "-n", "u", "--id", "pin", "--base-url", endpoint.url,
                     "--model", "m", "--no-cache"]) == 0
        assert capsys.readouterr().out.strip() == "forgot 1 entry of 'u' (pin)"
        assert SECRET not in store_bytes(store)
        with MemoryProgram.open(None, store=store, namespace="u", llm=llm, toolkit_llm=refuse) as memory:
            assert memory.ask_detailed("?", answer=False).retrieved == f"{TEXTS['cat']}\n{TEXTS['city']}"
    finally:
        endpoint.close()


def test_matching_looks_at_the_texts_and_the_items_values_never_at_field_names_or_json(tmp_path, capsys):
    """`content` is the notes program's item field: only the entry that says "content" matches,
    through the API and the command line alike (the MCP tools call the same service)."""
    from mstar.cli import main
    from mstar.memory.entries import matches
    from mstar.memory.log import LogRecord
    from test_memory_store import NOTES
    rec = LogRecord(seq=1, text="Tom moved.", item={"content": "moved", "where": {"city": "Lisbon"},
                                                    "tags": ["Porto"], "year": 2023, "ok": True})
    assert [n for n in ("lisbon", "PORTO", "2023", "moved") if matches(rec, n)] == ["lisbon", "PORTO", "2023", "moved"]
    assert not [n for n in ("content", "where", "city", "tags", "year", "true", "{", '":"', "[", "moved\", \"")
                if matches(rec, n)]
    notes = tmp_path / "notes.py"
    notes.write_text(NOTES)
    store = tmp_path / "mem"
    texts = ["Maya adopted a cat named Biscuit.", "Tom moved to Lisbon.", "Ana works in content moderation."]
    with MemoryProgram.open(notes, store=store, namespace="u") as memory:
        acks = [memory.ingest(t) for t in texts]
        assert all(a.item == {"content": a.item["content"]} for a in acks)      # the field is there
        assert [e.text for e in memory.entries(contains="CONTENT").entries] == [texts[2]]
        assert [memory.entries(contains=n).total for n in ("{", '":"', "content\"")] == [0, 0, 0]
    assert main(["memory", "list", str(store), "-n", "u", "--contains", "content"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == [acks[2].id]
    assert main(["memory", "forget", str(store), "-n", "u", "--matching", "content"]) == 0
    assert capsys.readouterr().out.strip() == f"forgot 1 entry of 'u' ({acks[2].id})"
    with MemoryProgram.open(None, store=store, namespace="u") as memory:
        assert [e.text for e in memory.entries().entries] == texts[:2]
        assert memory.forget_matching("content").ids == []

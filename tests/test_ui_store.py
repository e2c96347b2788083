"""The store page of `mstar ui --store DIR` in real headless Chromium: the program and its
namespaces with entry counts and last writes, one namespace's entries with a text filter, a recall
box showing what read() returns -- hostile markup in the entries shown as text -- and the JSON
routes' refusals (a namespace a server holds, a name that walks out of the folder)."""
from __future__ import annotations

import json

import pytest

from mstar.memory.service import MemoryService
from mstar.ui.server import UIServer
from test_memory_store import NOTES
from test_ui_browser import _page, browser  # noqa: F401 -- the fixture
from ui_helpers import get

HOSTILE = '<img src=x onerror="window.__pwned=1">the vault code is <b>4512</b>'


@pytest.fixture()
def store(tmp_path):
    program = tmp_path / "notes.py"
    program.write_text(NOTES)
    with MemoryService(tmp_path / "mem", program) as service:
        for i in range(3):
            service.remember(f"alice fact {i}", "alice")
        service.remember(HOSTILE, "alice")
        service.remember("bob only", "bob")
    return tmp_path / "mem"


def test_the_store_page_lists_namespaces_and_entries_and_recalls_in_chromium(browser, tmp_path, store):  # noqa: F811
    problems: list[str] = []
    with UIServer(tmp_path / "no-runs", store=store) as srv:
        page = _page(browser, problems)
        page.goto(srv.url + "#/store")
        page.wait_for_selector("#namespaces-table")
        rows = page.eval_on_selector_all("#namespaces-table tr[data-namespace]",
                                         "rs => rs.map(r => [r.dataset.namespace, r.cells[1].textContent])")
        assert rows == [["alice", "4"], ["bob", "1"]]
        assert "notes" in page.text_content("#app") and "class KnowledgeBase" in page.text_content("pre.source")
        page.click("text=alice")
        page.wait_for_selector("#entries-table")
        texts = page.eval_on_selector_all("#entries-table pre.entry-text", "ps => ps.map(p => p.textContent)")
        assert texts == ["alice fact 0", "alice fact 1", "alice fact 2", HOSTILE]
        page.fill("#entry-filter", "VAULT")
        page.click("#filter-form button")
        page.wait_for_selector("#entries-count:has-text('1 of 1 entries holding')")
        assert page.eval_on_selector_all("#entries-table pre.entry-text", "ps => ps.map(p => p.textContent)") == [HOSTILE]
        page.fill("#recall-question", "what is the code?")
        page.click("#recall-form button")
        page.wait_for_selector("#recall-result pre.retrieved")
        retrieved = page.text_content("#recall-result pre.retrieved")
        assert retrieved == f"alice fact 0 | alice fact 1 | alice fact 2 | {HOSTILE}"   # read() of alice's only
        assert page.evaluate("window.__pwned") is None and page.query_selector("#app img") is None
    assert problems == []


def test_the_store_routes_refuse_what_they_must(tmp_path, store):
    with UIServer(tmp_path / "no-runs", store=store) as srv:
        base = srv.url.rstrip("/")
        status, _, body = get(base + "/api/store/..%2Fbob")
        assert status == 409 and "refused" in json.loads(body)["error"]
        status, _, body = get(base + "/api/store/carol")
        assert status == 404 and json.loads(body)["error"] == "the store has no namespace 'carol'"
        with MemoryService(store, None) as server:
            server.recall("?", "bob")                                  # a server holds bob now
            status, _, body = get(base + "/api/store/bob")
            assert status == 409 and "is open in another process" in json.loads(body)["error"]
            summary = json.loads(get(base + "/api/store")[2])
            assert [n["entries"] for n in summary["namespaces"]] == [4, None]
    with UIServer(tmp_path / "no-runs") as srv:
        status, _, body = get(srv.url.rstrip("/") + "/api/store")
        assert status == 404 and "mstar ui --store" in json.loads(body)["error"]

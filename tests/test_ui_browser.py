"""`mstar ui` in real headless Chromium (Debian's /usr/bin/chromium, driven by Playwright):
an offline run started while the page watches (each new iteration on the run page within 2 s
of its event being written), a click from the lineage to a diff, a case page with what read()
returned, hostile markup shown as text, and a screenshot.

Needs the [ui-test] extra (Playwright; `pip install -e ".[ui-test]"`, no browser download) and
chromium (`apt-get install -y chromium`); skipped with a note naming what is missing, except
that on CI (CI set) a missing chromium fails, as in tests/test_report.py.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from failure_helpers import SMALL
from mstar.run import events as ev_types
from mstar.run.views import RunView
from mstar.ui.server import UIServer
from ui_helpers import (HOSTILE_ANSWER, HOSTILE_BODY, HOSTILE_RETRIEVED, HOSTILE_SOURCE_LINE, HOSTILE_TITLE,
                        make_hostile_run)

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run"]
LIVE_WITHIN_S = 2.0


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        if path := shutil.which(name):
            return path
    if os.environ.get("CI"):
        pytest.fail("chromium is missing: .ci/run installs it (apt-get install -y chromium)")
    pytest.skip("chromium not installed (apt-get install -y chromium)")


@pytest.fixture()
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip('Playwright is not installed: pip install -e ".[ui-test]" (it drives the system chromium)')
    binary = _chromium()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=binary, headless=True, args=CHROMIUM_ARGS)  # a fresh profile
        try:
            yield b
        finally:
            b.close()


def _page(browser, problems: list):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    return page


# Records when each lineage row first appears on the page (epoch seconds, the page's clock).
_WATCH_ROWS = """() => {
  window.__firstSeen = {};
  window.__before = Array.from(document.querySelectorAll('#lineage .row')).map((r) => r.dataset.id);
  const mark = () => document.querySelectorAll('#lineage .row').forEach((r) => {
    if (!(r.dataset.id in window.__firstSeen)) window.__firstSeen[r.dataset.id] = Date.now() / 1000; });
  mark();
  new MutationObserver(mark).observe(document.getElementById('app'), {childList: true, subtree: true});
}"""


def _event_label(ev) -> str | None:
    if isinstance(ev, ev_types.SeedEvent):
        return ev.program_id
    if isinstance(ev, ev_types.IterationEvent):
        return f"iter_{ev.iteration:03d}"
    return None


def _written(lineage: Path, seen: dict[str, float]) -> None:
    """Note the time each event line is first seen complete in the file."""
    if not lineage.exists():
        return
    for line in lineage.read_text().split("\n")[:-1]:       # whole lines only
        ev = ev_types.from_dict(json.loads(line))
        label = _event_label(ev) if ev is not None else None
        if label is not None and label not in seen:
            seen[label] = time.time()


def test_a_live_run_in_chromium(browser, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    live = runs / "live"
    problems: list[str] = []
    with UIServer(runs) as srv:
        page = _page(browser, problems)
        page.goto(srv.url)
        page.wait_for_selector("text=No runs yet")
        proc = subprocess.Popen([sys.executable, "-m", "mstar.cli", "evolve", *SMALL, "--iterations", "4",
                                 "--confirm-size", "0", "--out", str(live), "--quiet"], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        written: dict[str, float] = {}
        try:
            # the runs list is live too: the new run shows up without a reload
            page.wait_for_selector('#runs-table tr[data-run="live"] a', timeout=60_000)
            page.click('#runs-table tr[data-run="live"] a')
            page.wait_for_selector("#progress")
            page.evaluate(_WATCH_ROWS)
            while proc.poll() is None:
                _written(live / "lineage.jsonl", written)
                time.sleep(0.02)
            _written(live / "lineage.jsonl", written)
            assert proc.returncode == 0, proc.stderr.read()[-2000:]
            page.wait_for_selector("h1 .status.finished", timeout=10_000)   # the end, also without a reload
        finally:
            if proc.poll() is None:
                proc.kill()
        first_seen = page.evaluate("() => window.__firstSeen")
        before = set(page.evaluate("() => window.__before"))
        fresh = {label: first_seen[label] - t for label, t in written.items() if label not in before}
        assert [label for label in fresh if label.startswith("iter_")], \
            f"the page was not open before an iteration was written: {written} {before}"
        print("appeared after the event was written (s):", {k: round(v, 3) for k, v in fresh.items()})
        for label, late in fresh.items():
            assert late < LIVE_WITHIN_S, f"{label} appeared {late:.2f} s after its event was written"
        assert set(written) <= set(first_seen)

        # a click on a node shows its diff against the parent
        view = RunView(live)
        child = next(n for n in view.nodes() if n.status == "ok")
        diff = view.program_detail(child.program_id)["diff"]
        added = next(line for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++"))
        page.click(f'#lineage .row[data-id="{child.program_id}"] a.node')
        page.wait_for_selector("#diff pre.diff")
        assert added in page.text_content("#diff pre.diff")
        assert page.text_content("#reflector .commit-title") == child.title

        # its cases, then one case: what read() returned, whole
        page.click(f'#app a[href="#/run/live/cases/{child.program_id}/static"]')
        page.wait_for_selector("#cases tbody tr")
        qid = page.get_attribute("#cases tbody tr", "data-qid")
        page.click(f'#cases tbody tr[data-qid="{qid}"] a')
        page.wait_for_selector("#retrieved pre.retrieved")
        case = next(c for c in view.cases(child.program_id, "static")["cases"] if c["query_id"] == qid)
        assert page.text_content("#retrieved pre.retrieved") == case["retrieved"] and case["retrieved"]
        assert page.text_content("#question pre.answer") == case["answer"]

        # back on the run page: the screenshot the README's is made like (bench/ui_screenshot.py)
        page.goto(srv.url + "#/run/live")
        page.wait_for_selector("#trajectory svg .pt")
        png = tmp_path / "ui-run.png"
        page.screenshot(path=str(png), full_page=True)
    from PIL import Image
    with Image.open(png) as im:
        assert im.size[0] == 1280 and im.size[1] > 900
        assert len(im.convert("RGB").getcolors(maxcolors=1 << 20) or range(1 << 20)) > 100   # not a blank page
    assert problems == []


def test_hostile_markup_renders_as_text(browser, tmp_path):
    make_hostile_run(tmp_path / "hostile")
    problems: list[str] = []
    with UIServer(tmp_path) as srv:
        page = _page(browser, problems)

        def clean():
            assert page.evaluate("() => window.__pwned") is None
            # nothing the data held became an element or an attribute
            assert page.locator("#app img, #app iframe, #app script, #app style, #app b, [onerror], [onload]").count() == 0
            assert page.locator("#app a[href^='javascript']").count() == 0
            assert page.evaluate("() => getComputedStyle(document.body).display") != "none"

        page.goto(srv.url + "#/run/hostile")
        page.wait_for_selector('#lineage .row[data-id="iter_001"]')
        assert HOSTILE_TITLE in page.text_content('#lineage .row[data-id="iter_001"]')
        clean()
        page.click('#lineage .row[data-id="iter_001"] a.node')
        page.wait_for_selector("#reflector .commit-title")
        assert page.text_content("#reflector .commit-title") == HOSTILE_TITLE
        assert page.text_content("#reflector .commit-body") == HOSTILE_BODY
        assert HOSTILE_SOURCE_LINE in page.text_content("#diff pre.diff")
        clean()
        page.goto(srv.url + "#/run/hostile/case/iter_001/static/q1")
        page.wait_for_selector("#retrieved pre.retrieved")
        assert page.text_content("#question pre.answer") == HOSTILE_ANSWER
        assert page.text_content("#question pre.question") == HOSTILE_TITLE
        # the right-to-left override is shown, not obeyed (as the CLI shows it)
        assert page.text_content("#retrieved pre.retrieved") == HOSTILE_RETRIEVED.replace("\u202e", "\\u202e")
        clean()
        # the writes: an extracted item as JSON, one never asked for (write() ignores it) says so
        writes = page.locator("#writes details.write")
        assert writes.count() == 2
        assert "Maya works at the bakery" in writes.nth(0).text_content()
        assert "not extracted: this program's write() never reads its item" in writes.nth(1).text_content()
        assert "not extracted" not in writes.nth(0).text_content()
        # the attribution place shows a case's `attribution` when it has one, and nothing otherwise
        assert page.locator("#attribution").count() == 0
        page.goto(srv.url + "#/run/hostile/case/iter_001/static/q2")
        page.wait_for_selector("#attribution")
        shown = page.text_content("#attribution")   # the memory X-ray's shape (mstar/evaluation/attribution.py)
        assert "stored, not retrieved" in shown and "D1:3" in shown
        assert "<b onmouseover=alert(1)>the fact was not read</b>" in shown   # evidence text, as text
    assert problems == []

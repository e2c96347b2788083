"""`mstar report`: one self-contained HTML file with every section; rendered in headless Chromium
when it is installed (CI installs it; see .ci/run)."""
from __future__ import annotations

import importlib.util
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from mstar.cli import main
from mstar.run.views import RunView
from mstar.run.report import SECTIONS, build_report
from run_helpers import make_synthetic_run, small_run

ROOT = Path(__file__).resolve().parents[1]


class _Outline(HTMLParser):
    """Section ids, the SVGs inside each section, and every src/href the page would load."""

    def __init__(self):
        super().__init__()
        self.sections: dict[str, int] = {}
        self.current: str | None = None
        self.loads: list[str] = []
        self.details: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.current = a.get("id")
            self.sections[self.current] = 0
        elif tag == "svg" and self.current:
            self.sections[self.current] += 1
        elif tag == "script":
            self.scripts += 1
        elif tag == "details":
            self.details.append(a.get("id", ""))
        for key in ("src", "href"):
            if key in a and not str(a[key]).startswith("#") and tag != "svg":
                self.loads.append(a[key])


def _outline(page: str) -> _Outline:
    p = _Outline()
    p.feed(page)
    return p


def test_report_has_every_section_and_is_self_contained(tmp_path):
    run = make_synthetic_run(tmp_path / "syn")
    page = build_report(RunView(run))
    o = _outline(page)
    assert list(o.sections) == list(SECTIONS)
    assert o.sections["trajectory"] == 1 and o.sections["categories"] == 1 and o.sections["spend"] == 1
    assert o.scripts == 0 and o.loads == []  # nothing fetched: no scripts, images, fonts or styles
    assert not re.search(r"url\((?!#)", page)  # CSS/SVG references stay inside the page
    # the lineage tree with its markers, one diff block per program, the best one open
    assert "REGRESSION" in page and "FAILED" in page and "DUPLICATE" in page
    assert o.details == ["diff-seed_a", "diff-iter_001", "diff-iter_002", "diff-iter_003", "diff-iter_004"]
    assert '<details id="diff-iter_001" open>' in page
    assert '<span class="add">+        return &quot;\\n&quot;.join(self.items)[-2000:]</span>' in page
    # spend per role in tokens (no prices), per-category table of the best against the seed
    assert "No prices configured" in page and "<th>reflector</th>" in page
    assert "iter_001 (best)" in page and "Held-out test, iter_001: 0.400" in page
    # the trajectory marks the misses and the best-so-far line (matplotlib text stays text)
    for label in ("best so far", "no child: failed gates/compile", "no child: duplicate", "best: iter_001"):
        assert label in page
    # svg ids of the three figures do not collide
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))


def test_report_command_on_a_real_run(tmp_path_factory, capsys):
    run = small_run(tmp_path_factory)
    out = tmp_path_factory.mktemp("report") / "r.html"
    assert main(["report", str(run), "--out", str(out)]) == 0
    assert f"wrote   {out}" in capsys.readouterr().out
    page = out.read_text()
    o = _outline(page)
    assert list(o.sections) == list(SECTIONS) and o.loads == [] and o.scripts == 0
    assert len(o.details) == 3 + 4  # three seeds and four iterations
    for role in ("task", "toolkit", "reflector"):
        assert f"<th>{role}</th>" in page
    assert main(["report", str(tmp_path_factory.mktemp("empty"))]) == 2
    assert "not an mstar run folder" in capsys.readouterr().err


def _bench():
    spec = importlib.util.spec_from_file_location("report_screenshot", ROOT / "bench" / "report_screenshot.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_report_renders_in_headless_chromium(tmp_path_factory):
    bench = _bench()
    binary = bench.find_chromium()
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run installs it (apt-get install -y chromium)")
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    run = small_run(tmp_path_factory)
    html_path = tmp_path_factory.mktemp("browser") / "report.html"
    html_path.write_text(build_report(RunView(run)))
    layout = bench.probe_layout(binary, html_path)
    assert bench.section_problems(layout) == []
    assert set(layout["sections"]) == set(SECTIONS)
    png = html_path.with_suffix(".png")
    bench.screenshot(binary, html_path, png, 1280, layout["page_height"])
    assert bench.png_colours(png) > 100  # not a blank page
    from PIL import Image
    with Image.open(png) as im:
        assert im.size == (1280, layout["page_height"])

#!/usr/bin/env python3
"""Render a run's HTML report in headless Chromium, check every section, take a screenshot.

    python bench/report_screenshot.py [--run RUN_DIR] [--out runs/report_screenshot.png] [--iterations 6]

Without --run it makes a fresh offline run of the sample task first. Needs Debian's `chromium`
(`apt-get install -y chromium`). Prints one line per section (rendered height, figures inside)
and the timings; exits 1 when a section is missing or empty.

How the check works: the report has no scripts, so a copy gets a small probe script that, once
the page has laid out, writes each section's rendered height and its SVGs' widths into a
`data-probe` attribute; `chromium --dump-dom` returns the DOM with it. The screenshot is then
taken of the real report at the page's full height.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mstar.run.report import SECTIONS  # noqa: E402

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_PROBE = """<script>
window.addEventListener("load", function () {
  var out = {page_height: document.documentElement.scrollHeight, sections: {}};
  %s.forEach(function (id) {
    var el = document.getElementById(id);
    if (!el) { out.sections[id] = null; return; }
    var svgs = Array.prototype.map.call(el.querySelectorAll("svg"), function (s) {
      return Math.round(s.getBoundingClientRect().width); });
    out.sections[id] = {height: Math.round(el.getBoundingClientRect().height), svg_widths: svgs,
                        heading: (el.querySelector("h2") || {}).textContent || ""};
  });
  document.body.setAttribute("data-probe", JSON.stringify(out));
});
</script>"""


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _chromium(binary: str, args: list[str], profile: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    # Flags: headless, no sandbox (we run as root), no GPU, nothing fetched in the background,
    # a throwaway profile.
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--no-first-run", "--hide-scrollbars", f"--user-data-dir={profile}",
           *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def probe_layout(binary: str, html_path: Path, width: int = 1280) -> dict:
    """Each section's rendered height and SVG widths, and the page height, as laid out by Chromium."""
    with tempfile.TemporaryDirectory() as tmp:
        probed = Path(tmp) / "probed.html"
        page = html_path.read_text(encoding="utf-8")
        probed.write_text(page.replace("</body>", _PROBE % json.dumps(list(SECTIONS)) + "</body>", 1),
                          encoding="utf-8")
        proc = _chromium(binary, [f"--window-size={width},1000", "--virtual-time-budget=5000", "--dump-dom",
                                  probed.as_uri()], Path(tmp) / "profile")
    m = re.search(r'data-probe="([^"]*)"', proc.stdout)
    if not m:
        raise RuntimeError(f"chromium returned no probe result (exit {proc.returncode}): {proc.stderr[-800:]}")
    import html as _html
    return json.loads(_html.unescape(m.group(1)))


def screenshot(binary: str, html_path: Path, png: Path, width: int, height: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proc = _chromium(binary, [f"--window-size={width},{height}", f"--screenshot={png}", html_path.as_uri()],
                         Path(tmp) / "profile")
    if not png.is_file():
        raise RuntimeError(f"chromium wrote no screenshot (exit {proc.returncode}): {proc.stderr[-800:]}")


def section_problems(layout: dict) -> list[str]:
    """What is wrong with the rendered page (empty list: every section is there and drawn)."""
    problems = []
    for sid in SECTIONS:
        s = layout["sections"].get(sid)
        if s is None:
            problems.append(f"section {sid!r} is missing")
        elif s["height"] < 40:
            problems.append(f"section {sid!r} rendered only {s['height']} px high")
        elif sid in ("trajectory", "categories", "spend") and not any(w > 200 for w in s["svg_widths"]):
            problems.append(f"section {sid!r} has no figure drawn (svg widths {s['svg_widths']})")
    return problems


def png_colours(png: Path) -> int:
    """Distinct colours in the screenshot (a blank page has one or two)."""
    from PIL import Image
    with Image.open(png) as im:
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
    return len(colours) if colours is not None else 1 << 20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", default=None, help="an existing run folder (default: make a fresh offline run)")
    ap.add_argument("--iterations", type=int, default=6)
    ap.add_argument("--out", default="runs/report_screenshot.png", help="PNG to write (runs/ is git-ignored)")
    ap.add_argument("--width", type=int, default=1280)
    args = ap.parse_args()
    binary = find_chromium()
    if binary is None:
        print("chromium not found: apt-get install -y chromium", file=sys.stderr)
        return 2
    from mstar.cli import main as mstar_main
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(args.run) if args.run else Path(tmp) / "run"
        if not args.run:
            t0 = time.perf_counter()
            rc = mstar_main(["evolve", "--task", "sample", "--iterations", str(args.iterations), "--static-size", "8",
                             "--out", str(run), "--quiet"])
            print(f"run      {run}: {time.perf_counter() - t0:.1f} s (exit {rc})")
        html_path = Path(tmp) / "report.html"
        t0 = time.perf_counter()
        mstar_main(["report", str(run), "--out", str(html_path)])
        t_report = time.perf_counter() - t0
        t0 = time.perf_counter()
        layout = probe_layout(binary, html_path, args.width)
        t_probe = time.perf_counter() - t0
        t0 = time.perf_counter()
        png = Path(args.out).resolve()
        png.parent.mkdir(parents=True, exist_ok=True)
        screenshot(binary, html_path, png, args.width, layout["page_height"])
        t_shot = time.perf_counter() - t0
    print(f"| {'section':<11} | {'height px':>9} | figures (svg width px) | heading")
    for sid in SECTIONS:
        s = layout["sections"].get(sid) or {"height": 0, "svg_widths": [], "heading": "(missing)"}
        print(f"| {sid:<11} | {s['height']:>9} | {str(s['svg_widths']):<22} | {s['heading']}")
    colours = png_colours(png)
    print(f"report {t_report:.2f} s | chromium layout probe {t_probe:.2f} s | screenshot {t_shot:.2f} s | "
          f"page {args.width}x{layout['page_height']} px, {colours} colours -> {png}")
    problems = section_problems(layout) + (["the screenshot is blank"] if colours < 16 else [])
    for p in problems:
        print(f"PROBLEM: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

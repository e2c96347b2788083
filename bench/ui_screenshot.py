#!/usr/bin/env python3
"""The README's picture of `mstar ui`: a fresh offline run, its run page in headless Chromium.

    python bench/ui_screenshot.py [--out docs/ui-run.png] [--iterations 8] [--run RUN_DIR]

Needs Playwright (`pip install -e ".[ui-test]"`) and Debian's chromium. The PNG is reduced to
256 colours (the page is flat colours and text) so it stays small in git; prints its size.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="docs/ui-run.png")
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--run", default=None, help="an existing run folder (default: a fresh offline run)")
    ap.add_argument("--height", type=int, default=1500, help="pixels of the page kept (from the top)")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright
    from PIL import Image

    from mstar.cli import main as mstar_main
    from mstar.ui.server import UIServer

    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        run = runs / "sample-run"
        if args.run:
            shutil.copytree(args.run, run, ignore=shutil.ignore_patterns(".lock"))
        else:
            t0 = time.perf_counter()
            rc = mstar_main(["evolve", "--task", "sample", "--iterations", str(args.iterations), "--static-size", "8",
                             "--out", str(run), "--quiet"])
            print(f"run      {time.perf_counter() - t0:.1f} s (exit {rc})")
        raw = Path(tmp) / "raw.png"
        with UIServer(runs) as srv, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                        args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": args.height})
            page.goto(srv.url + "#/run/sample-run")
            page.wait_for_selector("#trajectory svg .pt")
            page.wait_for_selector("#live.on")
            page.screenshot(path=str(raw))
            browser.close()
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        with Image.open(raw) as im:
            im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)
    print(f"wrote    {out} ({out.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

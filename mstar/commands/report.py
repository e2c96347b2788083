"""`mstar report RUN [--out FILE]`: one self-contained HTML report of a run (mstar/run/report.py)."""
from __future__ import annotations

import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("report", help="write a self-contained HTML report of a run")
    p.add_argument("run", help="run folder, or a run name under --runs-dir")
    p.add_argument("--out", default=None, help="HTML file to write (default: RUN/report.html)")
    p.add_argument("--runs-dir", default="runs", help="folder that holds run folders")
    p.set_defaults(func=cmd_report)


def cmd_report(args) -> int:
    from mstar.run.views import open_run
    from mstar.run.report import build_report
    from mstar.run.store import RunFormatError, atomic_write_text

    try:
        view = open_run(args.run, args.runs_dir)
        page = build_report(view)
    except RunFormatError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else view.root / "report.html"
    atomic_write_text(out, page)
    print(f"wrote   {out} ({len(page) / 1024:.0f} KiB, {view.iterations_done} iterations, status {view.status})")
    return 0

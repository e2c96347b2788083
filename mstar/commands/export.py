"""`mstar export RUN [--program ID] --out FILE`: one program of a run (default: the best) as a
standalone file with a header comment: run, task, scores, lineage, models (mstar/run/export.py)."""
from __future__ import annotations

import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("export", help="write a run's best (or any) program to a file, with a provenance header")
    p.add_argument("run", help="run folder, or a run name under --runs-dir")
    p.add_argument("--program", default=None, help="program id (default: the run's best program)")
    p.add_argument("--out", required=True, help="file to write (e.g. best_memory.py)")
    p.add_argument("--runs-dir", default="runs", help="folder that holds run folders")
    p.add_argument("--force", action="store_true", help="overwrite --out when it exists")
    p.set_defaults(func=cmd_export)


def cmd_export(args) -> int:
    from mstar.run.export import export_program
    from mstar.run.views import open_run
    from mstar.run.store import RunFormatError, atomic_write_text

    out = Path(args.out)
    if out.exists() and not args.force:
        print(f"mstar: {out} exists; pass --force to overwrite it", file=sys.stderr)
        return 2
    try:
        view = open_run(args.run, args.runs_dir)
        pid, text = export_program(view, args.program)
    except RunFormatError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    atomic_write_text(out, text)
    note = "" if view.finished else f" (the run is {view.status}: best so far)"
    print(f"wrote   {out}: {pid} of {view.root.name}{note}")
    print(f"use     from mstar.api import MemoryProgram; MemoryProgram.load({str(out)!r}, llm=...)")
    print(f"serve   mstar serve {out} --store DIR   (a memory kept across restarts, over MCP; the [serve] extra)")
    return 0

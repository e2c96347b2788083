"""`mstar lineage RUN`: the run's tree of programs with score deltas, commit titles and markers
(BEST, REGRESSION, FAILED, DUPLICATE, ERROR)."""
from __future__ import annotations

import sys

from mstar.run.store import dumps


def register(sub) -> None:
    p = sub.add_parser("lineage", help="the tree of programs: scores, deltas, commit titles, markers")
    p.add_argument("run", help="run folder, or a run name under --runs-dir")
    p.add_argument("--runs-dir", default="runs", help="folder that holds run folders")
    p.add_argument("--json", action="store_true", help="the tree as JSON (nested children) for scripts")
    p.set_defaults(func=cmd_lineage)


def cmd_lineage(args) -> int:
    from mstar.run.console import stop_and_resume
    from mstar.run.views import case_errors_text, lineage_tree, open_run, render_tree, with_score_errors
    from mstar.run.store import RunFormatError
    from sandbox.engine.terminal import terminal_safe

    try:
        view = open_run(args.run, args.runs_dir)
    except RunFormatError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    roots = lineage_tree(with_score_errors(view, view.nodes()))
    if args.json:
        print(dumps({"run": str(view.root), "status": view.status, "best_id": view.best_id,
                          "roots": [r.to_dict() for r in roots]}, indent=2))
        return 0
    print(terminal_safe(f"run {view.root}  task {view.config.get('task')}  status {view.status}  "
                        f"iterations {view.iterations_done}/{view.config.get('evolution', {}).get('iterations', '?')}",
                        newlines=False))
    if view.stop is not None:
        reason, command = stop_and_resume(view.stop, view.root)
        print(terminal_safe(f"stopped after iteration {view.stop.iteration} ({view.stop.kind}): {reason}; "
                            f"`{command}` continues it", newlines=False))
    if view.partial_line:
        print(terminal_safe(f"(note: {view.partial_line})", newlines=False))
    for line in render_tree(roots):  # commit titles and errors were written by the reflector and programs
        print(terminal_safe(line, newlines=False))
    summary = view.summary or {}
    if summary.get("test_score") is not None:   # the held-out score, with the cases it could not score
        errors = summary.get("test_case_errors") or 0
        print(terminal_safe(f"test {summary.get('best_id')} {summary['test_score']:.3f} on the held-out set"
                            + (f" {case_errors_text(errors, summary.get('test_score_errors') or 0)}" if errors else ""),
                            newlines=False))
    return 0

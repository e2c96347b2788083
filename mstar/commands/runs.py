"""`mstar runs`: the run folders under --runs-dir with task, progress, best score, spend and status."""
from __future__ import annotations

from mstar.run.store import dumps


def register(sub) -> None:
    p = sub.add_parser("runs", help="list runs: task, iterations done, best score, spend, status")
    p.add_argument("--runs-dir", default="runs", help="folder that holds run folders")
    p.add_argument("--json", action="store_true", help="one JSON list for scripts")
    p.set_defaults(func=cmd_runs)


def cmd_runs(args) -> int:
    from mstar.run.views import list_runs
    from mstar.run.progress import format_count
    from sandbox.engine.terminal import terminal_safe

    rows = list_runs(args.runs_dir)
    if args.json:
        print(dumps([r.to_dict() for r in rows], indent=2))
        return 0
    if not rows:
        print(f"no runs under {args.runs_dir}")
        return 0
    print(f"{'run':<32} {'task':<12} {'status':<10} {'iters':>7} {'best':>6} {'test':>6} "
          f"{'calls':>7} {'tokens':>8} {'cost':>8}  best program")
    for r in rows:
        if r.status == "unreadable":
            print(terminal_safe(f"{r.name:<32} {'?':<12} {r.status:<10}  {r.problem}", newlines=False))
            continue
        iters = f"{r.iterations_done}/{r.iterations_total if r.iterations_total is not None else '?'}"
        best = f"{r.best_static:.3f}" if r.best_static is not None else "-"
        test = f"{r.test_score:.3f}" if r.test_score is not None else "-"
        cost = f"${r.cost_usd:.2f}" if r.cost_usd else "-"  # the offline backend costs nothing
        print(terminal_safe(f"{r.name:<32} {str(r.task):<12} {r.status:<10} {iters:>7} {best:>6} {test:>6} "
                            f"{format_count(r.llm_calls):>7} {format_count(r.tokens):>8} {cost:>8}  {r.best_id or '-'}",
                            newlines=False))
    return 0

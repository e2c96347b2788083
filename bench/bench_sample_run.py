#!/usr/bin/env python3
"""Time an offline evolution run of the bundled sample task and print a table.

    python bench/bench_sample_run.py [--iterations 20] [--seed 0]

Reports seconds per iteration and per evaluation (seed, rotating and child
evaluations) and the share of evaluation time spent in the sandbox (starting
the worker, writes and reads), plus the gates' time per iteration.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mstar.cli import main as mstar_main  # noqa: E402
from mstar.run import events as ev_types  # noqa: E402
from mstar.run.events import read_lineage  # noqa: E402


def _row(name: str, values: list[float]) -> str:
    if not values:
        return f"| {name:<34} | {'-':>6} | {'-':>7} | {'-':>7} | {'-':>7} |"
    return (f"| {name:<34} | {len(values):>6} | {statistics.mean(values):>7.3f} | "
            f"{statistics.median(values):>7.3f} | {max(values):>7.3f} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench-run"
        t0 = time.perf_counter()
        rc = mstar_main(["evolve", "--task", "sample", "--iterations", str(args.iterations),
                         "--seed", str(args.seed), "--out", str(out), "--quiet"])
        wall = time.perf_counter() - t0
        if rc != 0:
            print(f"run failed with exit code {rc}", file=sys.stderr)
            return rc
        events = read_lineage(out / "lineage.jsonl")
        summary = json.loads((out / "summary.json").read_text())
    seeds, iters = ev_types.seeds(events), ev_types.iterations(events)
    seed_eval = [e.timing["eval_s"] for e in seeds]
    seed_sb = [e.timing["sandbox_s"] for e in seeds]
    rot = [e.timing["rotating_eval_s"] for e in iters]
    rot_sb = [e.timing["rotating_sandbox_s"] for e in iters]
    child = [e.timing["child_eval_s"] for e in iters if "child_eval_s" in e.timing]
    child_sb = [e.timing["child_sandbox_s"] for e in iters if "child_sandbox_s" in e.timing]
    gates = [e.timing["gates_s"] for e in iters]
    per_iter = [e.seconds for e in iters]
    all_eval, all_sb = seed_eval + rot + child, seed_sb + rot_sb + child_sb
    print(f"offline sample run: {args.iterations} iterations, seed {args.seed}, wall {wall:.1f} s")
    print(f"best static {summary['best_static']:.3f} (best seed {summary['best_seed_static']:.3f}), "
          f"test {summary['test_score']:.3f}")
    print()
    print(f"| {'what (seconds)':<34} | {'n':>6} | {'mean':>7} | {'median':>7} | {'max':>7} |")
    print(f"|{'-' * 36}|{'-' * 8}|{'-' * 9}|{'-' * 9}|{'-' * 9}|")
    for name, vals in (("iteration (all steps)", per_iter), ("evaluation: seed (static set)", seed_eval),
                       ("evaluation: parent (rotating set)", rot), ("evaluation: child (static set)", child),
                       ("gates per iteration", gates), ("sandbox time per evaluation", all_sb)):
        print(_row(name, vals))
    share = sum(all_sb) / sum(all_eval) if all_eval else 0.0
    print()
    print(f"share of evaluation time spent in the sandbox: {share:.0%}")
    print(f"share of iteration time spent in gates: {sum(gates) / max(sum(per_iter), 1e-9):.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

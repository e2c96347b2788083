#!/usr/bin/env python3
"""The main job, offline: does evolution on the built-in sample task beat the best seed on the
held-out test, and how long does it take?

    python bench/bench_sample_run.py [--seeds 0,1,2,3,4] [--iterations 20] [--size 1.0]

Runs `mstar evolve --task sample` once per seed (default settings otherwise), each as a fresh
process, and prints per seed: the best program, its test score, the best seed's test score on
the same questions, the paired difference with its 95% bootstrap interval, children that scored
their parent's score exactly, and the wall time. Then where the time went in the last run
(seconds per iteration and per kind of evaluation).

Target (issue 19): the interval above zero in at least 4 of 5 seeds, each run <= 90 s on 2 cores.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mstar.run import events as ev_types  # noqa: E402

TARGET_S = 90.0


def run_one(seed: int, iterations: int, size: float, out: Path) -> float:
    cmd = [sys.executable, "evolve.py", "--task", "sample", "--iterations", str(iterations), "--seed", str(seed),
           "--out", str(out), "--quiet"] + (["--size", str(size)] if size != 1.0 else [])
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"seed {seed}: evolve exited with {done.returncode}\n{done.stderr[-2000:]}")
    return time.perf_counter() - t0


def timing_table(events: list) -> list[str]:
    seeds, iters = ev_types.seeds(events), ev_types.iterations(events)
    rows = [("iteration (all steps)", [e.seconds for e in iters]),
            ("evaluation: seed (static set)", [e.timing["eval_s"] for e in seeds]),
            ("evaluation: parent (rotating set)", [e.timing["rotating_eval_s"] for e in iters]),
            ("evaluation: child (static set)", [e.timing["child_eval_s"] for e in iters if "child_eval_s" in e.timing]),
            ("gates per iteration", [e.timing["gates_s"] for e in iters])]
    out = [f"| {'what (seconds)':<34} | {'n':>4} | {'mean':>7} | {'median':>7} | {'max':>7} |",
           f"|{'-' * 36}|{'-' * 6}|{'-' * 9}|{'-' * 9}|{'-' * 9}|"]
    for name, vals in rows:
        if vals:
            out.append(f"| {name:<34} | {len(vals):>4} | {statistics.mean(vals):>7.3f} | "
                       f"{statistics.median(vals):>7.3f} | {max(vals):>7.3f} |")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--size", type=float, default=1.0)
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    print(f"offline sample task (size {args.size}), {args.iterations} iterations, default settings; "
          f"target: interval above zero in >= {len(seeds) - 1} of {len(seeds)}, each run <= {TARGET_S:.0f} s")
    print()
    print(f"| {'seed':>4} | {'best program':<12} | {'test':>6} | {'best seed':<28} | {'its test':>8} | "
          f"{'difference [95% paired]':<26} | {'same score as parent':>20} | {'wall s':>6} |")
    print(f"|{'-' * 6}|{'-' * 14}|{'-' * 8}|{'-' * 30}|{'-' * 10}|{'-' * 28}|{'-' * 22}|{'-' * 8}|")
    wins, slow, events = 0, 0, []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            out = Path(tmp) / f"s{seed}"
            wall = run_one(seed, args.iterations, args.size, out)
            summary = json.loads((out / "summary.json").read_text())
            events = ev_types.read_lineage(out / "lineage.jsonl")
            iters = ev_types.iterations(events)
            same = sum(1 for e in iters if e.added_child and e.delta == 0)
            gain = summary.get("test_gain")
            diff = (f"{gain['mean']:+.3f} [{gain['low']:+.3f}, {gain['high']:+.3f}]" if gain
                    else "best program = best seed")
            wins += bool(gain and gain["low"] > 0)
            slow += wall > TARGET_S
            print(f"| {seed:>4} | {summary['best_id']:<12} | {summary['test_score']:>6.3f} | "
                  f"{summary.get('best_seed_id') or '-':<28} | {summary.get('best_seed_test') or 0:>8.3f} | "
                  f"{diff:<26} | {same:>10} of {len(iters):<7} | {wall:>6.1f} |")
    print()
    print(f"interval above zero in {wins} of {len(seeds)} seeds; runs over {TARGET_S:.0f} s: {slow}")
    print()
    print(f"where the time went (seed {seeds[-1]}):")
    print("\n".join(timing_table(events)))
    return 0 if wins >= len(seeds) - 1 and slow == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

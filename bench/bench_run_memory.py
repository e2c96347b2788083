#!/usr/bin/env python3
"""What a run holds in memory, and whether its second iteration keeps pace (issue 43).

    python bench/bench_run_memory.py [--latency 0.3] [--iterations 5] [--repeats 1] [--embed-model auto]

The 30-session LoCoMo workload of bench_throughput.py (conv-48: 30 sessions as episodes, its 191
questions as validation and test, static 25, rotating 5), every role behind the project's fake
OpenAI server at `--latency`, the response cache on. The run is a process of its own (`evolve.py`,
as a user starts it), so that the tree measured is the engine's and nothing of this script's: the
engine, its fork server, and every worker it forks (the kept knowledge bases, the spares, the
gates', the evaluations'). Its summed PSS is sampled every 0.1 s (bench/process_memory.py); the
table shows the peak, the kinds' shares at that moment and how many processes of each kind were
alive then, beside the figures of b07b9dc (issue 43's "today", measured on this machine with the
same command) and the target, 0.77x of today's total.

The second table: each iteration's seconds, and the second's against the median of the others
(target: within 10%). Iteration 2 is the one whose child evaluation overlapped the best seed's
test, started in the background once the seeds were scored (mstar/final/held_out.py).

With --cold-embeddings each run starts with an empty embedding cache, as a first run on a task does:
with the [embed] extra the split then loads MiniLM (torch).

Each configuration runs once untimed first, so that the server has learnt its replies.
Wall times measured on a shared machine vary with its load; PSS does not much.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_throughput as bt  # noqa: E402  (the workload, the fake server, the config file)
from mstar.run import events as ev_types  # noqa: E402
from process_memory import KINDS, TreeMemory  # noqa: E402

# Peak summed PSS (MB) and process counts at that peak of the code at b07b9dc: this command with its
# defaults, one run, on the [test,embed] install (MiniLM chose the static set from the embedding
# cache the untimed run filled, so no model was loaded). Workers come three processes each (keeper,
# the namespace's init, the worker itself): 33 are 11 workers -- 8 kept knowledge bases, 2 spares
# and the evaluation running then. With the [test] install alone the engine imports scikit-learn for
# the hashing embedder: 466.5 MB then (engine 201.4; TODAY_HASHING, compared with --embed-model hashing).
TODAY = {"total": 427.5, "engine": 138.1, "forkserver": 18.5, "worker": 270.9, "other": 0.0}
TODAY_COUNT = {"engine": 1, "forkserver": 1, "worker": 33, "other": 0}
# The same with --cold-embeddings (the split loads MiniLM: torch in the engine), one run.
TODAY_COLD = {"total": 903.5, "engine": 620.9, "forkserver": 17.9, "worker": 264.7, "other": 0.0}
TODAY_COLD_COUNT = {"engine": 1, "forkserver": 1, "worker": 33, "other": 0}
# With --embed-model hashing (the embeddings of a [test] install), one run.
TODAY_HASHING = {"total": 466.5, "engine": 201.4, "forkserver": 19.0, "worker": 246.2, "other": 0.0}
TODAY_HASHING_COUNT = {"engine": 1, "forkserver": 1, "worker": 33, "other": 0}
TARGET = 0.77


def run_engine(out: Path, task: Path, cfg: Path, iterations: int, extra: list[str],
               memory: bool) -> tuple[float, TreeMemory | None]:
    argv = [sys.executable, str(ROOT / "evolve.py"), "--task", str(task), "--iterations", str(iterations),
            "--seed", "0", "--static-size", "25", "--out", str(out), "--config", str(cfg), "--quiet", *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    mem = TreeMemory(proc.pid) if memory else None
    if mem is not None:
        mem.__enter__()
    try:
        said, _ = proc.communicate()
    finally:
        if mem is not None:
            mem.__exit__(None, None, None)
    if proc.returncode != 0:
        raise SystemExit(f"{out.name}: evolve exited with {proc.returncode}\n{said[-1500:]}")
    return time.perf_counter() - t0, mem


def iteration_seconds(run: Path) -> list[float]:
    return [e.seconds for e in ev_types.iterations(ev_types.read_lineage(run / "lineage.jsonl"))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.3)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=1, help="timed runs; the tables show medians")
    ap.add_argument("--embed-model", default=None, help="passed to evolve (default: the run's own default)")
    ap.add_argument("--cold-embeddings", action="store_true",
                    help="each run with an embedding cache of its own, empty: a first run on a task, whose split "
                         "loads the model (with the [embed] extra)")
    args = ap.parse_args()
    if not bt.LOCOMO.exists():
        print(f"needs LoCoMo at {bt.LOCOMO} (../shared/data beside the clone)", file=sys.stderr)
        return 2
    extra = ["--embed-model", args.embed_model] if args.embed_model else []
    peaks, its, walls = [], [], []
    with tempfile.TemporaryDirectory() as tmp, bt.fake_server(args.latency) as url:
        tmp = Path(tmp)
        task = bt.build_task(tmp)
        run_engine(tmp / "warm", task, bt.config_file(tmp, url, "cache-warm"), args.iterations, extra, memory=False)
        for rep in range(args.repeats):
            run = tmp / f"run-{rep}"
            cold = ["--embed-cache", str(tmp / f"embeddings-{rep}")] if args.cold_embeddings else []
            wall, mem = run_engine(run, task, bt.config_file(tmp, url, f"cache-{rep}"), args.iterations,
                                   extra + cold, memory=True)
            peaks.append(mem)
            walls.append(wall)
            its.append(iteration_seconds(run))
    med = lambda xs: statistics.median(xs)  # noqa: E731
    total = med([m.peak_total for m in peaks])
    today, today_count = (TODAY_COLD, TODAY_COLD_COUNT) if args.cold_embeddings else \
        (TODAY_HASHING, TODAY_HASHING_COUNT) if args.embed_model == "hashing" else (TODAY, TODAY_COUNT)
    print(f"LoCoMo conv-48, 30 sessions, static 25, rotating 5, {args.iterations} iterations, fake server at "
          f"{args.latency * 1000:.0f} ms, response cache on, embeddings: {args.embed_model or 'the default'}"
          f"{', embedding cache empty at the start' if args.cold_embeddings else ''}; "
          f"median of {args.repeats} run(s), {med([m.samples for m in peaks]):.0f} samples each; "
          f"whole run {med(walls):.1f} s (wall: under this machine's load)")
    print()
    print(f"| {'summed PSS at the peak (MB)':<30} | {'now':>8} | {'procs':>5} | {'b07b9dc':>8} | {'procs':>5} | "
          f"{'ratio':>6} | {'target':<10} |")
    print(f"|{'-' * 32}|{'-' * 10}|{'-' * 7}|{'-' * 10}|{'-' * 7}|{'-' * 8}|{'-' * 12}|")
    for kind in KINDS:
        now = med([m.at_peak[kind] for m in peaks])
        n = med([m.count_at_peak[kind] for m in peaks])
        then, n_then = today.get(kind), today_count.get(kind)
        print(f"| {kind:<30} | {now:>8.1f} | {n:>5.0f} | {_f(then, 8, 1)} | {_f(n_then, 5, 0)} | "
              f"{_ratio(now, then)} | {'':<10} |")
    then = today["total"]
    print(f"| {'total':<30} | {total:>8.1f} | {'':>5} | {_f(then, 8, 1)} | {'':>5} | {_ratio(total, then)} | "
          f"{f'<= {TARGET:.2f}x':<10} |")
    most = med([sum(m.peak_count.values()) for m in peaks])
    print(f"(most processes alive at once: {most:.0f}; workers: {med([m.peak_count['worker'] for m in peaks]):.0f})")
    print()
    rows = [med([r[i] for r in its]) for i in range(min(len(r) for r in its))]
    print(f"| {'iteration':<10} | {'s':>7} |")
    print(f"|{'-' * 12}|{'-' * 9}|")
    for i, s in enumerate(rows, 1):
        print(f"| {i:<10} | {s:>7.2f} |")
    if len(rows) >= 3:
        others = statistics.median(rows[:1] + rows[2:])
        print(f"iteration 2: {rows[1]:.2f} s against the others' median {others:.2f} s: {rows[1] / others:.2f}x "
              "(target <= 1.10x)")
    return 0


def _f(value, width: int, digits: int) -> str:
    return f"{value:>{width}.{digits}f}" if value is not None else f"{'-':>{width}}"


def _ratio(now: float, then: float | None) -> str:
    return f"{now / then:>5.2f}x" if then else f"{'-':>6}"


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Subset selection at scale: facility location (training episodes) and k-means (static set).

    python bench/bench_select.py            # all cases (about 1-3 minutes on 2 cores)
    python bench/bench_select.py --quick    # smaller sizes, for a smoke run

Cases (issue 6 targets), each in its own process so its peak memory is its own:
  fl-naive   N=10,000 episodes, V=1,000 validation items, M=100: mstar's facility location vs a
             plain (non-lazy) greedy on the dense similarity matrix; objectives must agree within 0.1 %.
  fl-large   N=100,000, V=10,000, M=1,000 (384-d): under 30 s and 1.5 GB peak; its objective is
             shown beside that of a random subset and of all N episodes (the upper bound).
  kmeans     100,000 items (384-d) into 25 clusters (the static set): under 5 s.

Embeddings are synthetic but shaped like real ones: unit vectors around 500 topic centres with
noise, plus 2 % exact duplicates (duplicates are where some libraries' greedy goes wrong).
Peak memory is the process's maximum resident set (ru_maxrss), including the embeddings.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mstar.split.facility import facility_location  # noqa: E402
from mstar.split.kmeans import kmeans_static_set  # noqa: E402

DIM = 384


def embeddings(n: int, seed: int, centres: int = 500, noise: float = 0.08, dup: float = 0.02) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = np.random.default_rng(12345).standard_normal((centres, DIM)).astype(np.float32)
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    x = np.empty((n, DIM), dtype=np.float32)
    for s in range(0, n, 8192):   # in chunks, so making the inputs does not set the memory peak
        rows = c[rng.integers(centres, size=min(8192, n - s))]
        rows += noise * rng.standard_normal(rows.shape, dtype=np.float32)
        x[s:s + len(rows)] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    k = int(dup * n)
    if k:
        x[rng.choice(n, k, replace=False)] = x[rng.choice(n, k, replace=False)]
    return x


def objective(v: np.ndarray, e: np.ndarray, chosen, block: int = 2048) -> float:
    """Σ_v max_{e∈S} v·e, computed in blocks."""
    s = e[np.asarray(chosen)]
    return float(sum((v[i:i + block] @ s.T).max(axis=1).sum(dtype=np.float64) for i in range(0, len(v), block)))


def naive_greedy(v: np.ndarray, e: np.ndarray, m: int) -> list[int]:
    """Textbook greedy: every step evaluates every candidate's gain on the dense V×N matrix."""
    sims = v @ e.T
    cover = np.full(len(v), sims.min(), dtype=np.float32)
    chosen: list[int] = []
    for _ in range(m):
        gains = np.maximum(sims - cover[:, None], 0).sum(axis=0, dtype=np.float64)
        gains[chosen] = -1.0
        best = int(gains.argmax())
        chosen.append(best)
        np.maximum(cover, sims[:, best], out=cover)
    return chosen


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def case_fl_naive(n: int, v_n: int, m: int) -> dict:
    e, v = embeddings(n, 1), embeddings(v_n, 2)
    t, c = time.perf_counter(), time.process_time()
    ours = facility_location(v, e, m)
    t_ours, c_ours = time.perf_counter() - t, time.process_time() - c
    t = time.perf_counter()
    naive = naive_greedy(v, e, m)
    t_naive = time.perf_counter() - t
    f_ours, f_naive = objective(v, e, ours), objective(v, e, naive)
    return {"case": f"fl-naive N={n} V={v_n} M={m}", "seconds": t_ours, "cpu": c_ours, "naive_seconds": t_naive,
            "objective": f_ours, "naive_objective": f_naive, "rel_diff": abs(f_ours - f_naive) / abs(f_naive),
            "same_picks": sorted(ours) == sorted(naive), "peak_mb": peak_mb()}


def case_fl_large(n: int, v_n: int, m: int) -> dict:
    e, v = embeddings(n, 3), embeddings(v_n, 4)
    base = peak_mb()      # the process with its inputs, before the call
    t, c = time.perf_counter(), time.process_time()
    ours = facility_location(v, e, m)
    seconds, cpu = time.perf_counter() - t, time.process_time() - c
    peak = peak_mb()
    rng = np.random.default_rng(0)
    f = objective(v, e, ours)
    f_random = objective(v, e, rng.choice(n, m, replace=False))
    f_all = float(sum((v[i:i + 512] @ e.T).max(axis=1).sum(dtype=np.float64) for i in range(0, v_n, 512)))
    return {"case": f"fl-large N={n} V={v_n} M={m}", "seconds": seconds, "cpu": cpu, "objective": f, "random_objective": f_random,
            "all_objective": f_all, "peak_mb": peak, "inputs_mb": base}


def case_kmeans(n: int, k: int) -> dict:
    x = embeddings(n, 5)
    t, c = time.perf_counter(), time.process_time()
    picks = kmeans_static_set(x, k, np.random.default_rng(0))
    return {"case": f"kmeans n={n} k={k}", "seconds": time.perf_counter() - t, "cpu": time.process_time() - c,
            "picks": len(picks), "peak_mb": peak_mb()}


CASES = {"fl-naive": case_fl_naive, "fl-large": case_fl_large, "kmeans": case_kmeans}


def run_child(name: str, args: list[int]) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", name, *map(str, args)],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"case {name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a tenth of the sizes")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        name, *sizes = args.child
        print(json.dumps(CASES[name](*map(int, sizes))))
        return 0
    q = 10 if args.quick else 1
    results = [run_child("fl-naive", [10_000 // q, 1_000 // q, 100 // q]),
               run_child("fl-large", [100_000 // q, 10_000 // q, 1_000 // q]),
               run_child("kmeans", [100_000 // q, 25])]
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"subset selection, {DIM}-d synthetic embeddings, load average {load} on {_cpus()} cores")
    print("(wall seconds depend on what else runs; CPU seconds are summed over threads, so on an idle\n"
          " machine wall ~ CPU / cores for the matmul-bound fl-large case)")
    print(f"| {'case':<34} | {'wall s':>7} | {'CPU s':>7} | {'peak MB':>8} | result")
    print(f"|{'-' * 36}|{'-' * 9}|{'-' * 9}|{'-' * 10}|{'-' * 60}")
    a, b, c = results
    print(f"| {a['case']:<34} | {a['seconds']:>7.2f} | {a['cpu']:>7.2f} | {a['peak_mb']:>8.0f} | objective {a['objective']:.2f} vs naive "
          f"{a['naive_objective']:.2f} (diff {100 * a['rel_diff']:.4f} %, same picks: {a['same_picks']}; "
          f"naive greedy {a['naive_seconds']:.1f} s)")
    print(f"| {b['case']:<34} | {b['seconds']:>7.2f} | {b['cpu']:>7.2f} | {b['peak_mb']:>8.0f} | objective {b['objective']:.1f} = "
          f"{100 * b['objective'] / b['all_objective']:.2f} % of all-episodes bound (random subset "
          f"{100 * b['random_objective'] / b['all_objective']:.2f} %); {b['inputs_mb']:.0f} MB before the call")
    print(f"| {c['case']:<34} | {c['seconds']:>7.2f} | {c['cpu']:>7.2f} | {c['peak_mb']:>8.0f} | {c['picks']} static items")
    ok = (a["rel_diff"] <= 1e-3 and (args.quick or (b["seconds"] < 30 and b["peak_mb"] < 1536 and c["seconds"] < 5)))
    print("targets met" if ok else "TARGETS MISSED (fl-naive diff <= 0.1 %; fl-large < 30 s and < 1.5 GB; kmeans < 5 s)")
    return 0 if ok else 1


def _cpus() -> int:
    import os
    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    sys.exit(main())

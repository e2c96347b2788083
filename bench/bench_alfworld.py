#!/usr/bin/env python3
"""Benchmark: interactive games, each in its own process -- seconds per game, games per minute.

    python bench/bench_alfworld.py [--games 32] [--concurrency 1 4 16] [--split seen] [--slots N]

Plays the synthetic ALFWorld games (mstar.tasks.alfworld, generated and cached on first use)
with the offline task agent and no memory, through mstar.interactive.play_case, at each
concurrency (threads driving one game process each). A second workload, the fake corridor game
(mstar.testing.fake_games, 50 steps, no engine), separates the process/pipe overhead from the
engine's own cost. Needs the [alfworld] extra for the first workload.

"concurrent" is the number of games open at once (one process each); at most `--slots` of them
compute at the same time (mstar.interactive.game_process.ENGINE_SLOTS, default the cores), as in
an evaluation. s/game is a game's wall time from start to end, waits for a slot included.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mstar.interactive import play_case  # noqa: E402
from mstar.interactive.game_process import ENGINE_SLOTS  # noqa: E402
from mstar.offline.task_model import OfflineTaskModel  # noqa: E402
from mstar.tasks.model import QueryItem  # noqa: E402
from mstar.testing.fake_games import FACTORY as CORRIDOR  # noqa: E402

CONSTS = {"INSTRUCTION_RESPONSE": "Reply with one admissible command.", "ALWAYS_ON_KNOWLEDGE": ""}


def agent(messages):
    return OfflineTaskModel().complete(messages)


def run(items, concurrency: int, choose) -> dict:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        cases = list(pool.map(lambda q: play_case(q, "", CONSTS, choose, timeout_s=600), items))
    wall = time.perf_counter() - t0
    per_game = [c.seconds for c in cases]
    return {"games": len(cases), "wall_s": wall, "s_per_game": statistics.mean(per_game),
            "p90_s": sorted(per_game)[int(0.9 * (len(per_game) - 1))], "games_per_min": 60 * len(cases) / wall,
            "steps": statistics.mean(c.steps for c in cases), "won": sum(c.score for c in cases),
            "errors": sum(1 for c in cases if c.error and not c.corrupt)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--games", type=int, default=32)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--split", default="seen")
    ap.add_argument("--slots", type=int, default=None, help="engines computing at once (default: the cores)")
    args = ap.parse_args()
    if args.slots:
        ENGINE_SLOTS.resize(args.slots)
    workloads = []
    corridor = [QueryItem(f"c{i}", "reach the end", "", "corridor",
                          {"interactive": True, "env": {"factory": CORRIDOR, "kwargs": {"length": 10**6}}})
                for i in range(args.games)]
    workloads.append(("corridor, 50 steps, no engine", corridor, lambda m: "step forward"))
    try:
        from mstar.tasks.alfworld.task import load_alfworld_synth
        task = load_alfworld_synth(split=args.split)
        games = [q for q in task.validation + task.test][: args.games]
        workloads.append((f"alfworld-synth {args.split}, offline agent, no memory", games, agent))
    except Exception as exc:  # the extra is missing: say so, still measure the overhead
        print(f"(alfworld workload skipped: {exc})")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start; each game in its "
          f"own forkserver child process; {ENGINE_SLOTS.limit} engine slots\n")
    print("| workload | concurrent | games | wall s | s/game | p90 s/game | games/min | mean steps | won | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, items, choose in workloads:
        for c in args.concurrency:
            r = run(items, c, choose)
            print(f"| {name} | {c} | {r['games']} | {r['wall_s']:.1f} | {r['s_per_game']:.2f} | {r['p90_s']:.2f} | "
                  f"{r['games_per_min']:.1f} | {r['steps']:.1f} | {r['won']:.0f} | {r['errors']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

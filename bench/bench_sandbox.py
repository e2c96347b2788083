"""Sandbox worker costs per launcher: time to a ready worker and one write/read round trip.

    /work/venv/bin/python bench/bench_sandbox.py [--starts 10] [--ops 200]

For each launcher (fork server, fresh interpreter):
  cold    the first start with a new launcher (for the fork server: includes starting the server)
  warm    median and 90th percentile over --starts further starts
  ready   spawn -> the worker's "ready" frame (LoadInfo.ready_s)
  start   ProgramSession.start() as a whole: ready + gates, exec and KnowledgeBase(toolkit)
  write / read   median engine-side round trip of an op on a program that does nothing, i.e.
          the sandbox's own cost per call (framing, pipes, instance building, checks)
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox.forkserver import ForkServerLauncher  # noqa: E402
from sandbox.host import ProgramSession, SandboxLimits  # noqa: E402
from sandbox.launch import SubprocessLauncher  # noqa: E402

TRIVIAL = '''
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Extract."
INSTRUCTION_QUERY = "Query."
INSTRUCTION_RESPONSE = "Answer."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str = field(default="", metadata={"description": "text"})


@dataclass
class Query:
    text: str = field(default="", metadata={"description": "text"})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.n = 0

    def write(self, item, raw_text):
        self.n = self.n + 1

    def read(self, query):
        return "ok"
'''
LIMITS = SandboxLimits(call_timeout_s=30.0)


def start_once(launcher) -> tuple[float, float]:
    t0 = time.perf_counter()
    with ProgramSession(TRIVIAL, limits=LIMITS, launcher=launcher) as session:
        info = session.start()
        total = time.perf_counter() - t0
    return info.ready_s, total


def round_trips(launcher, ops: int) -> tuple[float, float]:
    with ProgramSession(TRIVIAL, limits=LIMITS, launcher=launcher) as session:
        session.start()
        writes, reads = [], []
        for i in range(ops):
            t0 = time.perf_counter()
            session.write({"text": f"item {i}"}, f"episode {i}")
            writes.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            assert session.read({"text": "q"}).output == "ok"
            reads.append(time.perf_counter() - t0)
    return statistics.median(writes), statistics.median(reads)


def p90(values: list[float]) -> float:
    return sorted(values)[max(0, int(round(0.9 * len(values))) - 1)]


def bench(name: str, launcher, starts: int, ops: int) -> dict[str, str]:
    cold_ready, cold_total = start_once(launcher)
    warm = [start_once(launcher) for _ in range(starts)]
    ready = [r for r, _ in warm]
    total = [t for _, t in warm]
    write, read = round_trips(launcher, ops)
    ms = lambda s: f"{s * 1000:.0f} ms"  # noqa: E731
    us = lambda s: f"{s * 1e6:.0f} µs"  # noqa: E731
    return {"launcher": name, "cold ready": ms(cold_ready), "cold start": ms(cold_total),
            "warm ready (med/p90)": f"{ms(statistics.median(ready))} / {ms(p90(ready))}",
            "warm start (med/p90)": f"{ms(statistics.median(total))} / {ms(p90(total))}",
            "write rtt": us(write), "read rtt": us(read)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=10, help="warm starts per launcher")
    parser.add_argument("--ops", type=int, default=200, help="write+read round trips per launcher")
    args = parser.parse_args()
    fork = ForkServerLauncher()  # no fallback: measure the fork server or fail
    rows = [bench("fork server", fork, args.starts, args.ops),
            bench("subprocess", SubprocessLauncher(), args.starts, args.ops)]
    fork.shutdown()
    columns = list(rows[0])
    widths = [max(len(c), *(len(r[c]) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(row[c].ljust(w) for c, w in zip(columns, widths)))
    print(f"\n{args.starts} warm starts, {args.ops} write+read round trips per launcher; trivial program.")


if __name__ == "__main__":
    main()

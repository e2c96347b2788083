"""Sandbox worker costs per launcher: time to a ready worker and one write/read round trip.

    /work/venv/bin/python bench/bench_sandbox.py [--starts 10] [--ops 200]

For each launcher (fork server, fresh interpreter), with the OS jail on and off -- each worker in
a cgroup, a pid namespace (with its keeper and init processes) and a network namespace of its
own: sandbox.engine.launch.CGROUP, PID_NAMESPACE and NET_NAMESPACE. The seccomp filter is on in both:
  cold    the first start with a new launcher (for the fork server: includes starting the server)
  warm    median and 90th percentile over --starts further starts
  ready   spawn -> the worker's "ready" frame (LoadInfo.ready_s)
  start   ProgramSession.start() as a whole: ready + gates, exec and KnowledgeBase(toolkit)
  write / read   median engine-side round trip of an op on a program that does nothing, i.e.
          the sandbox's own cost per call (framing, pipes, instance building, checks)
"""
from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sandbox.engine.forkserver import ForkServerLauncher  # noqa: E402
from sandbox.engine.session import ProgramSession, SandboxLimits  # noqa: E402
import sandbox.engine.launch as launch  # noqa: E402
from sandbox.engine.launch import SubprocessLauncher  # noqa: E402

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


def bench(name: str, launcher, starts: int, ops: int) -> list[dict[str, str]]:
    """Two rows, jail on and off. Warm starts alternate on/off so that load drifting on a busy
    machine hits both alike; the cold start (default: jail on) is in the first row only."""
    set_jail(True)
    cold_ready, cold_total = start_once(launcher)
    warm: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for _ in range(starts):
        for jail in (True, False):
            set_jail(jail)
            warm[jail].append(start_once(launcher))
    rows = []
    ms = lambda s: f"{s * 1000:.0f} ms"  # noqa: E731
    us = lambda s: f"{s * 1e6:.0f} µs"  # noqa: E731
    for jail in (True, False):
        set_jail(jail)
        write, read = round_trips(launcher, ops)
        ready = [r for r, _ in warm[jail]]
        total = [t for _, t in warm[jail]]
        rows.append({"launcher": name, "jail": "cgroup+pid+net" if jail else "off",
                     "cold ready": ms(cold_ready) if jail else "-", "cold start": ms(cold_total) if jail else "-",
                     "warm ready (med/p90)": f"{ms(statistics.median(ready))} / {ms(p90(ready))}",
                     "warm start (med/p90)": f"{ms(statistics.median(total))} / {ms(p90(total))}",
                     "write rtt": us(write), "read rtt": us(read)})
    set_jail(True)
    return rows


def set_jail(on: bool) -> None:
    launch.NET_NAMESPACE = launch.PID_NAMESPACE = launch.CGROUP = on


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=10, help="warm starts per launcher")
    parser.add_argument("--ops", type=int, default=200, help="write+read round trips per launcher")
    args = parser.parse_args()
    logging.getLogger("sandbox").setLevel(logging.ERROR)  # "jail switched off" warnings, by design here
    fork = ForkServerLauncher()  # no fallback: measure the fork server or fail
    rows = bench("fork server", fork, args.starts, args.ops) + bench("subprocess", SubprocessLauncher(), args.starts, args.ops)
    fork.shutdown()
    columns = list(rows[0])
    widths = [max(len(c), *(len(r[c]) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(row[c].ljust(w) for c, w in zip(columns, widths)))
    print(f"\n{args.starts} warm starts and {args.ops} write+read round trips per launcher and jail setting "
          "(warm starts alternate on/off); trivial program.")


if __name__ == "__main__":
    main()

"""Sandbox worker costs per launcher: time to a ready worker and one write/read round trip; and
the engine's memory through the hostile corpus.

    /work/venv/bin/python bench/bench_sandbox.py [--starts 10] [--ops 200] [--corpus-passes 2]

For each launcher (fork server, fresh interpreter), with the OS jail on and off -- each worker in
a cgroup, a pid namespace (with its init; and a keeper for a fresh interpreter) and a network namespace of its
own: sandbox.engine.launch.CGROUP, PID_NAMESPACE and NET_NAMESPACE. The seccomp filter is on in both:
  cold    the first start with a new launcher (for the fork server: includes starting the server)
  warm    median and 90th percentile over --starts further starts
  ready   spawn -> the worker's "ready" frame (LoadInfo.ready_s)
  start   ProgramSession.start() as a whole: ready + gates, exec and KnowledgeBase(toolkit)
  write / read   median engine-side round trip of an op on a program that does nothing, i.e.
          the sandbox's own cost per call (framing, pipes, instance building, checks)

The second table runs every program of tests/hostile (load, two writes, two reads, four at a
time, as tests/test_hostile.py drives them) --corpus-passes times through the fork server, with
engine-served embeddings (mstar's ProgramEmbeddings over a stand-in model: what is measured is
what the engine keeps, not a model), and gives this engine process's resident memory after each
pass and its peak. Target: under 300 MB (issue 30: a program could take an engine to 1.7 GB
through the embedding memo, to 1 GB through 135,000-message prompts).
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
from sandbox.engine.session import SandboxError  # noqa: E402

HOSTILE = Path(__file__).resolve().parent.parent / "tests" / "hostile"
CORPUS_LIMITS = SandboxLimits(call_timeout_s=2.5, memory_mb=768, cpu_s=60, max_log_chars=8000)  # tests/test_hostile.py
RSS_TARGET_MB = 300

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


def status_mb(field: str) -> float:
    """This process's VmRSS (now) or VmHWM (its peak), in MB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith(field))


def rss_mb() -> float:
    return status_mb("VmRSS")


def run_one(path: Path, launcher, embed) -> str:
    """Load, two writes, two reads; the outcome (ok or the failing rule). The toolkit LLM keeps the
    prompts it served for the program's life, as `python -m sandbox` keeps them for its report."""
    def values(schema):
        return {s["name"]: {"int": 1, "float": 0.5, "bool": False, "list[str]": ["x"]}.get(s.get("type"), "x")
                for s in schema}
    served: list = []   # the prompts, kept while the program runs, as the checker's report keeps them

    def llm(messages):
        served.append(messages)
        return "reply"
    try:
        with ProgramSession(path.read_text(), limits=CORPUS_LIMITS, launcher=launcher, llm=llm,
                            embed=embed.session()) as session:
            info = session.start()
            for _ in range(2):
                session.write(values(info.knowledge_item_schema), "raw text")
            for _ in range(2):
                session.read(values(info.query_schema))
        return "ok"
    except SandboxError as exc:
        return exc.verdict.rule


def corpus_memory(passes: int) -> list[dict[str, str]]:
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    from mstar.split.served import ProgramEmbeddings

    class StandIn:   # a model's vectors without a model's time
        name = "stand-in"

        def embed(self, texts):
            return np.full((len(texts), 384), 384 ** -0.5, dtype=np.float32)

    embed = ProgramEmbeddings(StandIn(), "stand-in")
    programs = sorted(HOSTILE.glob("h*.py"))
    launcher = ForkServerLauncher()
    rows, start = [], rss_mb()
    for n in range(1, passes + 1):
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=4) as pool:
            outcomes = list(pool.map(lambda p: run_one(p, launcher, embed), programs))
        peak = status_mb("VmHWM")
        rows.append({"pass": str(n), "programs": str(len(programs)), "ran harmlessly": str(outcomes.count("ok")),
                     "seconds": f"{time.perf_counter() - t0:.0f}", "engine RSS before": f"{start:.0f} MB",
                     "engine RSS after": f"{rss_mb():.0f} MB", "engine peak RSS": f"{peak:.0f} MB",
                     f"memo after (entries)": str(len(embed.memo)),
                     f"under {RSS_TARGET_MB} MB": "yes" if peak < RSS_TARGET_MB else "NO"})
    launcher.shutdown()
    return rows


def print_table(rows: list[dict[str, str]]) -> None:
    columns = list(rows[0])
    widths = [max(len(c), *(len(r[c]) for r in rows)) for c in columns]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(row[c].ljust(w) for c, w in zip(columns, widths)))


def set_jail(on: bool) -> None:
    launch.NET_NAMESPACE = launch.PID_NAMESPACE = launch.CGROUP = on


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=10, help="warm starts per launcher")
    parser.add_argument("--ops", type=int, default=200, help="write+read round trips per launcher")
    parser.add_argument("--corpus-passes", type=int, default=2, help="passes through tests/hostile (0: skip)")
    args = parser.parse_args()
    logging.getLogger("sandbox").setLevel(logging.ERROR)  # "jail switched off" warnings, by design here
    if args.corpus_passes > 0:   # first, while this process holds nothing else
        print_table(corpus_memory(args.corpus_passes))
        print(f"\nthe hostile corpus {args.corpus_passes} time(s), four programs at a time, engine-served "
              f"embeddings; the engine's memory should stay under {RSS_TARGET_MB} MB.\n")
    if args.starts <= 0 and args.ops <= 0:
        return
    fork = ForkServerLauncher()  # no fallback: measure the fork server or fail
    rows = bench("fork server", fork, args.starts, args.ops) + bench("subprocess", SubprocessLauncher(), args.starts, args.ops)
    fork.shutdown()
    print_table(rows)
    print(f"\n{args.starts} warm starts and {args.ops} write+read round trips per launcher and jail setting "
          "(warm starts alternate on/off); trivial program.")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What a served memory costs (issue 29): latency, reopen, memory, throughput -- one table.

    python bench/bench_memory.py [--program vector_search] [--ops 200] [--writes 1000]
                                 [--namespaces 8] [--clients 8] [--seconds 10] [--migration]

Offline backend for every role (no network, no key), the sample task's 50 sessions as the texts
(cycled, each with a unique first line), the vector-search seed by default: every remember is a
task-LLM extraction, a write() into chroma in the sandbox worker and an fsync'd log line.

  remember / recall   p50 and p95 of --ops calls, one after another: through a real `mstar serve
                      --transport http` with the MCP SDK's own client (what an agent pays), and
                      through the Python API in this process (MemoryService: no protocol, no HTTP)
  reopen              opening a namespace of --writes logged writes: a fresh worker and the
                      replay of every write (toolkit replies from the log), per 1,000 writes; and
                      the same for the LLM-summarizer seed, whose write() only appends its text,
                      to tell the store's own cost from the program's
  memory              per open namespace (its worker's process group, each holding the sample's
                      50 sessions): PSS (shared pages split between the workers forked from one
                      server) and RSS, over --namespaces namespaces open at once
  requests/s          --clients MCP clients at once for --seconds against one server: each on a
                      namespace of its own, half remembers and half recalls; and all of them
                      recalling from one shared namespace (reads run concurrently, as in an
                      evaluation, and take turns on the worker's CPU)
  migration           (--migration) a vector-search store of the 50 sessions migrated to an evolved
                      program (the winner of a short offline `mstar evolve --task sample`), against
                      a fresh ingest with that program: mean token F1 on the 357 test questions
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from mstar.memory.service import MemoryService  # noqa: E402
from mstar.tasks import load_task  # noqa: E402

TASK = load_task("sample")


def text(i: int, tag: str = "") -> str:
    return f"[note {tag}{i}]\n" + TASK.episodes[i % len(TASK.episodes)].text


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def ms(values: list[float]) -> str:
    return f"p50 {pct(values, 0.5) * 1000:7.1f} ms   p95 {pct(values, 0.95) * 1000:7.1f} ms"


def group_memory(pgid: int) -> tuple[int, int]:
    """(PSS, RSS) in KiB summed over the processes of one worker: its process group (with a keeper,
    where a fresh worker split itself) and its pid namespace (its init, which a fork server starts
    outside that group)."""
    own_ns = os.readlink("/proc/self/ns/pid")
    try:
        worker_ns = os.readlink(f"/proc/{pgid}/ns/pid")
    except OSError:
        worker_ns = own_ns
    pss = rss = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            same_ns = worker_ns != own_ns and os.readlink(f"/proc/{entry}/ns/pid") == worker_ns
            if int(stat.rsplit(")", 1)[-1].split()[2]) != pgid and not same_ns:
                continue
            for line in Path(f"/proc/{entry}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return pss, rss


def api_latency(program: str, ops: int, folder: Path) -> tuple[list[float], list[float]]:
    with MemoryService(folder / "api", program) as service:
        service.remember(text(0, "warm"))
        writes, reads = [], []
        for i in range(ops):
            t0 = time.perf_counter()
            service.remember(text(i))
            writes.append(time.perf_counter() - t0)
        for q in (TASK.test * 3)[:ops]:
            t0 = time.perf_counter()
            service.recall(q.question, answer=True)
            reads.append(time.perf_counter() - t0)
    return writes, reads


async def mcp_latency(url: str, ops: int) -> tuple[list[float], list[float]]:
    from mcp_helpers import http_session, recall, remember
    writes, reads = [], []
    async with http_session(url) as session:
        await remember(session, text(0, "warm"), "latency")
        for i in range(ops):
            t0 = time.perf_counter()
            await remember(session, text(i), "latency")
            writes.append(time.perf_counter() - t0)
        for q in (TASK.test * 3)[:ops]:
            t0 = time.perf_counter()
            await recall(session, q.question, "latency", answer=True)
            reads.append(time.perf_counter() - t0)
    return writes, reads


async def throughput(url: str, clients: int, seconds: float, shared: bool) -> tuple[float, int]:
    from mcp_helpers import http_session, recall, remember
    done = [0]
    errors = [0]

    async def client(c: int) -> None:
        ns = "shared" if shared else f"user{c}"
        async with http_session(url) as session:
            await remember(session, text(c, f"c{c}-warm"), ns)   # opened before the clock starts
            await ready.wait()
            i = 0
            while time.perf_counter() < end[0]:
                try:
                    if shared or i % 2:
                        await recall(session, TASK.test[(c * 31 + i) % len(TASK.test)].question, ns, answer=True)
                    else:
                        await remember(session, text(i, f"c{c}-"), ns)
                    done[0] += 1
                except AssertionError:
                    errors[0] += 1
                i += 1

    ready = asyncio.Event()
    end = [0.0]

    async def clock() -> None:
        await asyncio.sleep(1.0)           # every client connected and its namespace open
        end[0] = time.perf_counter() + seconds
        ready.set()

    t0 = [0.0]
    tasks = [asyncio.create_task(client(c)) for c in range(clients)]
    await clock()
    t0[0] = time.perf_counter()
    await asyncio.gather(*tasks)
    return done[0] / (time.perf_counter() - t0[0]), errors[0]


def reopen(program: str, writes: int, folder: Path) -> tuple[float, float]:
    folder.mkdir(parents=True, exist_ok=True)
    store = folder / "reopen"
    with MemoryService(store, program) as service:
        t0 = time.perf_counter()
        for i in range(writes):
            service.remember(text(i))
        ingest = time.perf_counter() - t0
    with MemoryService(store, None, max_open=1) as service:
        t0 = time.perf_counter()
        service.recall("warm-up?")      # opens the namespace: fresh worker + replay
        opened = time.perf_counter() - t0
    return opened, ingest


def memory_per_namespace(program: str, namespaces: int, folder: Path) -> tuple[float, float]:
    with MemoryService(folder / "memory", program, max_open=namespaces) as service:
        for n in range(namespaces):
            for i in range(len(TASK.episodes)):
                service.remember(text(i), f"ns{n}")
        sizes = [group_memory(ns.memory._session.group_pid) for ns in service.pool.open_namespaces()]
    return statistics.mean(p for p, _ in sizes) / 1024, statistics.mean(r for _, r in sizes) / 1024


def migration(folder: Path) -> tuple[float, float, float]:
    from mstar.cli import main
    from mstar.memory.migrate import migrate

    run = folder / "run"
    with contextlib.redirect_stdout(io.StringIO()):
        main(["evolve", "--task", "sample", "--iterations", "4", "--static-size", "8", "--seed", "0", "--out",
              str(run), "--quiet"])
    best = run / "best_program.py"

    def score(service) -> float:
        return statistics.mean(TASK.metric(service.recall(q.question, answer=True).answer, q) for q in TASK.test)

    with MemoryService(folder / "vs", "vector_search") as old:
        for ep in TASK.episodes:
            old.remember(ep.text)
        old_score = score(old)
    migrate(folder / "vs", best, folder / "migrated")
    with MemoryService(folder / "migrated", None) as new:
        migrated = score(new)
    with MemoryService(folder / "fresh", best) as fresh:
        for ep in TASK.episodes:
            fresh.remember(ep.text)
        fresh_score = score(fresh)
    return old_score, migrated, fresh_score


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--program", default="vector_search")
    ap.add_argument("--ops", type=int, default=200)
    ap.add_argument("--writes", type=int, default=1000)
    ap.add_argument("--namespaces", type=int, default=8)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--migration", action="store_true", help="also the migration row (runs a short evolution)")
    args = ap.parse_args()
    try:
        from mcp_helpers import HttpServer
    except ImportError:
        print("bench_memory needs the [serve] extra: pip install -e '.[serve]'", file=sys.stderr)
        return 2
    rows: list[tuple[str, str, str]] = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        folder = Path(tmp)
        writes, reads = api_latency(args.program, args.ops, folder)
        rows += [("remember, Python API", ms(writes), f"{args.ops} calls, one namespace"),
                 ("recall + answer, Python API", ms(reads), f"{args.ops} calls")]
        with HttpServer(args.program, folder / "served", "--max-open", str(max(args.clients, 8))) as server:
            writes, reads = asyncio.run(mcp_latency(server.url, args.ops))
            rows += [("remember, MCP over HTTP", ms(writes), "one client, SDK ClientSession"),
                     ("recall + answer, MCP over HTTP", ms(reads), "one client")]
            rate, errors = asyncio.run(throughput(server.url, args.clients, args.seconds, shared=False))
            rows.append((f"requests/s, {args.clients} clients", f"{rate:7.1f}/s",
                         f"a namespace each, remember/recall 50/50, {args.seconds:g} s, {errors} errors"))
            rate, errors = asyncio.run(throughput(server.url, args.clients, args.seconds, shared=True))
            rows.append((f"requests/s, {args.clients} clients", f"{rate:7.1f}/s",
                         f"one shared namespace, recall + answer only, {errors} errors"))
        opened, ingest = reopen(args.program, args.writes, folder)
        rows.append(("reopen per 1,000 writes", f"{opened * 1000 / args.writes:7.2f} s",
                     f"{args.writes} writes replayed in {opened:.2f} s (written in {ingest:.1f} s)"))
        opened, ingest = reopen("llm_summarizer", args.writes, folder / "plain")
        rows.append(("  the store's own part", f"{opened * 1000 / args.writes:7.2f} s",
                     "the same with llm_summarizer, whose write() only appends the text: the rest is "
                     "the program's own write() (chroma adds)"))
        pss, rss = memory_per_namespace(args.program, args.namespaces, folder)
        rows.append(("memory per open namespace", f"PSS {pss:5.1f} MiB", f"RSS {rss:.1f} MiB; {args.namespaces} open, "
                                                                          "50 sessions each"))
        if args.migration:
            old, migrated, fresh = migration(folder)
            rows.append(("migration, mean F1 (357 q)", f"{migrated:.4f}",
                         f"fresh ingest {fresh:.4f} (diff {migrated - fresh:+.4f}); vector search before {old:.4f}"))
    # The figures are wall-clock times on a machine that may be shared: its load says how much.
    print(f"bench_memory: program {args.program}, offline backend, {os.cpu_count()} cores, load average "
          f"{load_before:.1f} at the start and {os.getloadavg()[0]:.1f} at the end")
    width = max(len(r[0]) for r in rows)
    print(f"{'what':<{width}}  {'figure':<34}  note")
    for what, figure, note in rows:
        print(f"{what:<{width}}  {figure:<34}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

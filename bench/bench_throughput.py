#!/usr/bin/env python3
"""How long a run waits, against the waiting it cannot avoid (issue 12).

    python bench/bench_throughput.py [--latency 0.3] [--iterations 5] [--repeats 3] [--no-ray]

The project's fake OpenAI server (offline models behind it, every request answered after
`--latency` seconds) serves every role; mstar talks to it with the real `openai` client and its
default response cache (empty at the start of each timed run): a child whose extraction
prompts equal its parent's gets those replies from the cache, as it would against a real
endpoint. The task: the first 30 sessions of LoCoMo (the
loader's order: conv-48) with the questions whose evidence lies in them -- 191 validation
questions (static 25, rotating 5) and, for the final evaluation, the same 191 (build_task).

Each figure is printed beside its critical-path bound: the requests that had to happen one
after another (recorded by the evaluator per evaluation, `chain_calls` -- a call the cache
answered costs no wait and is not counted -- plus the reflector's requests of the iteration)
times the latency, or -- when it is larger -- the calls of all roles divided by the run's calls
in flight (64, one cap over every role) times the latency. Sandbox and gate time count as zero
in the bound, so wall / bound >= 1 always. The `writes` column is the program work the bound
leaves out where it is largest: the seconds the slowest program's worker spent on its writes, one
after another (for the iteration rows, the child's, on average) -- e.g. the vector-search seed
indexing ~230 chunks in chromadb, one record per add (~2.3 ms each in its worker). Batched adds
would be ~4x faster, but chromadb then builds a different index from run to run: queries changed
between runs, and with duplicate records even an exhaustive search did (measured), so the
lineage would not replay (sandbox/worker/toolkit_chroma.py). That seed's write() never reads its
item, so those writes run while its extractions are still out (mstar/evaluation/item_use.py); a
program whose writes need the items writes after them, its `writes` on top of its chain.
The `reads` column is the other half of that work: the CPU the reads spent in the worker, summed
(for the iteration rows the child's, on average; else the largest of the programs'). Reads
overlap their LLM waits but not one another's Python: they take turns on the worker's CPU
(sandbox/worker/baton.py) and come back one by one, so an evolved read that scores paragraphs
(~3 ms each under the sandbox's guards) adds ~80 ms to an evaluation of 25 reads.

Rows: seconds per iteration at K=1 (--rotating reuse and fresh), the seed evaluation (3 seeds
at once), the final evaluation (the best program and the best seed on 191 questions; the
confirmation before it -- mstar's own step, the official engine has none -- is timed apart and
left out of the iteration phase), children
per hour at K=4 vs K=1, and the same run on a local Ray of 2 workers (overhead per evaluation;
lineage shape, spend counted once). The table's rows are medians of `--repeats` timed runs, with
their min-max beside them. Each configuration runs once untimed first, so that the
server has learnt its replies and spends no CPU of its own in the timed run. A core-speed line
(one fixed Python loop, before and after) tells how fast the machine was meanwhile: on a shared
2-core machine that loop has taken 1.85x longer at the start of one run than at its end.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mstar.cli import main as mstar_main  # noqa: E402
from mstar.config import ROLES  # noqa: E402
from mstar.run import events as ev_types  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_llm  # noqa: E402  (its fake_server: one way to start the server for every bench)

LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
IN_FLIGHT = 64


def build_task(folder: Path) -> Path:
    """Issue 28's workload: the conversation that comes first after random.Random(42).shuffle of
    locomo10.json (conv-48; the LoCoMo loader's order), all its 30 sessions as episodes, its 191
    questions of categories 1-4 whose evidence sessions are present as validation, and the same
    191 as test, as the official engine does by default (test ids carry "/final" so that the two
    splits' case records stay apart; the prompts, hence the cache, are the same)."""
    from mstar.tasks import load_task

    full = load_task("locomo", str(LOCOMO))
    first = full.episodes[0].meta["sample_id"]
    episodes = [e for e in full.episodes if e.meta["sample_id"] == first]
    kept = {e.id for e in episodes}
    covered = lambda q: bool(q.meta.get("evidence_sessions")) and set(q.meta["evidence_sessions"]) <= kept  # noqa: E731
    questions = [q for q in list(full.validation) + list(full.test) if covered(q)]
    as_dict = lambda q, tag="": {"id": q.id + tag, "question": q.question, "answer": q.answer,  # noqa: E731
                                 "category": q.category}
    data = {"name": "locomo30", "metric": "token_f1", "episodes": [{"id": e.id, "text": e.text} for e in episodes],
            "validation": [as_dict(q) for q in questions], "test": [as_dict(q, "/final") for q in questions]}
    path = folder / "locomo30.json"
    path.write_text(json.dumps(data))
    return path


def fake_server(latency: float):
    """The fake server in its own process, replies memoised (bench_llm.py starts it)."""
    return bench_llm.fake_server(latency, memo=True)


def config_file(folder: Path, url: str, cache: str, in_flight: int = IN_FLIGHT) -> Path:
    lines = ["[llm]", f'cache_dir = "{folder / cache}"', "[llm.defaults]", 'backend = "openai"', f'base_url = "{url}"',
             f"concurrency = {in_flight}", "timeout_s = 600"]
    for role in ROLES:
        lines += [f"[llm.{role}]", f'model = "offline-{role}"', f'[llm.prices."offline-{role}"]', "input = 0", "output = 0"]
    path = folder / f"fake-{cache}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def core_speed() -> float:
    """Milliseconds one core takes for a fixed pure-Python loop (best of three). Printed before
    and after the runs: on a shared machine the same code measures differently from hour to hour,
    and this says how fast the machine was while these figures were taken."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        sum(range(20_000_000))
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def cpu_busy() -> float:
    """Core-seconds this machine has been busy (every process: engine, workers, fake server)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


class PhaseWatch:
    """Samples the machine's busy CPU while a run writes its lineage, so that the iteration
    phase (from the last seed event to the last iteration event) gets its CPU: with 2 cores
    a child's CPU, not its waiting, caps how many children K=4 can finish in an hour."""

    def __init__(self, lineage: Path, seeds: int, iterations: int) -> None:
        self.lineage, self.seeds, self.iterations = lineage, seeds, iterations
        self.marks: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "PhaseWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                evs = ev_types.read_lineage(self.lineage)
            except Exception:  # noqa: BLE001 -- not there yet, or a line half written: next sample
                continue
            if "start" not in self.marks and len(ev_types.seeds(evs)) >= self.seeds:
                self.marks["start"] = cpu_busy()
            if "end" not in self.marks and len(ev_types.iterations(evs)) >= self.iterations:
                self.marks["end"] = cpu_busy()

    def core_seconds(self) -> float | None:
        return self.marks["end"] - self.marks["start"] if {"start", "end"} <= set(self.marks) else None


def evolve(out: Path, task: Path, cfg: Path, iterations: int, *extra: str) -> float:
    argv = ["evolve", "--task", str(task), "--iterations", str(iterations), "--seed", "0", "--static-size", "25",
            "--out", str(out), "--config", str(cfg), "--quiet", *extra]
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as said, contextlib.redirect_stderr(io.StringIO()):
        rc = mstar_main(argv)
    if rc != 0:
        raise SystemExit(f"{out.name}: evolve exited with {rc}\n{said.getvalue()[-1500:]}")
    return time.perf_counter() - t0


def usage_by_scope(run: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for line in (run / "llm_usage.jsonl").read_text().splitlines():
        rec = json.loads(line)
        out.setdefault(rec.get("scope") or "", []).append(rec)
    return out


def throughput_calls(records: list[dict]) -> float:
    """The requests of every role (retries and 429s included, cache hits not) over the run's one
    cap on calls in flight (--max-in-flight, 64, over all roles together since issue 28), in
    units of one latency."""
    n = sum(1 + r.get("retries", 0) + r.get("rate_limited", 0) for r in records if not r.get("cache_hit"))
    return math.ceil(n / IN_FLIGHT)


def measure(run: Path, wall: float, latency: float) -> dict:
    evs = ev_types.read_lineage(run / "lineage.jsonl")
    scopes = usage_by_scope(run)
    seeds, its = ev_types.seeds(evs), ev_types.iterations(evs)
    test = next(e for e in evs if isinstance(e, ev_types.TestEvent))
    seed_bound = max(max(e.timing["chain_calls"] for e in seeds),
                     throughput_calls([r for e in seeds for r in scopes.get(e.program_id, [])]))
    it_rows = []
    for e in its:
        recs = scopes.get(f"iter_{e.iteration:03d}", [])
        reflector = sum(1 + r.get("retries", 0) for r in recs if r["role"] == "reflector" and not r.get("cache_hit"))
        chain = e.timing.get("rotating_chain_calls", 0) + reflector + e.timing.get("child_chain_calls", 0)
        it_rows.append((e.seconds, max(chain, throughput_calls(recs)) * latency))
    test_bound = max(test.timing["chain_calls"], throughput_calls(scopes.get("test", [])))
    conf = next((e for e in evs if isinstance(e, ev_types.ConfirmationEvent)), None)
    conf_wall = conf.timing.get("seconds", 0.0) if conf else 0.0
    conf_bound = max(conf.timing.get("chain_calls", 0), throughput_calls(scopes.get("confirm", []))) if conf else 0
    seed_wall = max(e.seconds for e in seeds)
    return {"iter": statistics.mean(s for s, _ in it_rows), "iter_bound": statistics.mean(b for _, b in it_rows),
            "iter_writes": statistics.mean(e.timing.get("child_write_s", 0.0) for e in its),
            "seed": seed_wall, "seed_bound": seed_bound * latency,
            "seed_writes": max(e.timing.get("write_s", 0.0) for e in seeds),
            "test_writes": test.timing.get("write_s", 0.0),
            "iter_reads": statistics.mean(e.timing.get("child_read_cpu_s", 0.0) for e in its),
            "seed_reads": max(e.timing.get("read_cpu_s", 0.0) for e in seeds),
            "test_reads": test.timing.get("read_cpu_s", 0.0),
            "test": test.timing["seconds"], "test_bound": test_bound * latency, "test_n": len(json.loads(
                (run / "cases" / f"{test.program_id}.test.json").read_text())["cases"]),
            "confirm": conf_wall, "confirm_bound": conf_bound * latency,
            "confirm_n": conf.items if conf else 0,
            "children": sum(e.added_child for e in its),
            "iter_phase": wall - seed_wall - conf_wall - test.timing["seconds"],
            "events": [(type(e).__name__, getattr(e, "iteration", 0)) for e in evs],
            "child_eval": statistics.mean(e.timing["child_eval_s"] for e in its if "child_eval_s" in e.timing),
            "calls": sum(len(v) for v in scopes.values()), "ledger": json.loads((run / "summary.json").read_text())
            ["llm"]["total"]["calls"]}


# The figures of the table's rows: with --repeats, each is the median of the timed runs.
_ROW_FIGURES = ("iter", "iter_bound", "iter_writes", "iter_reads", "seed", "seed_bound", "seed_writes", "seed_reads",
                "test", "test_bound", "test_writes", "test_reads", "confirm", "confirm_bound")


def median_of(timed: list[dict]) -> dict:
    """The first run's record with each row figure replaced by its median over the runs, and
    the spread (min, max) of each kept beside it: one run of the same code on the same quiet
    machine has measured the seed row at 1.63 s and at 2.12 s."""
    out = dict(timed[0])
    for key in _ROW_FIGURES:
        values = [m[key] for m in timed]
        out[key] = statistics.median(values)
        out[key + "_spread"] = (min(values), max(values))
    out["runs"] = len(timed)
    return out


def row(name: str, m: dict, key: str, target: str) -> str:
    wall, bound, lo_hi = m[key], m[key + "_bound"], m.get(key + "_spread")
    work = [m.get(key + "_writes"), m.get(key + "_reads")]
    shown = " | ".join(f"{w:>8.2f}" if w is not None else f"{'':>8}" for w in work)
    spread = f"{lo_hi[0]:.2f}-{lo_hi[1]:.2f}" if lo_hi and m.get("runs", 1) > 1 else ""
    return (f"| {name:<44} | {wall:>8.2f} | {spread:>11} | {bound:>8.2f} | "
            f"{wall / bound if bound else float('inf'):>7.2f} | {shown} | {target:<12} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.3)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray row")
    # Children per hour is a steady-state figure: with few iterations the ramp-up and the last,
    # half-full wave of K=4 weigh as much as the steady part (10 iterations = 2.5 waves).
    ap.add_argument("--k-iterations", type=int, default=24, help="iterations of the K=1 / K=4 runs")
    ap.add_argument("--repeats", type=int, default=3,
                    help="timed runs of the reuse and fresh configurations; the table shows medians")
    args = ap.parse_args()
    if not LOCOMO.exists():
        print(f"needs LoCoMo at {LOCOMO} (../shared/data beside the clone)", file=sys.stderr)
        return 2
    L, n = args.latency, args.iterations
    speed_before = core_speed()
    with tempfile.TemporaryDirectory() as tmp, fake_server(L) as url:
        tmp = Path(tmp)
        task = build_task(tmp)
        runs = {"reuse": ["--rotating", "reuse"], "fresh": ["--rotating", "fresh"],
                "k4": ["--rotating", "fresh", "--parallel", "4"], "k1": ["--rotating", "fresh"]}
        results = {}
        for name, extra in runs.items():
            its = n if name in ("reuse", "fresh") else args.k_iterations
            # Untimed first: the server learns its replies. The timed run starts with an empty cache.
            evolve(tmp / f"warm-{name}", task, config_file(tmp, url, f"cache-warm-{name}"), its, *extra)
            timed = []
            for rep in range(args.repeats if name in ("reuse", "fresh") else 1):
                run = tmp / f"{name}-{rep}"
                with PhaseWatch(run / "lineage.jsonl", seeds=3, iterations=its) as watch:
                    wall = evolve(run, task, config_file(tmp, url, f"cache-{name}-{rep}"), its, *extra)
                timed.append({**measure(run, wall, L), "iter_cpu": watch.core_seconds()})
            results[name] = median_of(timed)
        ray_result = None
        if not args.no_ray:
            try:
                import ray
                ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
                evolve(tmp / "warm-ray", task, config_file(tmp, url, "cache-warm-ray"), n, "--rotating", "reuse",
                       "--executor", "ray")
                wall = evolve(tmp / "ray", task, config_file(tmp, url, "cache-ray"), n, "--rotating", "reuse",
                              "--executor", "ray")
                ray_result = measure(tmp / "ray", wall, L)
                ray.shutdown()
            except ImportError:
                print("(Ray row skipped: pip install -e '.[ray]')")
    r, f = results["reuse"], results["fresh"]
    print(f"fake server at {L * 1000:.0f} ms per call, {IN_FLIGHT} calls in flight over all roles, response cache on; "
          f"LoCoMo, 30 sessions, static 25, rotating 5, {n} iterations; each row: the median of "
          f"{args.repeats} timed run(s) (the fresh row of --rotating fresh, the others of --rotating reuse)")
    print(f"core speed (a fixed Python loop, lower is faster): {speed_before:.0f} ms before the runs, "
          f"{core_speed():.0f} ms after")
    print()
    print(f"| {'figure (seconds)':<44} | {'wall':>8} | {'min-max':>11} | {'bound':>8} | {'ratio':>7} | "
          f"{'writes':>8} | {'reads':>8} | {'target':<12} |")
    print(f"|{'-' * 46}|{'-' * 10}|{'-' * 13}|{'-' * 10}|{'-' * 9}|{'-' * 10}|{'-' * 10}|{'-' * 14}|")
    print(row("per iteration, K=1, --rotating reuse", r, "iter", "<= 1.3 s"))
    print(row("per iteration, K=1, --rotating fresh", f, "iter", "<= 2.0 s"))
    print(row("seed evaluation, 3 seeds at once", r, "seed", "<= 4 s"))
    print(row(f"final evaluation, {r['test_n']} questions (+ best seed)", r, "test", "<= 4 s"))
    print(row(f"confirmation, top 3 on {r['confirm_n']} more items", r, "confirm", "(mstar only)"))
    k1, k4 = results["k1"], results["k4"]
    per_hour = lambda m: 3600 * m["children"] / m["iter_phase"]  # noqa: E731
    print()
    print(f"children per hour, {args.k_iterations} iterations: K=1 {per_hour(k1):.0f}, K=4 {per_hour(k4):.0f} -- "
          f"{per_hour(k4) / per_hour(k1):.2f}x (target >= 3x)")
    # The two ceilings of K=4: waiting alone (4 iterations, each at K=1's critical-path bound)
    # and this machine's cores (the CPU one child cost in the K=4 run's iteration phase).
    cores = os.cpu_count() or 1
    waiting = 4 * 3600 / k1["iter_bound"] if k1["iter_bound"] else float("inf")
    line = f"  K=4 bounds: waiting {waiting:.0f} children/hour (4 x 3600 / {k1['iter_bound']:.2f} s)"
    if k4.get("iter_cpu") and k4["children"]:
        per_child = k4["iter_cpu"] / k4["children"]
        line += (f"; CPU {cores * 3600 / per_child:.0f} ({cores} cores / {per_child:.2f} core-s per child, every "
                 f"process of the machine, fake server included; K=1: "
                 f"{(k1['iter_cpu'] or 0) / max(k1['children'], 1):.2f} core-s per child)")
    print(line)
    if ray_result is not None:
        same = [k for k, _ in ray_result["events"]] == [k for k, _ in r["events"]]
        print(f"Ray, 2 workers, same run as the first row: lineage of the same shape: {same}; "
              f"calls in llm_usage.jsonl {ray_result['calls']} = ledger {ray_result['ledger']}; "
              f"child evaluation {ray_result['child_eval']:.2f} s vs local {r['child_eval']:.2f} s "
              f"(overhead {ray_result['child_eval'] - r['child_eval']:+.2f} s per evaluation); "
              f"per iteration {ray_result['iter']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

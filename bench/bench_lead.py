#!/usr/bin/env python3
"""Issue 43's matrix: what a run sends and how long it takes, each beside its bound, in the
workload where the best seed wins and in one where a child wins.

    python bench/bench_lead.py [--latency 0.3,2.0] [--iterations 3,5] [--rotating fresh,reuse]
                               [--workloads seed,child] [--in-flight 64] [--base /tmp/base8aa] [--out DIR]

The workload is bench_confirm.py's (bench_throughput.build_task: LoCoMo conv-48, its 30 sessions as
episodes, 191 questions as validation and as test; static 25, rotating 5, --seed 0), every role
behind a fake OpenAI server at `--latency` with the response cache on (empty at the start of each
run). "seed": the offline models everywhere -- the champion is the best seed, as in every measured
run before this bench. "child": bench/child_wins.py's reflector, whose children of iterations 2
and 4 beat the best seed, so that the test started early for the best seed is not the champion's,
the race has a child to confirm and the final phase tests a program nobody started early.

Each cell is one run of `mstar evolve` in a process of its own (the engine's Python: this checkout
by default; `--base DIR` adds, for the default cells, the same run of another checkout with its own
venv at DIR/.venv -- e.g. the code of 8aa27d6, the token baseline of issue 43). Per cell:

  requests / prompt tokens   sent to the server over the whole run (cache hits are not requests);
                             in brackets the race's (the confirmation's) prompt tokens
  guesses                    used / sent, -declined (not sent: not worth it), and the prompt tokens
                             the sent ones cost (summary.json; "-": an engine that does not count them)
  iteration s                iteration 2 and the median of the others, each beside its bound
  final s                    confirmation (the race) + the test, beside its bound
  run s                      the run (summary.json seconds), beside its bound
  process s                  the whole `mstar evolve` process: the run, and before it the start-up,
                             the preflight and the split, which the run's clock does not count

A bound is the replies that had to come one after another, times the latency (a call that waited
for an identical request already in flight counts: it waited a reply; a stored reply does not): an iteration's
rotating chain + its reflector requests + its child's chain (the lineage's chain_calls per stage);
the final phase's race chain, plus the champion's test chain when its test was not started before
the race (the best seed's starts after the seeds; the race's starting leader's starts with it);
the run's: the slowest seed's chain + the iterations' + the final phase's. Sandbox and CPU time
count zero, so wall / bound >= 1.

The floor at the cap is what no schedule of the run's requests can beat while at most 64
(`--in-flight`) replies are awaited at once: the slowest seed's chain, then every request that
needs the seeds scored first (the iterations', the tests', the race's; the prefetch's guesses
left out) in ceil(requests / 64) latencies -- or the bound, when that is longer. A run whose
floor is over 1.15x its bound cannot meet issue 43's 2,000 ms target with these requests at
this cap, however its work is placed: only fewer requests or more calls in flight can.

The last column is a diagnostic, not that bound: the run beside the same bound with the cap
on calls in flight counted too, for the work as this run placed it. A phase takes at least
ceil(requests / 64) latencies however short its chain, since no more than 64 replies are awaited
at once (bench_throughput.py's bounds count the cap so since issue 12). Counted: every seed's
requests in the seeds' phase; each iteration's own in it; in the final phase the race's and the
tests' sent after the race began (the champion's and the best seed's, both reported; the race's
alone when a test the run did not need -- a race leader that neither won nor was the best seed --
was running then). The tests' requests could have gone earlier in another schedule, so this says
how much of a run's distance from the bound is the cap over work placed late, and how much is
waiting on anything else. Requests and tokens are exact on any machine; wall times depend
on the machine's load (the core-speed line says how fast it was).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_throughput as bt  # noqa: E402  (the workload and the config file)
from mstar.run import events as ev_types  # noqa: E402

WINS = "2,4"   # the iterations whose child beats the best seed in the "child" workload


@contextmanager
def server(latency: float, workload: str):
    """bench/child_wins.py in its own process: no winning child for "seed", WINS for "child"."""
    wins = WINS if workload == "child" else ""
    proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "child_wins.py"), "--latency", str(latency),
                             "--wins", wins], stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        if not url.startswith("http"):
            raise SystemExit(f"the fake server did not start (said {url!r})")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def evolve(python: str, out: Path, task: Path, cfg: Path, iterations: int, *extra: str) -> float:
    """One run in its own process; the seconds it took, start-up included."""
    argv = [python, "-c", "import sys; from mstar.cli import main; sys.exit(main(sys.argv[1:]))", "evolve",
            "--task", str(task), "--iterations", str(iterations), "--seed", "0", "--static-size", "25",
            "--out", str(out), "--config", str(cfg), "--quiet", *extra]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    t0 = time.perf_counter()
    # Not run from a checkout: `python -c` puts the working folder first on sys.path.
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=out.parent)
    if done.returncode != 0:
        raise SystemExit(f"{out.name}: evolve exited with {done.returncode}\n{(done.stdout + done.stderr)[-2000:]}")
    return time.perf_counter() - t0


def waves(records: list[dict], cap: int = bt.IN_FLIGHT) -> int:
    """Latencies `records` (the requests a phase sent) take at least under the cap on calls in flight."""
    return -(-sum(1 + r.get("retries", 0) for r in records if not r.get("cache_hit")) // cap)


# The scopes whose calls cannot go before every seed is scored: an iteration needs its parent chosen
# over the seeds' scores, a test the best seed (or a later leader), the race its candidates. The
# prefetch's guesses and the preflight are left out, so the floor holds whatever they do.
_AFTER_SEEDS = ("iter_", "test", "confirm")


def figures(run: Path, latency: float, cap: int = bt.IN_FLIGHT) -> dict:
    """What one cell prints (see the module docstring)."""
    usage = [json.loads(line) for line in (run / "llm_usage.jsonl").read_text().splitlines() if line.strip()]
    sent = [r for r in usage if not r.get("cache_hit")]
    scopes: dict[str, list[dict]] = {}
    for r in usage:
        scopes.setdefault(r.get("scope") or "", []).append(r)
    evs = ev_types.read_lineage(run / "lineage.jsonl")
    seeds, its = ev_types.seeds(evs), ev_types.iterations(evs)
    conf = next((e for e in evs if isinstance(e, ev_types.ConfirmationEvent)), None)
    test = next(e for e in evs if isinstance(e, ev_types.TestEvent))
    summary = json.loads((run / "summary.json").read_text())
    it_walls, it_bounds = [], []
    for e in its:
        reflector = sum(1 + r.get("retries", 0) for r in scopes.get(f"iter_{e.iteration:03d}", [])
                        if r["role"] == "reflector" and not r.get("cache_hit"))
        it_walls.append(e.seconds)
        it_bounds.append((e.timing.get("rotating_chain_calls", 0) + reflector + e.timing.get("child_chain_calls", 0))
                         * latency)
    race_chain = conf.timing.get("chain_calls", 0) if conf else 0
    best_seed = max(seeds, key=lambda e: e.static_score)
    leader = (conf.rounds[0].get("leader") if conf and conf.rounds else None)
    champion = test.program_id
    # The champion's test waits only for the race when it was started before it (see above).
    test_after = champion not in (best_seed.program_id, leader)
    final_bound = (race_chain + test.timing.get("chain_calls", 0)) * latency if test_after else \
        max(race_chain, 0 if champion == best_seed.program_id else test.timing.get("chain_calls", 0)) * latency
    final = (conf.timing.get("seconds", 0.0) if conf else 0.0) + test.timing.get("seconds", 0.0)
    seed_bound = max(e.timing.get("chain_calls", 0) for e in seeds) * latency
    # The diagnostic: the same bounds with the cap counted, for the work as placed (module docstring).
    race = scopes.get("confirm", [])
    begun = min((r["at"] - r.get("latency_s", 0.0) for r in race if not r.get("cache_hit")), default=float("inf"))
    needed = race + ([r for r in scopes.get("test", []) if r["at"] - r.get("latency_s", 0.0) >= begun]
                     if leader in (None, champion, best_seed.program_id) else [])
    capped = (max(max(e.timing.get("chain_calls", 0) for e in seeds),
                  waves([r for e in seeds for r in scopes.get(e.program_id, [])], cap)) * latency
              + sum(max(b, waves(scopes.get(f"iter_{e.iteration:03d}", []), cap) * latency) for e, b in zip(its, it_bounds))
              + max(final_bound, waves(needed, cap) * latency))
    run_bound = seed_bound + sum(it_bounds) + final_bound
    # The floor at the cap (module docstring): no schedule of these requests ends sooner.
    after_seeds = [r for r in sent if (r.get("scope") or "").startswith(_AFTER_SEEDS)]
    floor = max(run_bound, seed_bound + waves(after_seeds, cap) * latency)
    others = [w for e, w in zip(its, it_walls) if e.iteration != 2]
    others_b = [b for e, b in zip(its, it_bounds) if e.iteration != 2]
    second = next(((w, b) for e, w, b in zip(its, it_walls, it_bounds) if e.iteration == 2), (None, None))
    guesses = summary.get("guesses")
    return {"requests": sum(1 + r.get("retries", 0) for r in sent),
            "tokens": sum(int(r.get("prompt_tokens") or 0) for r in sent),
            "race_tokens": sum(int(r.get("prompt_tokens") or 0) for r in sent if r.get("scope") == "confirm"),
            "guesses": guesses,
            "it2": second[0], "it2_bound": second[1],
            "it_others": statistics.median(others) if others else None,
            "it_others_bound": statistics.median(others_b) if others_b else None,
            "final": final, "final_bound": final_bound,
            "run": float(summary["seconds"]), "run_bound": run_bound,
            "run_capped": capped, "run_floor": floor,
            "champion": champion, "child_won": champion.startswith("iter_"), "race": race_chain,
            "race_stop": conf.stop if conf else "-"}


def pair(wall, bound) -> str:
    if wall is None:
        return "-"
    return f"{wall:.2f} / {bound:.2f}" + (f" ({wall / bound:.2f}x)" if bound else "")


def tokens(f: dict) -> str:
    return f"{f['tokens']:,} ({f['race_tokens'] / 1000:.0f}k)"


def guess_text(g: dict | None) -> str:
    if not g:
        return "-"
    return f"{g['used']}/{g['sent']} -{g.get('declined', 0)}, {g['prompt_tokens'] / 1000:.1f}k"


def row(cell: tuple, f: dict) -> str:
    workload, lat, n, rot, name = cell
    return (f"| {workload:<8} | {lat * 1000:>5.0f} | {n:>2} | {rot:<8} | {name:<6} | {f['requests']:>8} | "
            f"{tokens(f):>18} | {guess_text(f['guesses']):<20} | {pair(f['it2'], f['it2_bound']):<22} | "
            f"{pair(f['it_others'], f['it_others_bound']):<22} | {pair(f['final'], f['final_bound']):<22} | "
            f"{pair(f['run'], f['run_bound']):<22} | {pair(f['run'], f['run_floor']):<22} | "
            f"{pair(f['run'], f['run_capped']):<22} | "
            f"{'-' if f.get('process') is None else format(f['process'], '.2f'):>9} | {f['champion']} (race {f['race']} replies, {f['race_stop']}) |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", default="0.3,2.0", help="comma-separated fake server seconds per reply")
    ap.add_argument("--iterations", default="3,5", help="comma-separated iteration counts")
    ap.add_argument("--rotating", default="fresh,reuse", help="comma-separated: fresh (default), reuse")
    ap.add_argument("--workloads", default="seed,child", help="comma-separated: seed, child")
    ap.add_argument("--base", default=None, help="another checkout with its own venv (DIR/.venv): its default "
                                                  "cells run too, for the token baseline")
    ap.add_argument("--extra", default="", help="more flags for every run of this checkout (space-separated)")
    ap.add_argument("--in-flight", type=int, default=bt.IN_FLIGHT,
                    help="calls in flight the runs may hold (--max-in-flight and every role's concurrency); "
                         f"default {bt.IN_FLIGHT}, the engine's default")
    ap.add_argument("--out", default=None, help="keep the run folders here (default: temporary)")
    ap.add_argument("--keep", action="store_true", help="with --out: a cell whose run folder has its summary.json "
                                                         "is read again, not run again (re-print a table)")
    args = ap.parse_args()
    if not bt.LOCOMO.exists():
        print(f"(skipped: needs LoCoMo at {bt.LOCOMO})")
        return 0
    lats = [float(x) for x in args.latency.split(",") if x]
    engines = [("this", sys.executable)]
    if args.base:
        engines.append(("base", str(Path(args.base) / ".venv" / "bin" / "python")))
    print(f"core speed {bt.core_speed():.0f} ms at the start (a fixed loop; larger = a busier machine); "
          f"load average {os.getloadavg()[0]:.1f}; {args.in_flight} calls in flight", flush=True)
    header = (f"| {'workload':<8} | {'ms':>5} | {'it':>2} | {'rotating':<8} | {'engine':<6} | {'requests':>8} | "
              f"{'prompt tok (race)':>18} | {'guesses used/sent -no':<20} | {'iteration 2 s / bound':<22} | "
              f"{'others median / bound':<22} | {'final s / bound':<22} | {'run s / bound':<22} | {'run s / floor at cap':<22} | "
              f"{'run s / as placed, cap':<22} | {'process s':>9} | champion |")
    print(header)
    print("|" + "|".join("-" * (len(c) + 0) for c in header.split("|")[1:-1]) + "|", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(args.out) if args.out else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        task = bt.build_task(root)
        for workload in [w for w in args.workloads.split(",") if w]:
            for lat in lats:
                with server(lat, workload) as url:
                    for n in [int(x) for x in args.iterations.split(",") if x]:
                        for rot in [r for r in args.rotating.split(",") if r]:
                            for name, python in engines:
                                if name == "base" and rot != "fresh":
                                    continue
                                slug = f"{workload}-{int(lat * 1000)}-{n}-{rot}-{name}"
                                extra = (["--rotating", "reuse"] if rot == "reuse" else []) + \
                                    (args.extra.split() if name == "this" else []) + \
                                    (["--max-in-flight", str(args.in_flight)] if args.in_flight != bt.IN_FLIGHT else [])
                                process = root / f"{slug}.process_s"
                                if not (args.keep and (root / slug / "summary.json").exists()):
                                    wall = evolve(python, root / slug, task, bt.config_file(root, url, f"cache-{slug}", args.in_flight),
                                                  n, *extra)
                                    process.write_text(f"{wall:.3f}\n")
                                f = figures(root / slug, lat, args.in_flight)
                                f["process"] = float(process.read_text()) if process.exists() else None
                                print(row((workload, lat, n, rot, name), f), flush=True)
    print(f"core speed {bt.core_speed():.0f} ms at the end; load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

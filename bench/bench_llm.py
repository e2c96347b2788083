#!/usr/bin/env python3
"""The LLM layer against a local OpenAI-compatible server: concurrency, the cache, re-runs.

    python bench/bench_llm.py [--latency 0.3] [--concurrency 32] [--iterations 3]
                              [--tokens-task locomo --tokens-data .../locomo10.json]

The fake server (mstar/testing/fake_server.py, offline models behind it) runs in its own
process; mstar talks to it with the real `openai` client. Three measurements:

1. One evaluation per seed at a fixed latency per call, against its critical-path
   bound: the calls that must happen one after another, times the latency. The
   knowledge base is built in episode order and read in question order, so a
   toolkit call made inside a write or a read cannot overlap the next one; the
   other calls only wait for a free slot (at most `concurrency` in flight). In
   units of one call:
       ingest  = max(ceil(E / c), 1 + W)        E extractions, W toolkit calls in writes
       reads   = max(ingest + R, ceil((E + Q) / c))   R toolkit calls in reads, Q queries
       bound   = reads + 1 (the last answer) [+ 1 when a judge scores it]
   a lower bound for any schedule (sandbox time counted as zero).
2. Billed tokens per iteration of the same run with the response cache and without
   (on the sample task by default; `--tokens-task locomo --tokens-data FILE` for the paper's
   setting, where every evaluation writes all 272 sessions).
3. A finished run re-run against its cache: new requests (should be 0), identical
   lineage, and the wall-time ratio, with the server at a latency model of a hosted
   endpoint (`--rerun-latency` s + `--rerun-per-token` s per completion token).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mstar.cli import main as mstar_main  # noqa: E402
from mstar.run import events as ev_types  # noqa: E402

ROLES = ("task", "reflector", "toolkit", "judge")


@contextmanager
def fake_server(latency: float, per_token: float = 0.0, memo: bool = False):
    proc = subprocess.Popen([sys.executable, "-m", "mstar.testing.fake_server", "--latency", str(latency),
                             "--latency-per-token", str(per_token)] + (["--memo"] if memo else []),
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        base_url = proc.stdout.readline().strip()
        if not base_url.startswith("http"):
            raise RuntimeError(f"the fake server did not start (said {base_url!r})")
        yield base_url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def requests_so_far(base_url: str) -> int:
    with urllib.request.urlopen(f"{base_url}/stats", timeout=10) as resp:
        return json.load(resp)["requests"]


def config_file(folder: Path, base_url: str, concurrency: int, cache_dir: str | None) -> Path:
    lines = ["[llm]", f'cache_dir = "{cache_dir or ""}"', "[llm.defaults]", 'backend = "openai"',
             f'base_url = "{base_url}"', f"concurrency = {concurrency}", "timeout_s = 600"]
    for role in ROLES:
        lines += [f"[llm.{role}]", f'model = "offline-{role}"']
        lines += [f'[llm.prices."offline-{role}"]', "input = 0", "output = 0"]   # free, and known to be
    path = folder / f"llm-{abs(hash((base_url, cache_dir)))}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


# ------------------------------------------------------------------ 1. one evaluation vs its bound

def critical_path_calls(E: int, Q: int, W: int, R: int, c: int, judged: bool) -> int:
    ingest = max(math.ceil(E / c), 1 + W if E else 0)
    reads = max(ingest + R, math.ceil((E + Q) / c))
    return reads + 1 + (1 if judged else 0)


def bench_evaluation(latency: float, concurrency: int, tmp: Path, repeats: int = 3) -> list[tuple]:
    from mstar.config import RunConfig, EvolutionConfig
    from mstar.llm.router import LLMRouter
    from mstar.llm.settings import llm_config_from_table, load_config_file
    from mstar.execution import EvalJob
    from mstar.loop import Evolution
    from mstar.program.sources import load_program_source
    from mstar.run.store import RunStore
    from mstar.tasks import load_task

    rows = []
    with fake_server(latency, memo=True) as url:
        llm = llm_config_from_table(load_config_file(config_file(tmp, url, concurrency, None)))
        cfg = RunConfig(name="bench", llm=llm, evolution=EvolutionConfig(workers=concurrency))
        router = LLMRouter.from_config(llm)
        store = RunStore(tmp / "eval-run")
        store.create()
        evo = Evolution(cfg, load_task("sample"), router, store)
        # Warm-up (not timed): the first evaluation of a process also starts the sandbox's fork
        # server and chromadb's lazy imports, which no later evaluation pays for; and the server
        # learns every reply, so that in the timed pass it only waits out the latency instead of
        # running the offline models (a real server's compute is not on this machine's CPUs).
        for name in cfg.seeds:
            evo.executor.run(EvalJob(load_program_source(name)[1], "validation", tuple(evo.split.static), keep=False))
        for name in cfg.seeds:
            source = load_program_source(name)[1]
            walls = []
            for _ in range(repeats):   # the median of a few, against a stray stall of a busy machine
                mark = router.mark()
                res = evo.executor.run(EvalJob(source, "validation", tuple(evo.split.static), keep=False))
                walls.append(res.seconds)
            recs = router.ledger.snapshot(mark)
            toolkit = [r for r in recs if r.role == "toolkit"]
            R = sum(c.toolkit_calls for c in res.cases)
            judged = any(r.role == "judge" for r in recs)
            calls = critical_path_calls(len(evo.train), len(evo.static), len(toolkit) - R, R, concurrency, judged)
            # The worker's own time (start, writes, reads) minus its waits for toolkit calls.
            compute = max(0.0, res.sandbox_seconds - sum(r.latency_s for r in toolkit))
            rows.append((name, len(recs), len(toolkit) - R, R, calls, calls * latency, statistics.median(walls),
                         compute))
    return rows


# ------------------------------------------------------------------ 2 + 3. runs with and without the cache

def run(out: Path, cfg: Path, iterations: int, task: str = "sample", data: str | None = None,
        extra: tuple = ()) -> float:
    argv = ["evolve", "--task", task, "--iterations", str(iterations), "--seed", "0",
            "--out", str(out), "--config", str(cfg), "--workers", "32", "--quiet", *extra]
    if data:
        argv += ["--data", data]
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()) as said, contextlib.redirect_stderr(io.StringIO()) as warned:
        rc = mstar_main(argv)
    if rc != 0:
        raise SystemExit(f"run {out} failed with exit code {rc}:\n{said.getvalue()[-2000:]}\n{warned.getvalue()[-2000:]}")
    return time.perf_counter() - t0


def lineage(out: Path) -> list[dict]:
    """The lineage without what varies between identical runs (timings, spend)."""
    return [{k: v for k, v in ev_types.to_dict(e).items() if k not in ("seconds", "timing", "llm")}
            for e in ev_types.read_lineage(out / "lineage.jsonl")]


def tokens_per_iteration(out: Path) -> float:
    its = ev_types.iterations(ev_types.read_lineage(out / "lineage.jsonl"))
    return sum(e.llm["prompt_tokens"] + e.llm["completion_tokens"] for e in its) / max(len(its), 1)


def report_evaluation(args, tmp: Path) -> None:
    rows = bench_evaluation(args.latency, args.concurrency, tmp)
    print(f"1. one evaluation (sample task, static set) at {args.latency * 1000:.0f} ms per call, "
          f"concurrency {args.concurrency} (wall: median of 3)")
    print(f"| {'seed':<20} | {'calls':>5} | {'tk/write':>8} | {'tk/read':>7} | {'bound calls':>11} | "
          f"{'bound s':>7} | {'wall s':>6} | {'wall/bound':>10} | {'sandbox cpu s':>13} | "
          f"{'wall/(bound+sandbox)':>20} |")
    print(f"|{'-' * 22}|{'-' * 7}|{'-' * 10}|{'-' * 9}|{'-' * 13}|{'-' * 9}|{'-' * 8}|{'-' * 12}|"
          f"{'-' * 15}|{'-' * 22}|")
    for name, calls, w, r, bcalls, bound, wall, sb in rows:
        print(f"| {name:<20} | {calls:>5} | {w:>8} | {r:>7} | {bcalls:>11} | {bound:>7.2f} | {wall:>6.2f} | "
              f"{wall / bound:>9.2f}x | {sb:>13.2f} | {wall / (bound + sb):>19.2f}x |")
    print("   bound: calls that must happen one after another x latency; sandbox cpu: the worker's own "
          "start, writes and reads (also one after another), toolkit waits excluded")


def report_tokens(args, tmp: Path) -> None:
    # 2. tokens per iteration, same run with and without the cache (latency does not change tokens)
    with fake_server(0.0) as url:
        with_cache = tmp / "with-cache"
        run(with_cache, config_file(tmp, url, args.concurrency, str(tmp / "cache-tokens")), args.iterations,
            args.tokens_task, args.tokens_data)
        without = tmp / "no-cache"
        run(without, config_file(tmp, url, args.concurrency, None), args.iterations,
            args.tokens_task, args.tokens_data)
    same = lineage(with_cache) == lineage(without)
    t_with, t_without = tokens_per_iteration(with_cache), tokens_per_iteration(without)
    summary = json.loads((with_cache / "summary.json").read_text())["llm"]
    print()
    print(f"2. billed tokens per iteration, {args.tokens_task} task ({args.iterations} iterations; "
          f"identical lineage: {same})")
    print(f"   without the cache {t_without:>12,.0f}")
    print(f"   with the cache    {t_with:>12,.0f}   ({1 - t_with / t_without:.0%} fewer)")
    print("   whole run, by kind of call (seeds and test included):")
    for kind, v in summary["per_kind"].items():
        print(f"   {kind:<24} {v['calls']:>6} calls  {v['cache_hits']:>6} from the cache  "
              f"{v['prompt_tokens'] + v['completion_tokens']:>11,} tokens billed  {v['saved_tokens']:>11,} saved")


def report_rerun(args, tmp: Path) -> None:
    # 3. a finished run, re-run against its cache
    with fake_server(args.rerun_latency, args.rerun_per_token) as url:
        cfg = config_file(tmp, url, args.concurrency, str(tmp / "cache-rerun"))
        small = ("--static-size", str(args.rerun_static_size))
        first_wall = run(tmp / "first", cfg, args.iterations, extra=small)
        n0 = requests_so_far(url)
        second_wall = run(tmp / "again", cfg, args.iterations, extra=small)
        new_requests = requests_so_far(url) - n0
    print()
    print(f"3. a finished run re-run against its cache ({args.iterations} iterations, static set "
          f"{args.rerun_static_size}; server: {args.rerun_latency:g} s + {args.rerun_per_token * 1000:g} ms "
          f"per completion token; {n0} requests in the first run)")
    print(f"   first run {first_wall:7.1f} s | re-run {second_wall:6.1f} s | {first_wall / second_wall:5.1f}x "
          f"faster | new requests {new_requests} | identical lineage "
          f"{lineage(tmp / 'first') == lineage(tmp / 'again')}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=0.3, help="seconds per call for the evaluation bench")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--tokens-task", default="sample", help="task of the tokens-per-iteration comparison")
    ap.add_argument("--tokens-data", default=None, help="its data file, when it needs one")
    ap.add_argument("--rerun-latency", type=float, default=0.5, help="fixed seconds per call (re-run bench)")
    ap.add_argument("--rerun-per-token", type=float, default=0.01,
                    help="seconds per completion token (re-run bench; 0.01 = 100 tokens/s)")
    ap.add_argument("--rerun-static-size", type=int, default=10, help="static set of the re-run bench's runs")
    ap.add_argument("--only", default="1,2,3", help="which measurements to run, e.g. 1,3")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        parts = {p.strip() for p in args.only.split(",")}
        if "1" in parts:
            report_evaluation(args, tmp)
        if "2" in parts:
            report_tokens(args, tmp)
        if "3" in parts:
            report_rerun(args, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Memory X-ray of the three seeds on LoCoMo's static set: where their wrong answers were lost.

    python bench/bench_xray.py                                   # ../shared/data/locomo/locomo10.json
    python bench/bench_xray.py --data PATH --static-size 25

Each seed is evaluated as `mstar eval SEED --task locomo --split static` does (every session
written, the static set of the run's split seed), with the offline backend.
Printed per seed: the mean score, evidence recall of its reads, precision (share of the read
output that is evidence), the mean score of the cases whose evidence was all retrieved, and the
cases lost at store / read / answer / right / unattributed; then recall per category. The
attribution itself costs no LLM call (mstar/evaluation/attribution.py); its time is printed too.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mstar.config import EvolutionConfig, LLMConfig, SandboxConfig  # noqa: E402
from mstar.evaluation import evaluate, xray  # noqa: E402
from mstar.llm.router import LLMRouter  # noqa: E402
from mstar.program.sources import load_program_source  # noqa: E402
from mstar.run.xray_text import stage_counts  # noqa: E402
from mstar.split import make_split  # noqa: E402
from mstar.split.embed import DEFAULT_CACHE_DIR, make_embedder  # noqa: E402
from mstar.tasks import load_task  # noqa: E402

SEEDS = ("vector_search", "llm_summarizer", "experience_learner")


def _num(x) -> str:
    return "    -" if x is None else f"{x:5.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"))
    ap.add_argument("--static-size", type=int, default=EvolutionConfig.static_size)
    ap.add_argument("--split-seed", type=int, default=EvolutionConfig.split_seed)
    ap.add_argument("--workers", type=int, default=EvolutionConfig.workers)
    args = ap.parse_args()
    if not Path(args.data).exists():
        print(f"bench_xray: no LoCoMo file at {args.data} (give --data PATH/locomo10.json)", file=sys.stderr)
        return 2
    task = load_task("locomo", args.data)
    embedder = make_embedder(EvolutionConfig.embed_model, DEFAULT_CACHE_DIR)
    split = make_split(task, embedder, static_size=args.static_size, train_ratio=task.train_ratio,
                       seed=args.split_seed)
    queries = [task.validation[i] for i in split.static]
    episodes = [task.episodes[i] for i in split.train_episodes]
    router = LLMRouter.from_config(LLMConfig())
    print(f"LoCoMo static set: {len(queries)} questions, {len(episodes)} sessions written; offline backend")
    print(f"{'seed':<20} {'score':>5} {'recall':>6} {'prec':>5} {'s|ret':>5} {'store':>5} {'read':>5} "
          f"{'answer':>6} {'right':>5} {'unatt':>5} {'eval s':>6} {'xray ms':>7}")
    per_cat = {}
    for name in SEEDS:
        _, source = load_program_source(name)
        t0 = time.perf_counter()
        res = evaluate(source, episodes, queries, metric=task.score, router=router, sandbox=SandboxConfig(),
                       workers=args.workers)
        seconds = time.perf_counter() - t0
        t1 = time.perf_counter()   # the attribution again, alone: what it adds to an evaluation
        xray.attach(res.cases, queries, res.writes, episodes, source)
        xray_ms = 1000 * (time.perf_counter() - t1)
        x = res.xray or {}
        stages = dict(stage_counts(x))
        print(f"{name:<20} {res.mean_score:5.3f} {_num(x.get('recall')):>6} {_num(x.get('precision'))} "
              f"{_num(x.get('score_when_retrieved'))} {stages['lost at store']:5d} {stages['lost at read']:5d} "
              f"{stages['lost at answer']:6d} {stages['right']:5d} {(x.get('labels') or {}).get('unattributed', 0):5d} "
              f"{seconds:6.1f} {xray_ms:7.1f}")
        per_cat[name] = x.get("per_category") or {}
    cats = sorted({c for p in per_cat.values() for c in p})
    print("\nevidence recall per category")
    print(f"{'seed':<20} " + " ".join(f"{c:>12}" for c in cats))
    for name, p in per_cat.items():
        print(f"{name:<20} " + " ".join(f"{_num((p.get(c) or {}).get('recall')):>12}" for c in cats))
    router.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

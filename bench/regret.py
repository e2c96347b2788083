#!/usr/bin/env python3
"""A run's champion against every program of that run, on validation items the run never used
and on the held-out test.

    python bench/regret.py RUN [RUN ...] [--items 500] [--no-test]

The items: `--items` validation questions outside the static set, the rotating batches the run
drew and the items its confirmation bought (so nothing that chose the champion), drawn with a
fixed seed. Every program of the run's pool is scored on them (its training episodes written,
as in the run; the run's own LLM settings, offline in the study), and the champion's regret is
the best program's mean minus the champion's (0 when the champion is the best). bench_study.py
prints it per seed (target of issue 28: <= 0.01 in >= 4 of 5 seeds).

The test regret is the same on the run's test questions, every episode written as in the run's
own test: a program the run tested already (cases/<id>.test.json) is not scored again.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mstar.run import events as ev_types  # noqa: E402

REGRET_SEED = "mstar-regret"


@dataclass
class Regret:
    champion: str
    best: str
    champion_score: float
    best_score: float
    items: int
    scores: dict[str, float] = field(default_factory=dict)   # program id -> mean on the items
    test: dict[str, float] = field(default_factory=dict)     # program id -> test mean (empty: not measured)

    @property
    def regret(self) -> float:
        return max(0.0, self.best_score - self.champion_score)

    @property
    def test_best(self) -> str:
        ids = list(self.test)
        return max(ids, key=lambda p: (self.test[p], -ids.index(p))) if ids else ""

    @property
    def test_regret(self) -> float | None:
        return max(0.0, self.test[self.test_best] - self.test[self.champion]) if self.test else None


def unused_items(run: Path, validation_size: int, n: int) -> list[int]:
    """`n` validation indices the run never scored a program on (static, rotating, confirmation)."""
    split = json.loads((run / "split.json").read_text())
    used = set(split["static"])
    for ev in ev_types.read_lineage(run / "lineage.jsonl"):
        if isinstance(ev, ev_types.IterationEvent):
            used.update(ev.rotating_batch)
        elif isinstance(ev, ev_types.ConfirmationEvent):
            used.update(ev.bought)
    # One fixed order of the items outside the static set, whatever the run bought: runs of the
    # same task that used different items are judged on mostly the same ones.
    order = sorted(set(range(validation_size)) - set(split["static"]))
    random.Random(REGRET_SEED).shuffle(order)
    return sorted([i for i in order if i not in used][:n])


def measure(run: Path, n: int = 500, jobs: int = 2, test: bool = True) -> Regret:
    """The run's regret; kept in the run folder (regret-N.json) and read from there next time: a
    study re-read with --reuse does not score every program again."""
    saved = run / f"regret-{n}{'' if test else '-val'}.json"
    if saved.exists():
        return Regret(**json.loads(saved.read_text()))
    got = _measure(run, n, jobs, test)
    saved.write_text(json.dumps(got.__dict__))
    return got


def _measure(run: Path, n: int, jobs: int, test: bool) -> Regret:
    from mstar.config import RunConfig
    from mstar.evaluation import evaluate
    from mstar.llm.router import LLMRouter
    from mstar.tasks import load_task

    cfg = RunConfig.from_dict({k: v for k, v in json.loads((run / "config.json").read_text()).items()
                               if k != "format_version"})
    task = load_task(cfg.task, cfg.data, theme=cfg.theme, metric=cfg.metric, **cfg.task_options)
    split = json.loads((run / "split.json").read_text())
    episodes = [task.episodes[i] for i in split["train_episodes"]]
    items = unused_items(run, len(task.validation), n)
    queries = [task.validation[i] for i in items]
    summary = json.loads((run / "summary.json").read_text())
    ids = [p["program_id"] for p in summary["pool"]]
    sources = {pid: (run / "programs" / f"{pid}.py").read_text() for pid in ids}
    router = LLMRouter.from_config(cfg.llm, seed=cfg.evolution.seed)
    by_source: dict[str, float] = {}

    def score(source: str) -> float:
        return evaluate(source, episodes, queries, metric=task.score, router=router, sandbox=cfg.sandbox,
                        workers=cfg.evolution.workers).mean_score

    def tested(source: str) -> float:
        return evaluate(source, list(task.episodes), list(task.test), metric=task.score, router=router,
                        sandbox=cfg.sandbox, workers=cfg.evolution.workers).mean_score

    distinct = list(dict.fromkeys(sources.values()))
    on_test: dict[str, float] = {}
    if test and task.test:
        for pid in ids:             # what the run's own test scored (the same questions, all episodes)
            path = run / "cases" / f"{pid}.test.json"
            if path.exists():
                on_test.setdefault(sources[pid], float(json.loads(path.read_text())["mean_score"]))
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        by_source = dict(zip(distinct, pool.map(score, distinct)))
        if test and task.test:
            todo = [s for s in distinct if s not in on_test]
            on_test.update(zip(todo, pool.map(tested, todo)))
    router.close()
    scores = {pid: by_source[sources[pid]] for pid in ids}
    best = max(ids, key=lambda p: (scores[p], -ids.index(p)))
    champion = summary["best_id"]
    return Regret(champion, best, scores[champion], scores[best], len(items), scores,
                  {pid: on_test[sources[pid]] for pid in ids} if on_test else {})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+")
    ap.add_argument("--items", type=int, default=500)
    ap.add_argument("--jobs", type=int, default=2, help="programs scored at once")
    ap.add_argument("--no-test", action="store_true", help="skip the test regret")
    args = ap.parse_args()
    print("| run | champion | its score | best program | its score | regret | items | test: best program | test regret |")
    print("|---|---|---|---|---|---|---|---|---|")
    for run in args.runs:
        r = measure(Path(run), args.items, args.jobs, test=not args.no_test)
        tr = f"{r.test_regret:.4f}" if r.test_regret is not None else "-"
        print(f"| {Path(run).name} | {r.champion} | {r.champion_score:.4f} | {r.best} | {r.best_score:.4f} | "
              f"{r.regret:.4f} | {r.items} | {r.test_best or '-'} | {tr} |")
        ranked = sorted(r.scores.items(), key=lambda kv: -kv[1])
        print("  " + ", ".join(f"{p} {s:.4f}" for p, s in ranked), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

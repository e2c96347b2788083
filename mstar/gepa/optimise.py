"""One GEPA run: `gepa.optimize` over a seed's ALWAYS_ON_KNOWLEDGE, everything else frozen.

The datasets are the evolution's split (mstar.split.make_split): GEPA's validation set -- where
its Pareto front and its best candidate are decided -- is the static set, its training set (the
minibatches its reflection reads) is the rotating pool, and every evaluation writes the split's
training episodes first. The reflection model is the run's reflector role, so offline the
offline reflector answers GEPA's proposal prompt (mstar/offline/gepa_proposer.py). The budget is
GEPA's own: metric calls, one per query scored.

`GepaRun` is what a run leaves: the optimised program (the seed with the best constant), the
constant itself, every candidate's text, parent and validation score, and the budget spent --
`mstar baselines --out` writes it beside the table.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from mstar.gepa import COMPONENT, DEFAULT_BUDGET, DEFAULT_MINIBATCH, GEPA_SEEDS, LABELS
from mstar.gepa.adapter import MemoryProgramAdapter, with_constant
from mstar.offline.source_edits import constant_value
from mstar.program.sources import load_program_source


@dataclass
class GepaRun:
    name: str                          # "gepa" or "gepa_vector_search"
    label: str
    seed: str                          # the frozen seed program
    budget: int                        # max metric calls
    minibatch: int
    total_metric_calls: int
    best_index: int
    best_score: float                  # its mean score on GEPA's validation set (the static set)
    constant: str                      # the optimised ALWAYS_ON_KNOWLEDGE
    seed_constant: str
    source: str                        # the seed's source with the optimised constant
    history: list[dict] = field(default_factory=list)   # per candidate: parents, val score, found at
    valset: list[str] = field(default_factory=list)      # query ids
    trainset_size: int = 0
    episodes: int = 0
    evaluations: int = 0               # mstar evaluations the adapter ran
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    def save(self, stem: Path) -> list[Path]:
        """STEM.json (everything) and STEM.py (the optimised program)."""
        stem.parent.mkdir(parents=True, exist_ok=True)
        paths = [Path(f"{stem}.json"), Path(f"{stem}.py")]
        paths[0].write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        paths[1].write_text(self.source, encoding="utf-8")
        return paths


class _Log:
    """gepa's LoggerProtocol: its progress lines go to `sink` (None: dropped), never to stdout,
    where `mstar baselines` prints the table."""

    def __init__(self, sink: Callable[[str], None] | None) -> None:
        self.sink = sink

    def log(self, message: str) -> None:
        if self.sink is not None:
            self.sink(str(message))


def optimise(name: str, task, split, *, router, sandbox, budget: int = DEFAULT_BUDGET,
             minibatch: int = DEFAULT_MINIBATCH, seed: int = 0, workers: int = 8, embed: Any = "current",
             log: Callable[[str], None] | None = None) -> GepaRun:
    """Run GEPA for row `name` (a key of GEPA_SEEDS) on the task's split."""
    import gepa

    if name not in GEPA_SEEDS:
        raise ValueError(f"unknown GEPA row {name!r}; rows are {', '.join(GEPA_SEEDS)}")
    if budget < 1:
        raise ValueError(f"the GEPA budget must be at least 1 metric call, got {budget}")
    t0 = time.perf_counter()
    seed_ref = GEPA_SEEDS[name]
    _, seed_source = load_program_source(seed_ref)
    seed_constant = constant_value(seed_source, COMPONENT) or ""
    episodes = [task.episodes[i] for i in split.train_episodes]
    valset = [task.validation[i] for i in split.static]
    trainset = [task.validation[i] for i in split.rotating_pool] or valset
    adapter = MemoryProgramAdapter(seed_source, episodes, metric=task.score, router=router, sandbox=sandbox,
                                   workers=workers, embed=embed)

    def reflection_lm(prompt) -> str:
        messages = prompt if isinstance(prompt, list) else [{"role": "user", "content": str(prompt)}]
        return router.text("reflector", messages)

    try:
        result = gepa.optimize(
            seed_candidate={COMPONENT: seed_constant}, trainset=trainset, valset=valset, adapter=adapter,
            reflection_lm=reflection_lm, max_metric_calls=budget, reflection_minibatch_size=minibatch,
            candidate_selection_strategy="pareto", module_selector="round_robin", seed=seed,
            logger=_Log(log), display_progress_bar=False, raise_on_exception=True)
    finally:
        adapter.close()
    best = result.best_idx
    constant = result.candidates[best][COMPONENT]
    history = [{"index": i, "parents": list(result.parents[i]), "val_score": result.val_aggregate_scores[i],
                "found_at_metric_call": result.discovery_eval_counts[i], COMPONENT: c[COMPONENT]}
               for i, c in enumerate(result.candidates)]
    return GepaRun(name=name, label=LABELS[name], seed=seed_ref, budget=budget, minibatch=minibatch,
                   total_metric_calls=int(result.total_metric_calls or 0), best_index=best,
                   best_score=float(result.val_aggregate_scores[best]), constant=constant,
                   seed_constant=seed_constant, source=with_constant(seed_source, constant), history=history,
                   valset=[q.id for q in valset], trainset_size=len(trainset), episodes=len(episodes),
                   evaluations=adapter.evaluations, seconds=round(time.perf_counter() - t0, 3))

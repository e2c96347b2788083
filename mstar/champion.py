"""Which program the run hands over, and the evidence for it (issue 18; beyond the paper).

The paper takes the best static score. With 25 static items and 20 children that is the maximum
of 20 noisy numbers: the program with the largest lead is often the luckiest. Before the test,
the `confirm_top` best programs by static score are also scored on `confirm_size` validation
items the static set does not hold (the same items for each, drawn from the split's seed), and
the champion is the best on the union of both samples. `pick = "static"` keeps the paper's rule;
the run records what both rules choose, and the test scores both.
"""
from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from mstar.execution import EvalJob
from mstar.llm import scope as llm_scope
from mstar.pool import PoolEntry
from mstar.stats import paired_bootstrap, paired_scores

RULES = ("confirmed", "static")


@dataclass
class Confirmation:
    items: list[int]                                   # validation indices outside the static set
    scores: dict[str, dict] = field(default_factory=dict)   # program id -> static, confirm, union, n
    confirmed_id: str = ""                             # best on static + confirmation items
    static_id: str = ""                                # best static score (the paper's rule)
    chain_calls: int = 0                               # the slowest evaluation's dependent calls

    def champion(self, rule: str) -> str:
        return self.static_id if rule == "static" or not self.confirmed_id else self.confirmed_id


def confirmation_items(validation_size: int, static: list[int], size: int, split_seed: int) -> list[int]:
    """`size` validation indices outside the static set, the same for every program of the run."""
    rest = sorted(set(range(validation_size)) - set(static))
    rng = random.Random(f"mstar-confirm:{split_seed}")
    return sorted(rng.sample(rest, min(size, len(rest))))


def candidates(entries: list[PoolEntry], top: int) -> list[PoolEntry]:
    """The `top` best by static score (ties: the earlier program), best first."""
    ranked = sorted(entries, key=lambda e: (-e.static_score, entries.index(e)))
    return ranked[:max(1, top)]


def confirm(evo, top: int, size: int, split_seed: int) -> Confirmation:
    """Score the top programs on the confirmation items, all at once (evo: loop.Evolution)."""
    entries = list(evo.pool.entries)
    static_best = candidates(entries, 1)[0]
    items = confirmation_items(len(evo.task.validation), evo.split.static, size, split_seed)
    out = Confirmation(items, static_id=static_best.program_id)
    chosen = candidates(entries, top)
    if not items or len(chosen) < 2:
        out.confirmed_id = static_best.program_id
        return out
    with llm_scope.scoped("confirm"), ThreadPoolExecutor(len(chosen), thread_name_prefix="confirm") as pool:
        futures = [llm_scope.submit(pool, evo.executor.run, EvalJob(e.source, "validation", tuple(items)))
                   for e in chosen]
        results = [f.result() for f in futures]
    out.chain_calls = max(r.chain_calls for r in results)
    for entry, res in zip(chosen, results):
        static = evo.static_result(entry.program_id)
        s_scores = [c.score for c in static.cases if c.scored] if static else []
        c_scores = [c.score for c in res.cases if c.scored]
        union = s_scores + c_scores
        out.scores[entry.program_id] = {
            "static": entry.static_score, "confirm": res.mean_score, "n": len(union),
            "union": sum(union) / len(union) if union else 0.0}
    out.confirmed_id = max(chosen, key=lambda e: (out.scores[e.program_id]["union"],
                                                  -entries.index(e))).program_id
    return out


def paired_gain(test_a, test_b) -> dict | None:
    """Paired difference of two test evaluations (a - b) over the questions both scored."""
    if test_a is None or test_b is None:
        return None
    return paired_bootstrap(*paired_scores(test_a.cases, test_b.cases)).to_dict()

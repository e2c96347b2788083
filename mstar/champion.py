"""Which program the run hands over, and the evidence for it (issue 18; beyond the paper).

The paper takes the best static score. With 25 static items and 20 children that is the maximum
of 20 noisy numbers: the program with the largest lead is often the luckiest. Before the test,
the `confirm_top` best programs by static score are also scored on `confirm_size` validation
items the static set does not hold (the same items for each, drawn from the split's seed), and
the champion is the best on the union of both samples.

One sample of 100 items often cannot tell the best two apart: speaker-indexed LoCoMo variants
whose validation scores differ by 0.03 came out 0.001 apart on it, and the wrong one won. So the
confirmation is a race (`confirm_rounds`, default 3): when the runner-up's paired difference to
the leader on the union is not significant, the two are scored on another `confirm_size` fresh
items, until one leads significantly or the rounds run out; the leader on all the evidence is
the champion. `confirm_rounds = 1` is the single sample. `pick = "static"` keeps the paper's rule;
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
    items: list[int]                                   # validation indices outside the static set, every round
    scores: dict[str, dict] = field(default_factory=dict)   # program id -> static, confirm, union, n, rounds
    confirmed_id: str = ""                             # best on static + confirmation items
    static_id: str = ""                                # best static score (the paper's rule)
    chain_calls: int = 0                               # dependent calls, round after round
    rounds: list[dict] = field(default_factory=list)   # per round: items, programs, leader, runner-up, gap

    def champion(self, rule: str) -> str:
        return self.static_id if rule == "static" or not self.confirmed_id else self.confirmed_id


def confirmation_items(validation_size: int, static: list[int], size: int, split_seed: int) -> list[int]:
    """`size` validation indices outside the static set, the same for every program of the run."""
    rest = sorted(set(range(validation_size)) - set(static))
    rng = random.Random(f"mstar-confirm:{split_seed}")
    return sorted(rng.sample(rest, min(size, len(rest))))


def confirmation_batches(validation_size: int, static: list[int], size: int, rounds: int,
                         split_seed: int) -> list[list[int]]:
    """The items of each round: the first is `confirmation_items`; each later one `size` fresh
    items (none of the static set nor of an earlier round), fewer when the validation set runs out."""
    batches, used = [], set(static)
    for k in range(1, max(1, rounds) + 1):
        if k == 1:
            batch = confirmation_items(validation_size, static, size, split_seed)
        else:
            rest = sorted(set(range(validation_size)) - used)
            batch = sorted(random.Random(f"mstar-confirm:{split_seed}:{k}").sample(rest, min(size, len(rest))))
        if not batch:
            break
        batches.append(batch)
        used.update(batch)
    return batches


def candidates(entries: list[PoolEntry], top: int) -> list[PoolEntry]:
    """The `top` best by static score (ties: the earlier program), best first."""
    ranked = sorted(entries, key=lambda e: (-e.static_score, entries.index(e)))
    return ranked[:max(1, top)]


def _scored(cases) -> list[float]:
    return [c.score for c in cases if c.scored]


def confirm(evo, top: int, size: int, split_seed: int, rounds: int = 1) -> Confirmation:
    """Race the top programs on the confirmation items (evo: loop.Evolution): every candidate on
    the first round's items, then the leader and the runner-up on fresh items while the runner-up
    is not significantly behind (95% paired interval) and rounds remain."""
    entries = list(evo.pool.entries)
    static_best = candidates(entries, 1)[0]
    batches = confirmation_batches(len(evo.task.validation), evo.split.static, size, rounds, split_seed)
    out = Confirmation([], static_id=static_best.program_id)
    racing = candidates(entries, top)
    if not batches or len(racing) < 2:
        out.confirmed_id = static_best.program_id
        return out
    union: dict[str, list] = {}
    confirmed: dict[str, list] = {}
    for e in racing:
        static = evo.static_result(e.program_id)
        union[e.program_id] = list(static.cases) if static else []
        confirmed[e.program_id] = []
    order = {e.program_id: i for i, e in enumerate(entries)}
    for k, batch in enumerate(batches, 1):
        with llm_scope.scoped("confirm"), ThreadPoolExecutor(len(racing), thread_name_prefix="confirm") as pool:
            futures = [llm_scope.submit(pool, evo.executor.run, EvalJob(e.source, "validation", tuple(batch)))
                       for e in racing]
            results = [f.result() for f in futures]
        out.items += batch
        out.chain_calls += max(r.chain_calls for r in results)
        for entry, res in zip(racing, results):
            union[entry.program_id] += res.cases
            confirmed[entry.program_id] += res.cases
            _record(out, entry, union[entry.program_id], confirmed[entry.program_id], k)
        ranked = sorted(racing, key=lambda e: (-out.scores[e.program_id]["union"], order[e.program_id]))
        leader, runner = ranked[0], ranked[1]
        gap = paired_bootstrap(*paired_scores(union[leader.program_id], union[runner.program_id]))
        decided = gap.low > 0
        out.rounds.append({"round": k, "items": len(batch), "programs": [e.program_id for e in racing],
                           "leader": leader.program_id, "runner_up": runner.program_id,
                           "gap": gap.to_dict(), "decided": decided})
        out.confirmed_id = leader.program_id
        if decided:
            break
        racing = [leader, runner]
    return out


def _record(out: Confirmation, entry: PoolEntry, union_cases: list, confirm_cases: list, rounds: int) -> None:
    u, c = _scored(union_cases), _scored(confirm_cases)
    out.scores[entry.program_id] = {
        "static": entry.static_score, "confirm": sum(c) / len(c) if c else 0.0, "n": len(u),
        "union": sum(u) / len(u) if u else 0.0, "rounds": rounds}


def paired_gain(test_a, test_b) -> dict | None:
    """Paired difference of two test evaluations (a - b) over the questions both scored."""
    if test_a is None or test_b is None:
        return None
    return paired_bootstrap(*paired_scores(test_a.cases, test_b.cases)).to_dict()

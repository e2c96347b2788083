"""Which program the run hands over, and the evidence for it (issues 18 and 28; beyond the paper).

The paper takes the best static score. With 25 static items and 20 children that is the maximum
of 20 noisy numbers: the program with the largest lead is often the luckiest. So before the test
every program the run's evidence cannot rule out (mstar/final/race_entry.py: its own static and rotating
items, or its parent's estimate plus their paired static difference; the `confirm_top` best by
optimistic estimate whenever the allowance pays for them) races, on paired evidence:

1. What the run already paid for: each program's static cases, every rotating batch it was
   evaluated on as a parent (`--rotating fresh`), and the items an earlier race of the run scored
   it on (`earlier_items`: a run resumed with iterations to do races again), paired on the same
   question ids.
2. Then, only while a challenger is still racing (mstar/final/race.py: neither significantly behind
   the leader nor out of reach of a verdict), a batch of fresh validation items for the leader
   and the challengers still in: items outside the static set, not bought before, the ones a
   racer already has from a rotating batch first (half the price for the same pair), then in a
   fixed order drawn from the split's seed.
3. Buying stops when no challenger is racing ("decided" or "tied"), when `confirm_size` items are
   bought or `confirm_rounds` batches (each about confirm_size / confirm_rounds items), when the
   next batch would take the confirmation past its share (`confirm_budget`) of the tokens the
   run asked before it, every token it causes counted -- each racer's questions and its
   knowledge base written (mstar/final/race_budget.py) -- or when the run's own budget is reached.

The champion is the leader when buying stops: the best pessimistic estimate until the racers share
ten fresh items, then the best mean on all the items they share, if it is ahead of the leader
so far by more than a standard error (mstar/final/race.py). A "behind" verdict is wrong
with probability at most 5% over the whole race (mstar/final/race.py); a tie or a spent budget makes
no claim. `pick = "static"` keeps the paper's rule; the run records what both rules choose.
"""
from __future__ import annotations

from mstar.tasks.model import case_scored

import hashlib
import math
import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from mstar.final import race, race_entry
from mstar.final.race_budget import RaceBudget
from mstar.execution import EvalJob
from mstar.llm import scope as llm_scope
from mstar.pool import PoolEntry
from mstar.run import events as ev_types
from mstar.final.stats import paired_bootstrap, paired_scores

RULES = ("confirmed", "static")
SCOPE = "confirm"                                      # the race's LLM calls (mstar.llm.scope)


@dataclass
class Confirmation:
    items: list[int]                                   # validation indices bought, in order
    scores: dict[str, dict] = field(default_factory=dict)   # program id -> static, confirm, union, n, rounds
    confirmed_id: str = ""                             # the leader on all the evidence
    static_id: str = ""                                # best static score (the paper's rule)
    chain_calls: int = 0                               # dependent calls, batch after batch
    rounds: list[dict] = field(default_factory=list)   # per look: items bought before it, leader, gaps
    stop: str = ""                                     # why buying stopped (see the module docstring)
    budget: dict = field(default_factory=dict)         # unit, share, allowance, spent, writes, racer_items
    entry: dict = field(default_factory=dict)          # program id -> estimate, entered (race_entry.py)
    item_scores: dict = field(default_factory=dict)    # program id -> source_sha, scores: its confirmation items

    def champion(self, rule: str) -> str:
        return self.static_id if rule == "static" or not self.confirmed_id else self.confirmed_id

    @classmethod
    def from_event(cls, ev) -> "Confirmation":
        """The confirmation a run recorded before it was killed (resume does not race again)."""
        return cls(list(ev.bought), dict(ev.scores), ev.confirmed_id or ev.static_id or "", ev.static_id or "",
                   int((ev.timing or {}).get("chain_calls", 0)), list(ev.rounds), ev.stop, dict(ev.budget),
                   dict(getattr(ev, "entry", None) or {}), dict(getattr(ev, "item_scores", None) or {}))


def candidates(entries: list[PoolEntry], top: int, *, ties: bool = False) -> list[PoolEntry]:
    """The `top` best by static score, best first (equal scores: the earlier program first). With
    `ties`, also every program whose static score equals the last one's: the static set cannot
    order them, and on offline LoCoMo up to 7 of 13 programs share the best static score while
    their validation means differ by 0.01."""
    ranked = sorted(entries, key=lambda e: (-e.static_score, entries.index(e)))
    top = max(1, top)
    if not ties or len(ranked) <= top:
        return ranked[:top]
    cut = ranked[top - 1].static_score
    return ranked[:top] + [e for e in ranked[top:] if e.static_score == cut]


def scored(cases) -> dict[str, float]:
    """Query id -> score of the cases that were scored (an LLM error or a corrupt game is not;
    the rule of mstar.final.stats.paired_scores)."""
    out = {}
    for c in cases:
        get = c.get if isinstance(c, dict) else (lambda k, c=c: getattr(c, k, None))
        if case_scored(c):
            out[get("query_id")] = float(get("score"))
    return out


def item_order(validation_size: int, static: list[int], split_seed: int) -> list[int]:
    """Every validation index outside the static set, in the order the confirmation buys them
    (the same for every program and every run with this split)."""
    rest = sorted(set(range(validation_size)) - set(static))
    random.Random(f"mstar-confirm:{split_seed}").shuffle(rest)
    return rest


def confirm(evo, top: int, size: int, split_seed: int, rounds: int = 1, budget: float | None = None) -> Confirmation:
    """Race the programs the run's evidence cannot rule out (evo: loop.Evolution; mstar/final/race_entry.py,
    the `top` best by optimistic estimate whatever it says, budget allowing); see the module docstring. `size`: the
    most items bought; `rounds`: the most batches; `budget`: the share of the run's spend so far
    the confirmation may use (None: no limit). `top` <= 1: no race."""
    entries = list(evo.pool.entries)
    static_best = candidates(entries, 1)[0]
    out = Confirmation([], static_id=static_best.program_id, confirmed_id=static_best.program_id)
    if size <= 0 or top <= 1 or len(entries) < 2:
        out.stop = "off" if size <= 0 else "one program"
        return out
    evidence, sources, static_ids, money, est, order = _entry(evo, entries, top, budget)
    qid = lambda i: evo.task.validation[i].id  # noqa: E731
    out.entry = {p: {**e.to_dict(), "entered": p in order} for p, e in est.items()}
    racing = [e for e in entries if e.program_id in order]
    by_id = {e.program_id: e for e in racing}
    out.confirmed_id = order[0]
    if len(order) < 2:
        out.stop = "one program"
        out.budget = money.to_dict()   # what it could have bought: the study reads it for every run
        out.item_scores = _item_scores(entries, evidence, sources)     # kept for the race after this one
        return out
    rounds = max(1, rounds)
    batch_size = max(1, math.ceil(size / rounds))
    z = race.z_for(rounds + 1)
    to_buy = item_order(len(evo.task.validation), evo.split.static, split_seed)
    for look in range(rounds + 1):
        items_left = min(size - len(out.items), len(to_buy))
        leader = race.leader_of(evidence, order, static_ids, out.confirmed_id)
        more = int(min(items_left, money.pair_items(order)))   # paired items, if one pair raced on
        gaps = {}
        for c in order:
            if c == leader:
                continue
            ids = [q for q in evidence[leader] if q in evidence[c]]
            gaps[c] = race.gap([evidence[leader][q] for q in ids], [evidence[c][q] for q in ids], z=z, more=more,
                               fresh=[q not in static_ids for q in ids])
        out.rounds.append(_look(look, len(out.items), order, leader, gaps, money))
        out.confirmed_id = leader
        order = [p for p in order if p == leader or gaps[p].verdict in ("racing", "ahead")]
        if len(order) < 2:
            out.stop = "tied" if any(g.verdict == "tied" for g in gaps.values()) else "decided"
            break
        if look == rounds or items_left <= 0:
            out.stop = "cap"
            break
        reason = _run_budget(evo)
        if reason:
            out.stop = "run budget"
            break
        # The batch: items a racer already has first, then the fixed order; only what fits. An item
        # every racer has (an earlier race's) is evidence already, nothing to buy.
        to_buy = [i for i in to_buy if not all(qid(i) in evidence[p] for p in order)]
        have = [i for i in to_buy if any(qid(i) in evidence[p] for p in order)]
        pick = (have + [i for i in to_buy if i not in set(have)])[:min(batch_size, items_left)]
        need = {p: [i for i in pick if qid(i) not in evidence[p]] for p in order}
        while pick and money.cost(need) > money.left():
            pick = pick[:-1]
            need = {p: [i for i in pick if qid(i) not in evidence[p]] for p in order}
        if not pick:
            out.stop = "budget"
            break
        results = _evaluate(evo, {p: by_id[p].source for p in order}, need)
        for p, res in results.items():
            evidence[p].update(scored(res.cases))
            sources["bought_by"].setdefault(p, set()).update(qid(i) for i in need[p])
        out.chain_calls += max((r.chain_calls for r in results.values()), default=0)
        money.buy(need, results)
        out.items += pick
        sources["bought"].update(qid(i) for i in pick)
        chosen = set(pick)
        to_buy = [i for i in to_buy if i not in chosen]
    for e in racing:
        _record(out, e, evidence[e.program_id], sources, evo)
    out.item_scores = _item_scores(entries, evidence, sources)
    out.budget = money.to_dict()
    return out


def _entry(evo, entries: list[PoolEntry], top: int, budget: float | None):
    """Who races, from the evidence the run holds (no call is made): the evidence, its sources,
    the static ids, the race's budget, each program's estimate and the entrants, leader first."""
    before = _events_before(evo)
    evidence, sources = _evidence(evo, entries, earlier_items(before, entries))
    static_ids = {evo.task.validation[i].id for i in evo.split.static}
    keep = getattr(getattr(getattr(evo, "cfg", None), "evolution", None), "keep_sessions", None)
    money = RaceBudget.for_race(budget, before, len(evo.split.static),
                                {e.program_id: evo.static_result(e.program_id) for e in entries}, keep)
    est = race_entry.estimates(entries, evidence, static_ids)
    afford = (lambda ids: money.entry_cost(ids, race.MIN_FRESH) <= money.allowance) if money.limited else None
    return evidence, sources, static_ids, money, est, race_entry.entrants(entries, est, top, afford)


def racers(evo, top: int, size: int, budget: float | None = None) -> list[str]:
    """The programs `confirm` races, leader first ([] when it races none)."""
    entries = list(evo.pool.entries)
    return [] if size <= 0 or top <= 1 or len(entries) < 2 else list(_entry(evo, entries, top, budget)[-1])


def starting_leader(evo, top: int, size: int, budget: float | None = None) -> str:
    """The program `confirm` starts its race from (the champion if no challenger gets a verdict):
    the one whose test is worth starting beside the race (mstar/final/held_out.py); with no race,
    the best static score."""
    return (racers(evo, top, size, budget) or [candidates(list(evo.pool.entries), 1)[0].program_id])[0]


def _evidence(evo, racing: list[PoolEntry], earlier: dict[str, dict] | None = None) -> tuple[dict[str, dict], dict]:
    """Each program's scores by query id: its static cases, its rotating batches, then the items
    an earlier race of the run scored it on (`earlier`: earlier_items)."""
    evidence, rotating, before = {}, {}, {}
    extra = getattr(evo, "rotating_scores", None)
    for e in racing:
        static = evo.static_result(e.program_id)
        evidence[e.program_id] = scored(static.cases) if static else {}
        for kept, scores in ((rotating, extra(e.program_id) if extra else {}),
                             (before, (earlier or {}).get(e.program_id, {}))):
            kept[e.program_id] = set()
            for q, s in scores.items():
                if q not in evidence[e.program_id]:
                    evidence[e.program_id][q] = float(s)
                    kept[e.program_id].add(q)
    return evidence, {"rotating": rotating, "earlier": before, "bought": set(), "bought_by": {}}


def source_sha(source: str) -> str:
    """What an earlier race's scores are checked against: the program they were bought for."""
    return hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def earlier_items(events: list, entries: list[PoolEntry]) -> dict[str, dict]:
    """Program id -> {query id: score} of the items the run's earlier races scored it on.

    A run races again when it is resumed after its confirmation was recorded with iterations
    still to do: `mstar resume RUN --iterations N` after a kill or an endpoint failure during the
    test, or an iteration whose damaged line `mstar repair` set aside (mstar/library/resuming.py
    drops the recorded confirmation then: the pool has changed). What that race bought was paid
    for and is validation evidence like any other, so the new race reads it instead of buying it
    again. Only for a program whose source is the one scored: a redone iteration may make another
    child under the same id."""
    sha = {e.program_id: source_sha(e.source) for e in entries}
    out: dict[str, dict] = {}
    for ev in events:
        if isinstance(ev, ev_types.ConfirmationEvent):
            for pid, rec in (getattr(ev, "item_scores", None) or {}).items():
                if pid in sha and rec.get("source_sha") == sha[pid]:
                    out.setdefault(pid, {}).update({q: float(s) for q, s in (rec.get("scores") or {}).items()})
    return out


def _item_scores(entries: list[PoolEntry], evidence: dict, sources: dict) -> dict:
    """What the ConfirmationEvent keeps for a later race: each program's confirmation items,
    bought now or read from an earlier race."""
    out = {}
    for e in entries:
        pid = e.program_id
        mine = sources["bought_by"].get(pid, set()) | sources["earlier"].get(pid, set())
        if mine:
            out[pid] = {"source_sha": source_sha(e.source),
                        "scores": {q: evidence[pid][q] for q in evidence[pid] if q in mine}}
    return out


def _evaluate(evo, sources: dict[str, str], need: dict[str, list[int]]) -> dict:
    jobs = {p: EvalJob(sources[p], "validation", tuple(ix)) for p, ix in need.items() if ix}
    if not jobs:
        return {}
    with llm_scope.scoped(SCOPE), ThreadPoolExecutor(len(jobs), thread_name_prefix="confirm") as pool:
        futures = {p: llm_scope.submit(pool, evo.executor.run, job) for p, job in jobs.items()}
        return {p: f.result() for p, f in futures.items()}


def _events_before(evo) -> list:
    """The run's lineage before the confirmation (what it asked: resume-proof, race_budget.py)."""
    store = getattr(evo, "store", None)
    if store is None:
        return []
    lines, _ = store.read_jsonl_tolerant("lineage.jsonl")
    return [e for e in map(ev_types.from_dict, lines) if e is not None]


def _run_budget(evo) -> str | None:
    router = getattr(evo, "router", None)
    budget = getattr(getattr(router, "ledger", None), "budget", None)
    return budget.check() if budget is not None and budget.active else None


def _look(look: int, bought: int, order: list[str], leader: str, gaps: dict, money: RaceBudget) -> dict:
    runner = max(gaps, key=lambda p: (gaps[p].high, -order.index(p))) if gaps else None
    return {"round": look, "items": bought, "programs": list(order), "leader": leader, "runner_up": runner,
            "gap": gaps[runner].to_dict() if runner else None,
            "gaps": {p: g.to_dict() for p, g in gaps.items()},
            "decided": bool(gaps) and all(g.verdict == "behind" for g in gaps.values()),
            "spent": money.used}


def _record(out: Confirmation, entry: PoolEntry, evidence: dict, sources: dict, evo) -> None:
    bought = [s for q, s in evidence.items() if q in sources["bought"]]
    out.scores[entry.program_id] = {
        "static": entry.static_score, "confirm": sum(bought) / len(bought) if bought else 0.0,
        "union": sum(evidence.values()) / len(evidence) if evidence else 0.0, "n": len(evidence),
        "bought": len(bought), "rotating": len(sources["rotating"][entry.program_id]),
        "earlier": len(sources["earlier"][entry.program_id]),
        "rounds": sum(1 for r in out.rounds if entry.program_id in r["programs"])}


def paired_gain(test_a, test_b) -> dict | None:
    """Paired difference of two test evaluations (a - b) over the questions both scored."""
    if test_a is None or test_b is None:
        return None
    return paired_bootstrap(*paired_scores(test_a.cases, test_b.cases)).to_dict()

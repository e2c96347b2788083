"""When a run may end before its last iteration (issue 28; the paper always runs them all).

A run that stopped improving spends the rest of its iterations on children that change nothing:
on the offline sample a 150-iteration run found its champion at iteration 11 and made 139 more
children. A stop condition is fed every finished iteration's event, in the order they finish
(the loop's, and a resumed run's replay of its lineage), and says before each new iteration
whether the run should end there. The loop then chooses and tests the champion as usual.

What counts as progress: a child significantly better, item by item on the static set (95%
paired interval, its event's `progress_evidence`), than the run's reference -- the best seed at
first, then the best program as of the last gain (the loop keeps it: Evolution.reference_id).
Measured against that fixed reference, small steps that are each within the noise add up to a
gain once together they are significant (on the sample, +0.04 a step on 25 items never is
alone). A child only better than a weak parent (the console's GAIN) does not move the run on.

A gain over the reference is one child's step, and the reference moves only with such a step. Slow
gains -- a run whose best program climbs one static item at a time, none of its steps significant
over the reference -- also end a run, though its best program today may be significantly better
than its best of N iterations ago. So patience also compares those two and waits while today's
best is significantly better (issue 44).

Which program is "the best", and on what evidence the two are compared. The best is the program
the confirmation would start its race from: the best pessimistic estimate of
mstar/final/race_entry.py (its static and rotating items, or its parent's estimate plus their
paired static difference: a no-change child inherits what its parent's rotating batches showed).
Not the best static score: that is the maximum of many noisy 25-item scores, and a lucky program
stays on top of the static ranking while the rotating items show a later one climbing past it --
compared with itself, a climb never shows. The two are significantly apart when the paired 95%
interval on the items both were scored on excludes zero, or when their estimates, each on all its
own evidence, differ by more than CLIMB_Z standard errors of the difference counted as if they
were independent (which overstates it: they share the static items). The second test is needed
with `--rotating fresh`, where each iteration draws another batch and two programs share few
rotating items. With two tests the run waits a little more often than 5% of the time when nothing
climbed: extra iterations, the cheaper error for a rule whose other error is a lost champion.

What no rule of this form sees (docs/confirmation.md, "Patience"): with `--rotating reuse` the
only evidence is the static set, every estimate rests on the same items, and the best estimate is
the best static score. On the sample with MiniLM embeddings the full run's champion comes at
iteration 49, two steps after the last gain (15), neither significant: at iteration 40 the best
(iter_019) against the best of 25 iterations ago (iter_015) is +0.056 [-0.059, +0.191], and from
iteration 44 on the best of 25 iterations ago is iter_019, the best now.

    Never      the paper: every iteration runs (default)
    Patience   stops after `n` finished iterations in a row without such a gain, unless the best
               program now is significantly better than the best of `n` iterations ago (`--patience N`)

Imports upward: mstar.final.stats, for its paired bootstrap (a pure function of two score lists;
it lives with the other paired statistics of a run's end), and mstar.final.race_entry, for each
program's estimate (pure functions of the run's evidence; the confirmation's racers use them too).
"""
from __future__ import annotations

import math
from typing import Protocol

from mstar.final import race_entry
from mstar.final.stats import paired_bootstrap

CLIMB_Z = 1.96     # the estimates' difference at 95%, two-sided: as the paired interval


def is_gain(ev) -> bool:
    """Did this iteration's child significantly beat the run's reference program?"""
    e = getattr(ev, "progress_evidence", None) or {}
    return bool(getattr(ev, "added_child", False) and e.get("significant") and e.get("mean", 0) > 0)


class StopCondition(Protocol):
    """Receives each finished iteration's event; `reason()` says why the run should stop now."""

    def observe(self, ev) -> None: ...

    def reason(self) -> str | None: ...


class Stalled:
    """Counts finished iterations since the last gain (the progress line shows it)."""

    def __init__(self) -> None:
        self.since_gain = 0
        self.last_gain: int | None = None

    def observe(self, ev) -> None:
        if is_gain(ev):
            self.since_gain, self.last_gain = 0, ev.iteration
        else:
            self.since_gain += 1


class Never(Stalled):
    def reason(self) -> str | None:
        return None


class Patience(Stalled):
    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"patience must be 1 or more iterations, got {n}")
        super().__init__()
        self.n = n
        self.best_at: list[str | None] = []      # the best program after each finished iteration
        self._best: tuple[str | None, float] = (None, float("-inf"))   # by static score (no evidence bound)
        self._evo = None
        self._static: dict[str, dict] = {}       # program id -> its static scores (they never change)

    def bind(self, evo) -> None:
        """Where the programs' evidence is (loop.Evolution: the pool, static results, rotating scores)."""
        self._evo = evo

    def _evidence(self, pid: str) -> dict:
        """Query id -> score: the program's static cases, then every rotating case it was scored on."""
        if pid not in self._static:
            res = self._evo.static_result(pid)
            self._static[pid] = {c.query_id: float(c.score) for c in (res.cases if res else []) if c.scored}
        out = dict(self._static[pid])
        rotating = getattr(self._evo, "rotating_scores", None)
        for q, v in (rotating(pid) if rotating else {}).items():
            out.setdefault(q, float(v))
        return out

    def _estimates(self) -> tuple[list, dict[str, race_entry.Estimate]]:
        entries = list(self._evo.pool.entries)
        evidence = {e.program_id: self._evidence(e.program_id) for e in entries}
        static_ids = set().union(*(self._static.get(e.program_id, {}) for e in entries))
        return entries, race_entry.estimates(entries, evidence, static_ids)

    def _leader(self) -> str | None:
        """The program the confirmation would start its race from now: the best pessimistic
        estimate on all its evidence (race_entry.entrants' leader; equal: the earlier program)."""
        entries, est = self._estimates()
        if not est:
            return None
        index = {e.program_id: n for n, e in enumerate(entries)}
        return max(est, key=lambda p: (est[p].low(), -index[p]))

    def observe(self, ev) -> None:
        super().observe(ev)
        if self._evo is not None and getattr(self._evo, "pool", None) is not None:
            self.best_at.append(self._leader())
            return
        pid, score = self._best
        if pid is None:          # before any child joins, the best program is the reference (the best seed)
            pid = getattr(ev, "reference_id", None) or ev.parent_id
        new, best = getattr(ev, "static_score", None), getattr(ev, "best_static_score", None)
        # The child is the pool's best now when it reaches the best score and beats the one before
        # (equal scores keep the earlier program, as Pool.best does).
        if getattr(ev, "added_child", False) and new is not None and new > score and (best is None or new >= best):
            pid = ev.program_id
        score = best if best is not None else max(score, new if new is not None else score)
        self._best = (pid, score)
        self.best_at.append(pid)

    def climbing(self) -> dict | None:
        """The best program now against the best of `n` iterations ago when it is significantly
        better on the evidence both have -- paired on the items both were scored on, or their
        estimates (each on all its evidence) -- None: it is not, or there is no evidence."""
        if self._evo is None or len(self.best_at) <= self.n:
            return None
        now, then = self.best_at[-1], self.best_at[-1 - self.n]
        if now is None or then is None or now == then:
            return None
        a, b = self._evidence(now), self._evidence(then)
        shared = [q for q in a if q in b]
        if len(shared) >= 2:
            diff = paired_bootstrap([a[q] for q in shared], [b[q] for q in shared])
            if diff.low > 0:
                return {"now": now, "then": then, "basis": "paired", **diff.to_dict()}
        if getattr(self._evo, "pool", None) is None:
            return None
        est = self._estimates()[1]
        x, y = est.get(now), est.get(then)
        if x is None or y is None:
            return None
        se = math.sqrt(x.se ** 2 + y.se ** 2)
        low = x.mean - y.mean - CLIMB_Z * se
        if math.isfinite(se) and low > 0:
            return {"now": now, "then": then, "basis": "estimates", "mean": x.mean - y.mean, "low": low,
                    "high": x.mean - y.mean + CLIMB_Z * se}
        return None

    def reason(self) -> str | None:
        if self.since_gain < self.n or self.climbing() is not None:
            return None
        since = f"the last at iteration {self.last_gain}" if self.last_gain else "none since the seeds"
        return (f"--patience {self.n}: no significant gain in {self.since_gain} iterations ({since}), "
                f"and the best program is not significantly better than the best of {self.n} iterations ago")


def make_stopping(patience: int | None) -> StopCondition:
    return Patience(patience) if patience else Never()

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
than its best of N iterations ago. So patience counts two more kinds of progress (issue 44):

    the best climbs     the best program now is significantly better than the best of `n`
                        iterations ago: the run waits while it is
    a line catches up   a child significantly better than its own parent (the paired static
                        interval of its event's `evidence`) that is not significantly behind the
                        best program now: it restarts the count, as a gain over the reference does

Why both. The first sees a climb that has already happened; it cannot see one that is still on
its way. With `--rotating reuse` the static set is all the evidence there is, every estimate
rests on the same 25 items, and the best of N iterations ago becomes the best now N iterations
after the best last moved: from then on the first signal is silent whatever comes next. On the
sample with MiniLM embeddings (docs/confirmation.md, "Patience") the best moves at 15 and 19,
each step within the noise, and the full run's champion comes at 49 -- so a rule on the first
signal alone stops by 44, before it exists. What the run does show meanwhile is programs that
are still being improved near the top: iter_037, significantly better than its parent iter_018
and level with the best (-0.036 [-0.171, +0.071] against iter_019), keeps a patience of 25 going
to 62, and iter_049 is found. A significant step far below the best (a weak parent's child, the
console's GAIN) is no sign that the best may move, and does not count.

The price: a step that catches up but then goes nowhere buys N more iterations. On the sample
with hashing embeddings two such steps (iter_027 and iter_038, level with iter_011) carry the
run from 36 to 63 iterations for the same champion, iter_011 -- 49% of the full run's tokens
instead of 29% -- against a lost champion (test 0.856 against 0.878) on the MiniLM lineage, where
the run now stops at 62 with the full run's champion. Extra iterations are the cheaper error.

Which program is "the best", and on what evidence two programs are compared. The best is the
program the confirmation would start its race from: the best pessimistic estimate of
mstar/final/race_entry.py (its static and rotating items, or its parent's estimate plus their
paired static difference: a no-change child inherits what its parent's rotating batches showed).
Not the best static score: that is the maximum of many noisy 25-item scores, and a lucky program
stays on top of the static ranking while the rotating items show a later one climbing past it --
compared with itself, a climb never shows. One program is significantly above another when the
paired 95% interval on the items both were scored on excludes zero, or when their estimates,
each on all its own evidence, differ by more than CLIMB_Z standard errors of the difference
counted as if they were independent (which overstates it: they share the static items). The
second test is needed with `--rotating fresh`, where each iteration draws another batch and two
programs share few rotating items. The same test says "the best climbed" and "the child is
behind the best": with two tests the run waits a little more often than 5% of the time when
nothing climbed (extra iterations), and passes over a step a little more often than 5% of the
time when the child is level (an earlier stop, which keeps every program already made).

Without the run's evidence (no `bind`: the best is then the best static score, and no program's
items are known) only gains over the reference count.

    Never      the paper: every iteration runs (default)
    Patience   stops after `n` finished iterations in a row without a gain over the reference or
               a line catching up, unless the best program now is significantly better than the
               best of `n` iterations ago (`--patience N`)

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


def stepped_up(ev) -> bool:
    """Is this iteration's child significantly better than its own parent (paired, static set)?"""
    e = getattr(ev, "evidence", None) or {}
    return bool(getattr(ev, "added_child", False) and e.get("significant") and e.get("mean", 0) > 0)


class Patience(Stalled):
    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"patience must be 1 or more iterations, got {n}")
        super().__init__()
        self.n = n
        self.quiet = 0                           # finished iterations since the last progress of either kind
        self.last_step: dict | None = None       # the last line catching up: iteration, child, best, difference
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

    def _bound(self) -> bool:
        return self._evo is not None and getattr(self._evo, "pool", None) is not None

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

    def above(self, a: str, b: str) -> dict | None:
        """Program `a` significantly better than `b` -- paired on the items both were scored on, or
        their estimates (each on all its evidence) -- as {basis, mean, low, high}; None: it is not,
        or there is no evidence."""
        x, y = self._evidence(a), self._evidence(b)
        shared = [q for q in x if q in y]
        if len(shared) >= 2:
            diff = paired_bootstrap([x[q] for q in shared], [y[q] for q in shared])
            if diff.low > 0:
                return {"basis": "paired", **diff.to_dict()}
        if not self._bound():
            return None
        est = self._estimates()[1]
        ea, eb = est.get(a), est.get(b)
        if ea is None or eb is None:
            return None
        se = math.sqrt(ea.se ** 2 + eb.se ** 2)
        mean = ea.mean - eb.mean
        if math.isfinite(se) and mean - CLIMB_Z * se > 0:
            return {"basis": "estimates", "mean": mean, "low": mean - CLIMB_Z * se, "high": mean + CLIMB_Z * se}
        return None

    def observe(self, ev) -> None:
        super().observe(ev)
        self.quiet = 0 if is_gain(ev) else self.quiet + 1
        if self._bound():
            best = self._leader()
            self.best_at.append(best)
            # A line catching up: a significant step over its parent, and the best program now is
            # not significantly above the child (the child may be the best itself).
            if not is_gain(ev) and stepped_up(ev) and best is not None and \
                    (best == ev.program_id or self.above(best, ev.program_id) is None):
                self.quiet = 0
                self.last_step = {"iteration": ev.iteration, "child": ev.program_id, "parent": ev.parent_id,
                                  "best": best}
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
        better on the evidence both have (Patience.above); None: it is not, or there is no evidence."""
        if self._evo is None or len(self.best_at) <= self.n:
            return None
        now, then = self.best_at[-1], self.best_at[-1 - self.n]
        if now is None or then is None or now == then:
            return None
        diff = self.above(now, then)
        return {"now": now, "then": then, **diff} if diff else None

    def state(self) -> dict:
        """What the progress line shows: the count the run stops on, and whether the best still climbs."""
        return {"quiet": self.quiet, "climbing": self.quiet >= self.n and self.climbing() is not None}

    def reason(self) -> str | None:
        if self.quiet < self.n or self.climbing() is not None:
            return None
        since = f"the last at iteration {self.last_gain}" if self.last_gain else "none since the seeds"
        step = (f", no child significantly above its parent and level with the best in {self.quiet} "
                f"(the last {self.last_step['child']} at iteration {self.last_step['iteration']})"
                if self.last_step else "")
        return (f"--patience {self.n}: no significant gain in {self.since_gain} iterations ({since}){step}, "
                f"and the best program is not significantly better than the best of {self.n} iterations ago")


def make_stopping(patience: int | None) -> StopCondition:
    return Patience(patience) if patience else Never()

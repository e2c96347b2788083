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
than its best of N iterations ago. So patience also compares those two, paired on the evidence
both have (their static items, and the rotating items both were scored on), and waits while
today's best is significantly better (issue 44).

    Never      the paper: every iteration runs (default)
    Patience   stops after `n` finished iterations in a row without such a gain, unless the best
               program now is significantly better than the best of `n` iterations ago (`--patience N`)

Imports upward: mstar.final.stats, for its paired bootstrap (a pure function of two score lists;
it lives with the other paired statistics of a run's end).
"""
from __future__ import annotations

from typing import Callable, Protocol

from mstar.final.stats import paired_bootstrap


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
        self._best: tuple[str | None, float] = (None, float("-inf"))
        self._evidence: Callable[[str], dict] | None = None

    def bind(self, evo) -> None:
        """Where the programs' evidence is (loop.Evolution: static results, rotating scores)."""
        def evidence(pid: str) -> dict:
            res = evo.static_result(pid)
            out = {c.query_id: float(c.score) for c in (res.cases if res else []) if c.scored}
            rotating = getattr(evo, "rotating_scores", None)
            for q, v in (rotating(pid) if rotating else {}).items():
                out.setdefault(q, float(v))
            return out
        self._evidence = evidence

    def observe(self, ev) -> None:
        super().observe(ev)
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
        """The best program now against the best of `n` iterations ago, paired on the items both
        were scored on, when it is significantly better (None: it is not, or no evidence)."""
        if self._evidence is None or len(self.best_at) <= self.n:
            return None
        now, then = self.best_at[-1], self.best_at[-1 - self.n]
        if now is None or then is None or now == then:
            return None
        a, b = self._evidence(now), self._evidence(then)
        shared = [q for q in a if q in b]
        if len(shared) < 2:
            return None
        diff = paired_bootstrap([a[q] for q in shared], [b[q] for q in shared])
        return {"now": now, "then": then, **diff.to_dict()} if diff.low > 0 else None

    def reason(self) -> str | None:
        if self.since_gain < self.n or self.climbing() is not None:
            return None
        since = f"the last at iteration {self.last_gain}" if self.last_gain else "none since the seeds"
        return (f"--patience {self.n}: no significant gain in {self.since_gain} iterations ({since}), "
                f"and the best program is not significantly better than the best of {self.n} iterations ago")


def make_stopping(patience: int | None) -> StopCondition:
    return Patience(patience) if patience else Never()

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

    Never      the paper: every iteration runs (default)
    Patience   stops after `n` finished iterations in a row without such a gain (`--patience N`)
"""
from __future__ import annotations

from typing import Protocol


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

    def reason(self) -> str | None:
        if self.since_gain < self.n:
            return None
        since = f"the last at iteration {self.last_gain}" if self.last_gain else "none since the seeds"
        return f"--patience {self.n}: no significant gain in {self.since_gain} iterations ({since})"


def make_stopping(patience: int | None) -> StopCondition:
    return Patience(patience) if patience else Never()

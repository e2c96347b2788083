"""The decisions of the algorithm, one small Protocol each, passed into the loop.

    selection.py       which parent to mutate        ParentSelector: softmax (paper), max, latest
    failures.py        which failed cases to show    FailureSampler: Efraimidis-Spirakis, weight 1 - score
    references.py      which other programs to show  ReferencePicker: best above and worst below the parent
    acceptance.py      whether a child enters the pool  AcceptancePolicy: always (paper)
    failure_memory.py  what was tried on a parent and failed, told to the next reflection
    stopping.py        whether the run ends early        StopCondition: never (paper), patience

`Strategies` bundles one of each; `Strategies.from_config(cfg.evolution)` builds the run's. The
loop (mstar/loop.py) asks them and is the only place that changes the pool: a strategy proposes,
the loop decides. An ablation swaps one object here, not an `if` inside the loop.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mstar.strategies.acceptance import AcceptAll, AcceptancePolicy
from mstar.strategies.failure_memory import FailureMemory
from mstar.strategies.failures import FailureSampler, WeightedFailures
from mstar.strategies.references import BestAndWorst, ReferencePicker
from mstar.strategies.selection import SELECTIONS, ParentSelector, make_selector
from mstar.strategies.stopping import Never, Patience, StopCondition, make_stopping


@dataclass
class Strategies:
    selection: ParentSelector
    failures: FailureSampler = field(default_factory=WeightedFailures)
    references: ReferencePicker = field(default_factory=BestAndWorst)
    acceptance: AcceptancePolicy = field(default_factory=AcceptAll)
    stopping: StopCondition = field(default_factory=Never)

    @classmethod
    def from_config(cls, evolution) -> "Strategies":
        """The run's strategies from its EvolutionConfig (selection rule and its temperature,
        the stop condition)."""
        return cls(make_selector(getattr(evolution, "selection", "softmax"), evolution.tau),
                   stopping=make_stopping(getattr(evolution, "patience", None)))


__all__ = ["AcceptAll", "AcceptancePolicy", "BestAndWorst", "FailureMemory", "FailureSampler", "Never",
           "ParentSelector", "Patience", "ReferencePicker", "SELECTIONS", "StopCondition", "Strategies",
           "WeightedFailures", "make_selector", "make_stopping"]

"""GEPA and GEPA + Vector Search (paper Table 1, Tables 10-12): the prompt-optimising baselines.

As in the paper's official code, each is a run of the real `gepa` library (`gepa.api.optimize`
with a GEPAAdapter) that optimises one text -- the program's ALWAYS_ON_KNOWLEDGE -- while
everything else stays frozen from a seed: No Memory for "GEPA", Vector Search for
"GEPA + Vector Search". The same split as an evolution run (static set = GEPA's validation set,
the rotating pool = its training set, the training episodes written into memory), the same
scorer (mstar.evaluation.evaluate with the task's metric) and models (the task role answers, the
reflector role is GEPA's reflection model), and a budget of metric calls (200 by default).

    adapter.py    MemoryProgramAdapter: gepa's GEPAAdapter over mstar's evaluator and sandbox
    optimise.py   optimise(): one GEPA run -> the optimised program, its constant and score history

`gepa` is an optional extra: pip install 'mstar-evolve[gepa]'.
"""
from __future__ import annotations

import importlib.util

INSTALL_HINT = "pip install 'mstar-evolve[gepa]'"
# Row name -> the seed whose ALWAYS_ON_KNOWLEDGE GEPA optimises (everything else frozen).
GEPA_SEEDS = {"gepa": "no_memory", "gepa_vector_search": "vector_search"}
LABELS = {"gepa": "GEPA", "gepa_vector_search": "GEPA + Vector Search"}
COMPONENT = "ALWAYS_ON_KNOWLEDGE"
DEFAULT_BUDGET = 200           # metric calls: one call = one query scored
DEFAULT_MINIBATCH = 3          # gepa's default reflection minibatch


def available() -> bool:
    """True when the `gepa` package can be imported."""
    return importlib.util.find_spec("gepa") is not None


def missing_note() -> str:
    """The one line `mstar baselines` prints when the GEPA rows cannot run."""
    return f"GEPA rows skipped: the gepa package is not installed ({INSTALL_HINT})"

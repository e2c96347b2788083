"""A run freezes the heap start-up built (mstar/loop.py: the collector's full passes no longer
walk it and hold the GIL meanwhile) and unfreezes it when it ends, so that a process that goes
on -- a notebook, this test session -- collects as before."""
from __future__ import annotations

import gc

from mstar.cli import main
from mstar.loop import Evolution

SMALL = ["--task", "sample", "--size", "0.3", "--static-size", "6", "--confirm-size", "0", "--quiet",
         "--iterations", "1"]


def test_the_heap_is_frozen_while_a_run_evaluates_and_unfrozen_after(tmp_path, monkeypatch):
    seen = []
    original = Evolution.evaluate_seeds

    def evaluate_seeds(self):
        seen.append(gc.get_freeze_count())
        return original(self)
    monkeypatch.setattr(Evolution, "evaluate_seeds", evaluate_seeds)
    before = gc.get_freeze_count()
    assert main(["evolve", *SMALL, "--out", str(tmp_path / "run")]) == 0
    assert seen and seen[0] > before          # start-up's objects were frozen for the run
    assert gc.get_freeze_count() == before    # and handed back to the collector at its end

"""Experiment trackers: listeners on a run's typed lineage events, never code inside the loop.

  module             the idea                                              the rule it keeps
  base.py            what a tracker logs: params from the config, metrics  no secrets (the config holds only the
                     per event, the champion and lineage as artifacts       name of a key's variable); a tracker
                                                                            that fails warns, the run goes on
  mlflow_tracker.py  MLflow (the [mlflow] extra): a local SQLite store     MLFLOW_TRACKING_URI, when set, wins
                     in ./mlruns/
  wandb_tracker.py   Weights & Biases (the [wandb] extra)                  offline unless WANDB_MODE says otherwise

`mstar evolve --track mlflow,wandb` or `mstar.evolve(..., track="mlflow")`. A tracker gets
`start(config, store)` once the run folder exists, `on_event(event)` after each lineage event is
written (mstar/library/launch.py guards it), and `finish(store, summary)` when the run ends or stops.
"""
from __future__ import annotations

from mstar.trackers.base import Tracker, TrackerError

__all__ = ["Tracker", "TrackerError", "make_tracker"]


def make_tracker(name: str) -> Tracker:
    """A tracker by name; TrackerError (with the install line) when its package is missing."""
    if name == "mlflow":
        from mstar.trackers.mlflow_tracker import MlflowTracker
        return MlflowTracker()
    if name == "wandb":
        from mstar.trackers.wandb_tracker import WandbTracker
        return WandbTracker()
    raise TrackerError(f"unknown tracker {name!r}; known: mlflow, wandb")

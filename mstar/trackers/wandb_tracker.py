"""The run in Weights & Biases (the [wandb] extra): one W&B run per mstar run, project
"mstar-<task>", its files under the run folder (<run>/wandb/).

Offline by default -- nothing leaves the machine and no account is needed; `wandb sync` uploads
later. WANDB_MODE=online (with an API key in the environment, as W&B reads it) logs live.
Metrics carry the step as "step" (iterations may end out of order with --parallel, and W&B wants
its own step to grow).

The offline file (<run>/wandb/offline-run-*/run-*.wandb) is written by W&B's service process,
which closes it a moment after `run.finish()` returns; W&B's exit hook waits for it, so it is
complete once the Python process has ended (or after `wandb.teardown()`).
"""
from __future__ import annotations

import os

from mstar.trackers.base import ARTIFACTS, TrackerError, event_metrics, flat_params, need


class WandbTracker:
    name = "wandb"

    def __init__(self) -> None:
        self._wandb = need("wandb", "wandb")
        self.run = None
        self.iterations = 0

    def start(self, config, store) -> None:
        try:
            self.run = self._wandb.init(project=f"mstar-{config.task}", name=config.name, dir=str(store.root),
                                        mode=os.environ.get("WANDB_MODE", "offline"), config=flat_params(config),
                                        reinit="create_new")
        except Exception as exc:   # W&B's own errors: the run goes on without it
            raise TrackerError(f"wandb: {exc}") from exc
        self.run.define_metric("step")
        self.run.define_metric("*", step_metric="step")
        self.iterations = config.evolution.iterations

    def on_event(self, event) -> None:
        if self.run is None:
            return
        step, metrics = event_metrics(event, self.iterations)
        if metrics:
            self.run.log({"step": step, **metrics})

    def finish(self, store, summary) -> None:
        if self.run is None:
            return
        if summary is not None:
            self.run.summary.update({k: v for k, v in (("champion", summary.best_id),
                                                       ("test_score", summary.test_score),
                                                       ("best_static", summary.best_static)) if v is not None})
        art = self._wandb.Artifact(f"{store.root.name}-files", type="mstar-run")
        for rel in ARTIFACTS:
            if (store.root / rel).exists():
                art.add_file(str(store.root / rel))
        self.run.log_artifact(art)
        self.run.finish(exit_code=0 if summary is not None and summary.stop_reason is None else 1)
        self.run = None

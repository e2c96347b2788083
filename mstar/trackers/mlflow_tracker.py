"""The run in MLflow (the [mlflow] extra, mlflow-skinny): one MLflow run per mstar run, in the
experiment "mstar-<task>", through `MlflowClient` (no global active run: a notebook or a script
that tracks its own runs is not disturbed).

Where: MLFLOW_TRACKING_URI when it is set (a server, a database, a folder), else a SQLite store in
./mlruns/ beside the command (mlflow.db, the artifacts in mlruns/artifacts/): MLflow 3 keeps its
file store for old setups only. Look at it with
`mlflow ui --backend-store-uri sqlite:///mlruns/mlflow.db` (the full `mlflow` package).
"""
from __future__ import annotations

import os
from pathlib import Path

from mstar.trackers.base import ARTIFACTS, TrackerError, event_metrics, flat_params, need


class MlflowTracker:
    name = "mlflow"

    def __init__(self) -> None:
        self._tracking = need("mlflow.tracking", "mlflow")
        self.client = None
        self.run_id: str | None = None
        self.iterations = 0

    def start(self, config, store) -> None:
        uri, artifacts = os.environ.get("MLFLOW_TRACKING_URI"), None
        if not uri:
            folder = Path("mlruns").resolve()
            folder.mkdir(parents=True, exist_ok=True)
            uri, artifacts = f"sqlite:///{folder / 'mlflow.db'}", (folder / "artifacts").as_uri()
        try:
            self.client = self._tracking.MlflowClient(tracking_uri=uri)
            name = f"mstar-{config.task}"
            exp = self.client.get_experiment_by_name(name)
            exp_id = exp.experiment_id if exp is not None else self.client.create_experiment(
                name, artifact_location=None if artifacts is None else f"{artifacts}/{name}")
            run = self.client.create_run(exp_id, run_name=config.name,
                                         tags={"mstar.run_folder": str(store.root), "mstar.task": config.task})
        except Exception as exc:   # a server that refuses us: the run must still be able to go on
            raise TrackerError(f"mlflow at {uri}: {exc}") from exc
        self.run_id = run.info.run_id
        self.iterations = config.evolution.iterations
        params = flat_params(config)
        from mlflow.entities import Param
        items = [Param(k, v) for k, v in sorted(params.items())]
        for i in range(0, len(items), 100):   # the tracking API takes at most 100 params a batch
            self.client.log_batch(self.run_id, params=items[i:i + 100])

    def on_event(self, event) -> None:
        if self.run_id is None:
            return
        step, metrics = event_metrics(event, self.iterations)
        for key, value in metrics.items():
            self.client.log_metric(self.run_id, key, float(value), step=step)

    def finish(self, store, summary) -> None:
        if self.run_id is None:
            return
        for rel in ARTIFACTS:
            if (store.root / rel).exists():
                self.client.log_artifact(self.run_id, str(store.root / rel))
        if summary is not None and summary.best_id:
            self.client.set_tag(self.run_id, "mstar.champion", summary.best_id)
        finished = summary is not None and summary.stop_reason is None
        self.client.set_terminated(self.run_id, status="FINISHED" if finished else "KILLED")

"""What every tracker logs, whatever it logs to: the run's parameters, one row of metrics per
lineage event, and at the end the champion's program and the lineage as files.

The metrics of an event (`event_metrics`), keyed by step (0 for the seeds, the iteration for an
iteration, iterations + 1 for the race and the test):
    seed_static            a seed's static score (one per seed, step 0)
    child_static, delta    an iteration's child and its change over the parent (when a child joined)
    best_static            the pool's best static score after the iteration
    tokens, calls          what the step spent (prompt + completion tokens, LLM calls)
    confirmed_items        validation items the confirmation's race bought
    test_score, best_seed_test, test_gain   the champion on the held-out test, the best seed, the gain
"""
from __future__ import annotations

import importlib
from dataclasses import asdict, is_dataclass
from typing import Any, Protocol

from mstar.run import events as ev_types

ARTIFACTS = ("best_program.py", "lineage.jsonl", "summary.json", "config.json")


class TrackerError(RuntimeError):
    """A tracker that cannot be used: its package is missing, or its store refused us."""


class Tracker(Protocol):
    name: str

    def start(self, config, store) -> None: ...

    def on_event(self, event) -> None: ...

    def finish(self, store, summary) -> None: ...


def need(module: str, extra: str):
    """Import a tracker's package, or TrackerError saying how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise TrackerError(f"--track {extra}: the {module} package is not installed; install the extra: "
                           f"pip install 'mstar-evolve[{extra}]' (in a checkout: pip install -e \".[{extra}]\")") from None


def flat_params(config) -> dict[str, str]:
    """The run's configuration as flat "section.key" -> text pairs (lists joined)."""
    data = asdict(config) if is_dataclass(config) else dict(config)
    out: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        elif isinstance(value, (list, tuple)):
            out[prefix] = ",".join(map(str, value))
        else:
            out[prefix] = str(value)
    walk("", data)
    return {k: v[:500] for k, v in out.items()}


def event_metrics(event, iterations: int) -> tuple[int, dict[str, float]]:
    """(step, metrics) of one lineage event; empty metrics for events that carry none."""
    spent = _spent(getattr(event, "llm", None) or {})
    if isinstance(event, ev_types.SeedEvent):
        return 0, {"seed_static": event.static_score, **spent}
    if isinstance(event, ev_types.IterationEvent):
        out = {**spent}
        if event.program_id is not None and event.static_score is not None:
            out["child_static"] = event.static_score
        if event.delta is not None:
            out["delta"] = event.delta
        if event.best_static_score is not None:
            out["best_static"] = event.best_static_score
        return event.iteration, out
    if isinstance(event, ev_types.ConfirmationEvent):
        return iterations + 1, {"confirmed_items": float(event.items), **spent}
    if isinstance(event, ev_types.TestEvent):
        out = {**spent}
        if event.test_score is not None:
            out["test_score"] = event.test_score
        if event.best_seed_test_score is not None:
            out["best_seed_test"] = event.best_seed_test_score
        if event.gain:
            out["test_gain"] = float(event.gain.get("mean", 0.0))
        return iterations + 1, out
    return 0, {}


def _spent(llm: dict) -> dict[str, float]:
    tokens = int(llm.get("prompt_tokens") or 0) + int(llm.get("completion_tokens") or 0)
    out = {"tokens": float(tokens)} if tokens else {}
    if llm.get("calls"):
        out["calls"] = float(llm["calls"])
    return out

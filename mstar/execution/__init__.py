"""Where evaluations run: this machine, or a Ray cluster.

The loop hands an `EvalJob` (a program's source and which queries to score it on) to an
`Executor` and gets an EvalResult back; it never starts a sandbox itself. Two executors:

    local.py        on this machine: mstar.evaluation.evaluate with a SessionCache, so a parent's
                    knowledge base is kept between its evaluations
    ray_cluster.py  on a Ray cluster (the [ray] extra): each Ray worker process has its own sandbox
                    fork server; the LLM calls an evaluation makes are returned with its result and
                    entered into the driver's ledger, so spend and budgets are counted once, on the
                    driver; an evaluation whose node dies is retried on another (Ray task retries)
    ray_gate.py     one gate for every LLM call a cluster's evaluations make, on the driver
"""
from __future__ import annotations

from mstar.execution.jobs import EXECUTORS, EvalJob, Executor, ExecutorError

__all__ = ["EXECUTORS", "EvalJob", "Executor", "ExecutorError", "make_executor"]


def make_executor(cfg, task, train_indices: list[int], router) -> Executor:
    """The executor the run's configuration names (evolution.executor, evolution.ray_address)."""
    if cfg.evolution.executor == "ray":
        from mstar.execution.ray_cluster import RayExecutor
        return RayExecutor(task, train_indices, router, cfg, cfg.evolution.ray_address)
    if cfg.evolution.executor != "local":
        raise ExecutorError(f"unknown executor {cfg.evolution.executor!r}; use {' or '.join(EXECUTORS)}")
    from mstar.execution.local import LocalExecutor
    return LocalExecutor(task, train_indices, router, cfg)

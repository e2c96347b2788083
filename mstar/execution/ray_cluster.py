"""Evaluations on a Ray cluster (`--executor ray`, the optional [ray] extra).

The driver -- the `mstar evolve` process -- keeps the pool, the reflector, the ledger and the
budget. Each evaluation is a Ray task: it runs on some worker process of the cluster, which
builds its own LLM router from the run's LLM configuration (with no ledger file of its own) and
starts sandboxes from its own fork server (one per Ray worker process, made on first use, as on
this machine). The calls the evaluation made come back with its result and are entered into the
driver's ledger, so llm_usage.jsonl, the spend lines and the budgets count every call once.

A node that dies mid-evaluation costs that evaluation, not the run: Ray runs the task again on
another worker (`max_retries`). An endpoint failure raised on a worker (EndpointOutage,
FatalLLMError) reaches the driver as itself and stops the run as it would locally.

API keys: the values of the key variables the LLM configuration names are handed to the
workers in the task's runtime environment (never in the run folder or the config). A worker's
knowledge bases are kept between evaluations that land on it (SessionCache per worker process).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any

from mstar.config import ROLES, RunConfig
from mstar.evaluation import EvalResult
from mstar.execution.jobs import EvalJob, ExecutorError
from mstar.llm import scope as llm_scope
from mstar.llm.router import LLMRouter
from mstar.llm.types import UsageRecord
from mstar.tasks import Task

MAX_RETRIES = 3            # Ray re-runs an evaluation whose worker or node died this many times
_WORKER_STATE: dict[str, Any] = {}   # per Ray worker process: its router and kept sessions


def require_ray():
    try:
        import ray
    except ImportError:
        raise ExecutorError("--executor ray needs Ray: pip install -e \".[ray]\" (or pip install ray)") from None
    return ray


def connect(address: str | None) -> None:
    """Join the cluster at `address` ("auto", "HOST:PORT") or start a local Ray (None); an
    unreachable cluster is one ExecutorError line, before anything is written."""
    ray = require_ray()
    if ray.is_initialized():
        return
    _check_reachable(address)
    try:
        ray.init(address=address, ignore_reinit_error=True, include_dashboard=False,
                 log_to_driver=False, logging_level="ERROR")
    except Exception as exc:  # noqa: BLE001 -- ConnectionError, RuntimeError, ...: one line for the user
        raise ExecutorError(f"cannot reach the Ray cluster at {address or 'a new local Ray'}: "
                            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None


def _check_reachable(address: str | None, timeout_s: float = 5.0) -> None:
    """Ray's own client retries an unreachable address for minutes; a plain TCP connect tells in
    seconds whether anything listens there."""
    import socket

    if not address or address == "auto":
        return
    hostport = address.split("://", 1)[-1]
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise ExecutorError(f"--ray-address {address!r}: give auto or HOST:PORT")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ExecutorError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}") from None


def _evaluate_remote(task: Task, train_indices: list[int], job: EvalJob, cfg_dict: dict,
                     gate=None) -> tuple[dict, list[dict]]:
    """Runs on a Ray worker: the job with the worker's own router (its calls through the run's
    gate, mstar/execution/ray_gate.py, when one is given); its usage comes back."""
    from mstar.evaluation import SessionCache
    from mstar.execution.local import run_job
    from mstar.execution.ray_gate import GatedRouter

    cfg = RunConfig.from_dict(cfg_dict)
    state = _WORKER_STATE.setdefault(cfg.name, {})
    if "router" not in state:
        state["router"] = GatedRouter.from_config(cfg.llm, seed=cfg.evolution.seed) if gate is not None \
            else LLMRouter.from_config(cfg.llm, seed=cfg.evolution.seed)
        state["sessions"] = SessionCache(cfg.evolution.keep_sessions)
    if gate is not None:
        state["router"].through(gate)
    router: LLMRouter = state["router"]
    mark = router.mark()
    train = [task.episodes[i] for i in train_indices]
    result = run_job(job, task, train, router, cfg, state["sessions"])
    return result.to_dict(), [r.to_dict() for r in router.ledger.snapshot(mark)]


class RayExecutor:
    def __init__(self, task: Task, train_indices: list[int], router: LLMRouter, cfg: RunConfig,
                 address: str | None = None) -> None:
        ray = require_ray()
        connect(address)
        self.router, self.cfg = router, cfg
        self._task_ref = ray.put(task)
        self._train = list(train_indices)
        # The run's configuration without anything that only the driver may hold.
        cache = os.path.abspath(cfg.llm.cache_dir) if cfg.llm.cache_dir else None  # same file on this machine
        llm = dataclasses.replace(cfg.llm, max_usd=None, max_tokens=None, cache_dir=cache)
        self._cfg_dict = dataclasses.replace(cfg, llm=llm).to_dict()
        env = {cfg.llm.role(r).api_key_env: os.environ[cfg.llm.role(r).api_key_env] for r in ROLES
               if cfg.llm.role(r).backend == "openai" and cfg.llm.role(r).api_key_env in os.environ}
        options: dict[str, Any] = {"max_retries": MAX_RETRIES, "num_cpus": 0.5}
        if env:
            options["runtime_env"] = {"env_vars": env}
        self._remote = ray.remote(_evaluate_remote).options(**options)
        # One gate for the cluster's LLM calls (ray_gate.py): the run's cap, less what the driver's
        # reflector calls may take (one per iteration in flight), and one limiter per endpoint.
        driver_share = max(1, min(cfg.evolution.parallel, cfg.llm.max_in_flight - 1)) \
            if cfg.llm.max_in_flight > 1 else 1
        gate_cap = max(1, cfg.llm.max_in_flight - driver_share)
        from mstar.execution.ray_gate import LLMGate
        gate_llm = dataclasses.replace(llm, max_in_flight=gate_cap)
        self._gate = ray.remote(LLMGate).options(max_concurrency=gate_cap * 4 + 16, num_cpus=0, **(
            {"runtime_env": options["runtime_env"]} if env else {})).remote(
            dataclasses.asdict(gate_llm), cfg.evolution.seed)
        router.set_max_in_flight(driver_share)

    def run(self, job: EvalJob) -> EvalResult:
        ray = require_ray()
        ref = self._remote.remote(self._task_ref, self._train, job, self._cfg_dict, self._gate)
        try:
            result, usage = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            raise cause from None
        scope = llm_scope.current()
        for record in usage:  # the driver's ledger: one line per call in llm_usage.jsonl, the budget
            rec = UsageRecord.from_dict(record)
            rec.scope = scope
            self.router.ledger.add(rec)
        return EvalResult.from_dict(result)

    def close(self) -> None:
        """The cluster outlives the run (a local Ray this process started ends with it); the run's
        gate does not."""
        try:
            require_ray().kill(self._gate)
        except Exception:  # noqa: BLE001 -- the cluster may be gone already
            pass

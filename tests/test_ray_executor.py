"""Evaluations on Ray (`--executor ray`): a real evolution on a local Ray of two workers started
by the test, spend counted once on the driver, a dying worker costing one retry, and an
unreachable cluster refused before anything is written."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the [ray] extra is not installed (.ci/run installs it)")

from mstar.cli import main  # noqa: E402
from mstar.config import RunConfig  # noqa: E402
from mstar.execution import EvalJob  # noqa: E402
from mstar.execution.ray_cluster import RayExecutor, _evaluate_remote  # noqa: E402
from mstar.llm.router import LLMRouter  # noqa: E402
from mstar.program.sources import load_program_source  # noqa: E402
from mstar.run import events as ev_types  # noqa: E402
from mstar.tasks import load_task  # noqa: E402
from run_helpers import lineage  # noqa: E402

ARGS = ["--task", "sample", "--size", "0.3", "--static-size", "6", "--seed", "2", "--iterations", "3"]


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield
    ray.shutdown()


def test_an_evolution_on_ray_matches_the_local_one_and_counts_each_call_once(tmp_path, local_ray, capsys):
    local, remote = tmp_path / "local", tmp_path / "ray"
    assert main(["evolve", *ARGS, "--out", str(local), "--quiet"]) == 0
    assert main(["evolve", *ARGS, "--out", str(remote), "--quiet", "--executor", "ray"]) == 0
    assert lineage(remote) == lineage(local)      # the offline backend is deterministic: same run
    assert json.loads((remote / "config.json").read_text())["evolution"]["executor"] == "ray"
    # Every answer the workers asked for is one line in the driver's ledger, no more, no less:
    # one per case of every evaluation the lineage records.
    usage = [json.loads(line) for line in (remote / "llm_usage.jsonl").read_text().splitlines()]
    evs = ev_types.read_lineage(remote / "lineage.jsonl")
    summary = json.loads((remote / "summary.json").read_text())
    static = len(json.loads((remote / "split.json").read_text())["static"])
    test_n = len(json.loads((remote / "cases" / f"{summary['best_id']}.test.json").read_text())["cases"])
    confirmed = next(e for e in evs if isinstance(e, ev_types.ConfirmationEvent))
    # The race scores each racer on each item it buys that the racer lacks: its budget's "racer_items".
    expected = (static * len(ev_types.seeds(evs)) + confirmed.budget["racer_items"]
                + sum(len(e.rotating_batch) + (static if e.added_child else 0) for e in ev_types.iterations(evs))
                + test_n * len({summary["best_id"], summary["best_seed_id"] or summary["best_id"]}))
    assert sum(r["kind"] == "answer" for r in usage) == expected
    assert summary["llm"]["total"]["calls"] == len(usage)
    assert {r["scope"] for r in usage} >= {"test", "iter_001"}


def test_a_worker_that_dies_mid_evaluation_costs_a_retry_not_the_run(tmp_path, local_ray):
    task = load_task("sample", size=0.3)
    cfg = RunConfig(name="ray-retry")
    router = LLMRouter.from_config(cfg.llm)
    executor = RayExecutor(task, list(range(len(task.episodes))), router, cfg)
    marker = tmp_path / "die-once"
    marker.write_text("")

    def dies_once(*args):
        if os.path.exists(str(marker)):
            os.remove(str(marker))
            os._exit(1)                      # the worker process is gone, mid-evaluation
        return _evaluate_remote(*args)

    executor._remote = ray.remote(dies_once).options(max_retries=2, num_cpus=0.5)
    job = EvalJob(load_program_source("vector_search")[1], "validation", (0, 1, 2))
    result = executor.run(job)
    assert not marker.exists() and len(result.cases) == 3 and result.error is None
    assert sum(r.kind == "answer" for r in router.ledger.snapshot()) == 3   # the lost attempt's calls: not counted


def test_an_unreachable_cluster_is_one_line_and_no_run_folder(tmp_path, capsys):
    if ray.is_initialized():
        ray.shutdown()
    run = tmp_path / "never"
    code = main(["evolve", "--task", "sample", "--executor", "ray", "--ray-address", "127.0.0.1:9", "--out", str(run)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "cannot reach the Ray cluster at 127.0.0.1:9" in err
    assert "\n" not in err and not Path(run).exists()


def test_the_clusters_calls_go_through_one_gate_under_one_cap(tmp_path, local_ray):
    """Issue 28: every worker's calls pass one gate actor, so --max-in-flight holds for the whole
    cluster (the fake server's own count), and each call is still one line in the driver's ledger."""
    from failure_helpers import endpoint
    from mstar.testing.fake_server import FakeOpenAIServer, offline_responder

    with FakeOpenAIServer(offline_responder(), latency_s=0.05) as srv:
        run = tmp_path / "gated"
        assert main(["evolve", *ARGS[:-2], "--iterations", "1", "--confirm-size", "0", "--out", str(run), "--quiet", "--executor", "ray",
                     "--max-in-flight", "3", *endpoint(srv.base_url, None, concurrency=64)]) == 0
        stats = srv.stats()
    usage = [json.loads(line) for line in (run / "llm_usage.jsonl").read_text().splitlines()]
    assert stats["max_in_flight"] <= 3
    # every request the server saw (the connection check included) is one call in the driver's ledger
    assert sum(1 + r["retries"] for r in usage if not r["cache_hit"]) == stats["requests"]
    assert not any(r["error"] for r in usage)

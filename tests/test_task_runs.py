"""Rubric and exact-match tasks through a whole evolution: with the offline backend (CLI), and with
every role — judge included — served over HTTP by the fake OpenAI-compatible server."""
import json
from pathlib import Path

import pytest

from mstar.cli import main
from mstar.config import EvolutionConfig, RoleConfig, RunConfig, SandboxConfig
from mstar.config import ROLES
from mstar.testing.fake_server import FakeOpenAIServer, offline_responder
from mstar.llm.openai_backend import OpenAIBackend
from mstar.llm.router import LLMRouter
from mstar.loop import Evolution
from mstar.split.for_run import train_ratio
from mstar.run.store import RunStore
from mstar.tasks import load_task

ROOT = Path(__file__).resolve().parents[1]
DATA = (ROOT / "../shared/data").resolve()
PRBENCH = ROOT / "tests" / "fixtures" / "prbench_sample.jsonl"
HEALTHBENCH = DATA / "healthbench" / "oss_eval_sample_9.jsonl"
FORMULA = DATA / "ace_finance" / "formula_test.jsonl"
needs_data = pytest.mark.skipif(not DATA.exists(), reason="../shared/data is not beside this clone")


def _cases(run: Path, summary: dict, split: str = "static") -> list[dict]:
    pid = summary["best_id"] if split == "test" else "seed_vector_search"
    return json.loads((run / "cases" / f"{pid}.{split}.json").read_text())["cases"]


def _offline(tmp_path, *args) -> tuple[Path, dict, list[dict]]:
    out = tmp_path / "run"
    assert main(["evolve", *args, "--iterations", "1", "--seeds", "vector_search", "--static-size", "4",
                 "--embed-model", "hashing", "--out", str(out), "--quiet"]) == 0
    usage = [json.loads(l) for l in (out / "llm_usage.jsonl").read_text().splitlines()]
    return out, json.loads((out / "summary.json").read_text()), usage


@needs_data
def test_healthbench_offline_with_judge_calls_in_the_ledger(tmp_path):
    out, summary, usage = _offline(tmp_path, "--task", "healthbench", "--data", str(HEALTHBENCH))
    cases = _cases(out, summary)
    n_criteria = sum(len(c["score_details"]["criteria"]) for c in cases)
    assert n_criteria > 0 and all(c["category"] for c in cases)
    judge = [u for u in usage if u["role"] == "judge"]
    assert len(judge) >= n_criteria                                   # one call per criterion, all in the ledger
    assert summary["llm_totals"]["judge"]["calls"] == len(judge)
    lineage = [json.loads(l) for l in (out / "lineage.jsonl").read_text().splitlines()]
    assert lineage[0]["per_category"] and set(lineage[0]["per_category"]) <= {c["category"] for c in cases}


def test_prbench_offline(tmp_path):
    out, summary, usage = _offline(tmp_path, "--task", "prbench", "--data", str(PRBENCH), "--theme", "finance")
    cases = _cases(out, summary)
    assert {c["category"] for c in cases} == {"finance"}
    assert all(len(c["score_details"]["criteria"]) >= 3 for c in cases)
    assert any(u["role"] == "judge" for u in usage)
    config = json.loads((out / "config.json").read_text())
    assert config["theme"] == "finance" and config["task"] == "prbench"


@needs_data
def test_formula_offline(tmp_path):
    out, summary, usage = _offline(tmp_path, "--task", "formula", "--data", str(FORMULA))
    assert not any(u["role"] == "judge" for u in usage)               # an exact-match task needs no judge
    assert summary["test_per_category"] and 0.0 <= summary["test_score"] <= 1.0
    split = json.loads((out / "split.json").read_text())
    assert len(split["train_episodes"]) == 20                         # 5 × 4 static items, by facility location


@pytest.fixture
def http_router():
    with FakeOpenAIServer(offline_responder()) as srv:
        backends = {r: OpenAIBackend(r, RoleConfig(backend="openai", model=f"offline-{r}", base_url=srv.base_url,
                                                   max_retries=0), env={}) for r in ROLES}
        yield LLMRouter(backends), srv


def _fake_server_run(tmp_path, router, task):
    cfg = RunConfig(name="t", seeds=("vector_search",), sandbox=SandboxConfig(call_timeout_s=30),
                    evolution=EvolutionConfig(iterations=1, static_size=4, seed=1, embed_model="hashing"))
    store = RunStore(tmp_path / "run")
    store.create()
    summary = Evolution(cfg, task, router, store).run()
    static = json.loads((tmp_path / "run" / "cases" / "seed_vector_search.static.json").read_text())
    return summary, static


@needs_data
@pytest.mark.parametrize("name,data,judged", [
    ("healthbench", HEALTHBENCH, True),
    ("prbench", PRBENCH, True),
    ("formula", FORMULA, False),
])
def test_tasks_against_the_fake_server(tmp_path, http_router, name, data, judged):
    router, srv = http_router
    task = load_task(name, str(data))
    summary, static = _fake_server_run(tmp_path, router, task)
    models = {r["model"] for r in srv.requests}
    assert {"offline-task", "offline-reflector"} <= models
    judge_requests = [r for r in srv.requests if r["model"] == "offline-judge"]
    if judged:
        n_criteria = sum(len(c["score_details"]["criteria"]) for c in static["cases"])
        assert n_criteria and len(judge_requests) >= n_criteria
        assert "<rubric_item>" in judge_requests[0]["messages"][0]["content"]
        assert all(not c["warnings"] or not any("counted as not met" in w for w in c["warnings"])
                   for c in static["cases"])                          # every judge reply was usable
    else:
        assert not judge_requests
    assert static["per_category"] and summary.test_per_category
    assert router.totals()["task"]["calls"] > 0


def test_train_ratio_resolution():
    task = load_task("sample")
    cfg = RunConfig(name="x")
    assert train_ratio(cfg, task) == 5
    assert train_ratio(cfg, task.__class__(**{**task.__dict__, "train_ratio": 0})) == 0
    assert train_ratio(RunConfig(name="x", evolution=EvolutionConfig(train_ratio=3)), task) == 3

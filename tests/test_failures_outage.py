"""Issue 13, outages: an endpoint killed in the middle of a run, one that never answers, one that
fails 30% of its requests. An outage pauses the run (status `stopped`, exit 3, resumable at the
iteration it cut) and is never scored; faults within the threshold are retried, and what still
failed is counted beside the score, not in it."""
import json
import threading

import pytest

from failure_helpers import (SMALL, ServerProcess, assert_strict_json, endpoint, error_lines, events, stable,
                             temp_files, usage, wait_for)
from mstar.cli import main
from mstar.run.resume import load_state
from mstar.run.store import RunStore
from mstar.run.views import open_run
from mstar.testing.fake_server import FakeOpenAIServer, Faults, offline_responder
from run_helpers import unwrapped

OUTAGE = [*SMALL, "--iterations", "2"]


def _iteration_done(run, n: int):
    path = run / "lineage.jsonl"
    return lambda: path.exists() and sum('"event": "iteration"' in l for l in path.read_text().splitlines()) >= n


def test_an_endpoint_killed_mid_run_pauses_it_and_resume_finishes_with_the_same_lineage(tmp_path, capsys):
    server = ServerProcess().start()
    try:
        reference = tmp_path / "reference"           # the same run, never interrupted
        assert main(["evolve", *OUTAGE, "--out", str(reference), "--quiet",
                     *endpoint(server.base_url, tmp_path / "cache-ref")]) == 0
        run = tmp_path / "run"

        def kill_after_iteration_1():
            wait_for(_iteration_done(run, 1))
            server.kill()

        threading.Thread(target=kill_after_iteration_1, daemon=True).start()
        capsys.readouterr()
        rc = main(["evolve", *OUTAGE, "--out", str(run), *endpoint(server.base_url, tmp_path / "cache")])
        out, err = capsys.readouterr()
        assert rc == 3 and "Traceback" not in out + err
        assert f"resume  mstar resume {run}" in out and "once the endpoint works again" in out
        # Stopped, not finished: iteration 2 is not recorded, no test score exists.
        view = open_run(run)
        assert view.status == "stopped" and view.stop.kind == "endpoint"
        assert "the LLM endpoint failed during iteration 2" in view.stop.reason
        assert "after their retries" in view.stop.reason or "after its retries" in view.stop.reason
        assert "connection failed" in view.stop.reason
        ev = events(run)
        assert [e["event"] for e in ev] == ["seed", "iteration", "stopped"]
        summary = json.loads((run / "summary.json").read_text())
        assert summary["stop_kind"] == "endpoint" and summary["test_score"] is None
        state = load_state(RunStore(run))
        assert not state.finished and state.next_iteration == 2
        assert_strict_json(run) and temp_files(run) == []
        # The endpoint comes back (same address): resume goes on from iteration 2.
        server.start()
        assert main(["resume", str(run)]) == 0
        out = unwrapped(capsys.readouterr().out)
        assert "resuming: 1/1 seeds and 1/2 iterations were done" in out
    finally:
        server.kill()
    resumed = [e for e in events(run) if e["event"] != "stopped"]
    assert stable(resumed) == stable(events(reference))
    assert open_run(run).status == "finished"
    assert_strict_json(run) and temp_files(run) == []


def test_a_server_that_never_answers_fails_the_preflight_in_seconds(tmp_path, capsys):
    faults = Faults(rate=1.0, kinds=("hang",), hang_s=3.0)
    with FakeOpenAIServer(offline_responder(), faults=faults) as srv:
        rc = main(["evolve", *SMALL, "--iterations", "1", "--out", str(tmp_path / "run"),
                   *endpoint(srv.base_url, None, timeout_s=0.3, retries=1)])
    out, err = capsys.readouterr()
    assert rc == 3 and not (tmp_path / "run").exists()
    assert out.splitlines()[0].startswith("check   task, reflector, toolkit, judge: one call each")
    line = error_lines(err)[-1]
    assert line.startswith("mstar: role 'task' (gpt-test at") and "timed out after 0.3s" in line
    assert "gave up after 2 attempt(s)" in line and "check that it is up, or raise timeout_s" in line


def test_while_calls_hang_the_console_says_what_it_waits_for(tmp_path, capsys, monkeypatch):
    # No preflight: the seed evaluation itself meets the hanging server. Lines come every
    # MSTAR_PROGRESS_INTERVAL seconds (10 by default; a bar on a terminal), the first timeout is
    # printed whole once, and the run then stops as an outage.
    monkeypatch.setenv("MSTAR_PROGRESS_INTERVAL", "0.3")
    faults = Faults(rate=1.0, kinds=("hang",), hang_s=3.0)
    with FakeOpenAIServer(offline_responder(), faults=faults) as srv:
        rc = main(["evolve", *SMALL, "--iterations", "1", "--out", str(tmp_path / "run"), "--no-preflight",
                   *endpoint(srv.base_url, None, timeout_s=0.4, retries=1)])
    out, err = capsys.readouterr()
    assert rc == 3
    waits = [l for l in out.splitlines() if l.startswith("wait  seed_vector_search: ")]
    assert waits, out
    assert all("calls in flight" in l and "retries" in l for l in waits)
    # Before the evaluation has counted its cases (its first moments, long on a busy machine) the
    # line says "starting", never "cases 0/0"; then it counts them.
    assert not any("cases 0/0" in l for l in waits)
    counted = [l for l in waits if "starting" not in l]
    assert counted and "cases 0/6" in counted[0], waits
    timeouts = [l for l in err.splitlines() if "LLM error (timeout" in l]
    assert len(timeouts) == 1 and "timed out after 0.4s" in timeouts[0]


@pytest.fixture(scope="module")
def fault_free(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fault-free")
    with FakeOpenAIServer(offline_responder()) as srv:
        assert main(["evolve", *SMALL, "--iterations", "0", "--out", str(tmp / "run"), "--quiet",
                     *endpoint(srv.base_url, None)]) == 0
    return events(tmp / "run")[0]


TRANSIENT = ("rate_limit", "server_error", "malformed", "empty", "truncated")


def test_30_percent_faults_all_retried_give_the_fault_free_scores(tmp_path, fault_free):
    # Every transient kind but 429: a 429 is not retried but waited out, and the endpoint's pacer
    # reads each as the endpoint's limit -- ~27 random ones here slowed the run from 3 s to 55 s
    # (mstar/llm/pacer.py). 429s are the next test's and tests/test_llm_endpoint_limits.py's.
    faults = Faults(rate=0.3, kinds=tuple(k for k in TRANSIENT if k != "rate_limit"), seed=3, retry_after_s=0.01)
    with FakeOpenAIServer(offline_responder(), faults=faults) as srv:
        run = tmp_path / "run"
        assert main(["evolve", *SMALL, "--iterations", "0", "--out", str(run), "--quiet",
                     *endpoint(srv.base_url, None, retries=10)]) == 0
        injected = srv.stats()["faults"]
    seed = events(run)[0]
    assert seed["case_errors"] == 0 and seed["static_score"] == fault_free["static_score"]
    assert seed["per_category"] == fault_free["per_category"]
    errors = [e for r in usage(run) for e in r["attempt_errors"]]
    # empty and cut-short replies were retried like the other faults, each attempt in the ledger
    assert injected["empty"] > 0 and sum("empty completion" in e for e in errors) == injected["empty"]
    assert injected["truncated"] > 0 and sum("cut short" in e for e in errors) == injected["truncated"]
    assert not any("raise max_tokens" in e for e in errors)   # no reply reached a max_tokens
    assert not any(r["error"] for r in usage(run))


def test_30_percent_faults_with_one_retry_count_failed_cases_beside_the_score(tmp_path, capsys):
    # Faults drawn by request content (keyed): the same cases meet them whatever the thread order.
    # Which cases those are depends on the static set, so the split is pinned to the hashing
    # embedder: with MiniLM installed or not ([embed]), the same items meet the same faults
    # (issue 33: with only [test] installed, another static set met none). 12 static items: a
    # call fails after its one retry with probability ~0.06 (a 429 waits, it does not fail).
    faults = Faults(rate=0.3, kinds=TRANSIENT, seed=3, retry_after_s=0.01, keyed=True)
    with FakeOpenAIServer(offline_responder(), faults=faults) as srv:
        run = tmp_path / "run"
        rc = main(["evolve", *SMALL, "--static-size", "12", "--embed-model", "hashing", "--iterations", "0",
                   "--out", str(run), "--quiet", *endpoint(srv.base_url, None, retries=1)])
    assert rc == 0
    seed = events(run)[0]
    for split in ("static", "test"):
        cases = json.loads((run / "cases" / f"seed_vector_search.{split}.json").read_text())
        unscored = [c for c in cases["cases"] if c["llm_error"]]
        scored = [c for c in cases["cases"] if not c["llm_error"]]
        assert len(unscored) == cases["case_errors"] > 0, split
        assert cases["mean_score"] == pytest.approx(sum(c["score"] for c in scored) / len(scored))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["test_case_errors"] == cases["case_errors"]
    static = json.loads((run / "cases" / "seed_vector_search.static.json").read_text())
    assert seed["case_errors"] == static["case_errors"] and seed["static_score"] == static["mean_score"]
    # shown beside the score by the lineage, `mstar show` and the report
    n = seed["case_errors"]
    capsys.readouterr()
    assert main(["lineage", str(run)]) == 0
    assert f"({n} case{'s' if n > 1 else ''} not scored: LLM call failed)" in capsys.readouterr().out
    assert main(["show", str(run), "seed_vector_search", "--no-source"]) == 0
    shown = capsys.readouterr().out
    assert "not scored: LLM call failed" in shown and "[LLM error, not scored:" in shown
    assert main(["report", str(run)]) == 0
    page = (run / "report.html").read_text()
    assert "not scored: LLM call failed" in page
    assert_strict_json(run)

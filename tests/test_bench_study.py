"""The held-out study as one command (issue 44): bench/bench_study.py takes the evolution seeds and
the split's seed, and prints the champion's regret on validation and on test, and the
confirmation's ledger against its allowance -- here on one small offline run."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))


def test_the_study_takes_its_seeds_and_split_seed_and_prints_both_regrets(tmp_path):
    import regret

    out = tmp_path / "study"
    done = subprocess.run([sys.executable, "bench/bench_study.py", "--task", "sample", "--seed-list", "3",
                           "--iterations", "2", "--split-seed", "7", "--jobs", "1", "--regret-items", "20",
                           "--out", str(out), "--", "--size", "0.2"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode in (0, 1), done.stderr[-2000:]      # 1: a target not met on so small a run
    run = out / "sample-s3"
    assert json.loads((run / "config.json").read_text())["evolution"]["split_seed"] == 7
    said = done.stdout
    assert "seeds 3 x 2 iterations, split seed 7" in said
    assert "val regret (best)" in said and "test regret (best)" in said
    # The test regret is every program of the run on the test questions: the best one's score
    # minus the champion's, and the champion's is what the run's own test gave it.
    got = regret.measure(run, 20, jobs=1)
    summary = json.loads((run / "summary.json").read_text())
    assert set(got.test) == {p["program_id"] for p in summary["pool"]}
    assert abs(got.test[summary["best_id"]] - summary["test_score"]) < 1e-9
    assert got.test_regret == max(got.test.values()) - got.test[summary["best_id"]]
    row = next(line for line in said.splitlines() if line.startswith("| 3 "))
    assert f"{got.test_regret:.4f} ({got.test_best})" in row and f"{got.regret:.4f} ({got.best})" in row
    # The confirmation's own ledger against its allowance, as its event recorded them.
    conf = next(json.loads(line) for line in (run / "lineage.jsonl").read_text().splitlines()
                if json.loads(line)["event"] == "confirmation")
    asked = sum(int(conf["llm"].get(k, 0)) for k in ("prompt_tokens", "completion_tokens", "saved_tokens"))
    assert f"{asked:,} / {conf['budget']['allowance']:,}" in row
    assert "confirmation's ledger within its allowance in 1 of 1 runs" in said

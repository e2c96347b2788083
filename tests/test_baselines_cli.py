"""`mstar baselines` chooses task, metric, models and wording as `mstar evolve` does: --theme,
--metric, --config (a separate judge model), --prompts."""
import json
import sys
from pathlib import Path

import pytest

from mstar import prompts
from mstar.cli import main

HEALTHBENCH = (Path(__file__).resolve().parents[1] / "../shared/data/healthbench/oss_eval_sample_9.jsonl").resolve()
ALWAYS_MET = (f"{sys.executable} -c \"import sys; sys.stdin.read(); "
              "print('{\\\"explanation\\\": \\\"ok\\\", \\\"criteria_met\\\": true}')\"")


def _run(tmp_path, *extra) -> dict:
    out = tmp_path / "t"
    code = main(["baselines", "--programs", "no_memory", "--limit", "4", "--embed-model", "hashing",
                 "--out", str(out), "--quiet", *extra])
    assert code == 0
    return json.loads((tmp_path / "t.json").read_text())


def test_metric_switches_to_the_llm_judge_and_config_gives_the_judge_its_own_model(tmp_path):
    own = _run(tmp_path, "--task", "sample", "--metric", "llm_judge")
    assert own["metric"] == "llm_judge" and own["rows"][0]["overall"] == 0.0   # offline judge: no memory, no answer
    config = tmp_path / "roles.toml"
    config.write_text(f"[llm.judge]\nbackend = \"command\"\nmodel = \"always-yes\"\ncommand = '''{ALWAYS_MET}'''\n")
    judged = _run(tmp_path, "--task", "sample", "--metric", "llm_judge", "--config", str(config))
    assert judged["rows"][0]["overall"] == 1.0          # the configured judge said yes to every answer


@pytest.mark.skipif(not HEALTHBENCH.exists(), reason="../shared/data/healthbench is not beside this clone")
def test_theme_keeps_one_theme_of_a_rubric_task(tmp_path):
    everything = _run(tmp_path, "--task", "healthbench", "--data", str(HEALTHBENCH), "--split", "validation")
    themes = [c["name"] for c in everything["categories"]]
    one = _run(tmp_path, "--task", "healthbench", "--data", str(HEALTHBENCH), "--split", "validation",
               "--theme", themes[0])
    assert [c["name"] for c in one["categories"]] == [themes[0]]


def test_prompts_paper_is_used_and_recorded_then_the_process_default_comes_back(tmp_path):
    assert prompts.default() == "mstar"
    table = _run(tmp_path, "--task", "sample", "--prompts", "paper")
    assert table["prompts"] == "paper"
    assert prompts.default() == "mstar"


def test_bad_numbers_and_names_fail_before_any_work(capsys):
    assert main(["baselines", "--gepa-budget", "0", "--quiet"]) == 2
    assert "--gepa-budget 0" in capsys.readouterr().err
    assert main(["baselines", "--programs", "no_memory,nope", "--quiet"]) == 2
    assert "unknown program 'nope'" in capsys.readouterr().err

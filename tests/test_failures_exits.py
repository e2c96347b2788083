"""Issue 13, ending cleanly: budgets that hold on resume, Ctrl-C and SIGTERM, a read-only or full
disk, a closed pipe. Each ends with one line (and the command that continues the run), an exit
code, no traceback, no temp file, and only strict JSON in the run folder."""
import errno
import json
import os
import signal
import subprocess
import sys

import pytest

from failure_helpers import (ROOT, assert_strict_json, error_lines, events, mstar_process, temp_files, usage,
                             wait_for)
from mstar.cli import main
from mstar.run.views import open_run
from run_helpers import unwrapped

OFFLINE = ["--task", "sample", "--size", "0.3", "--static-size", "6", "--seeds", "vector_search"]


def _tokens(evs, kind):
    return sum(e["llm"]["prompt_tokens"] + e["llm"]["completion_tokens"] for e in evs if e["event"] == kind)


@pytest.fixture(scope="module")
def budget_stopped(tmp_path_factory):
    """A run its --max-tokens stopped after the seeds and some iterations (offline models count tokens)."""
    tmp = tmp_path_factory.mktemp("budget")
    probe = tmp / "probe"
    assert main(["evolve", *OFFLINE, "--iterations", "1", "--out", str(probe), "--quiet"]) == 0
    ev = events(probe)
    limit = _tokens(ev, "seed") + int(1.5 * _tokens(ev, "iteration"))
    run = tmp / "capped"
    assert main(["evolve", *OFFLINE, "--iterations", "6", "--out", str(run), "--quiet", "--max-tokens", str(limit)]) == 0
    return run, limit


def test_a_budget_stop_says_which_flag_and_writes_strict_json(budget_stopped, capsys):
    run, limit = budget_stopped
    ev = events(run)
    assert ev[-1]["event"] == "stopped" and ev[-1]["kind"] == "budget" and "--max-tokens" in ev[-1]["reason"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["test_score"] is None and summary["stop_kind"] == "budget"   # null, not NaN
    assert "NaN" not in (run / "summary.json").read_text()
    assert_strict_json(run)
    assert open_run(run).status == "stopped"


def test_resume_without_a_larger_budget_spends_nothing(budget_stopped, capsys):
    run, limit = budget_stopped
    before = ((run / "lineage.jsonl").read_text(), len(usage(run)))
    for flags in ([], ["--max-tokens", str(limit)], ["--max-usd", "5"]):
        assert main(["resume", str(run), *flags]) == 2
        [line] = error_lines(capsys.readouterr().err)
        assert "stopped at its budget" in line and f"mstar resume {run} --max-tokens LARGER" in line
    assert ((run / "lineage.jsonl").read_text(), len(usage(run))) == before


def test_resume_with_a_larger_budget_that_does_not_cover_an_iteration_stops_again_at_once(budget_stopped, tmp_path,
                                                                                            capsys):
    import shutil
    run, limit = budget_stopped
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    done = sum(e["event"] == "iteration" for e in events(copy))
    # One token more than before: larger, but an iteration costs far more. The resumed run knows
    # what its iterations cost (it did not the first time, and spent one iteration past the budget).
    assert main(["resume", str(copy), "--max-tokens", str(limit + 1)]) == 0
    out = unwrapped(capsys.readouterr().out)
    assert "stopped budget nearly reached" in out and f"mstar resume {copy} --max-tokens LARGER" in out
    assert sum(e["event"] == "iteration" for e in events(copy)) == done
    spent = sum(r["prompt_tokens"] + r["completion_tokens"] for r in usage(copy) if not r["cache_hit"])
    assert spent <= limit + 1
    # A budget large enough for the rest lets it finish.
    assert main(["resume", str(copy), "--max-tokens", str(limit * 20)]) == 0
    assert open_run(copy).status == "finished"


def test_a_capped_run_whose_test_would_cross_its_cap_stops_before_it_and_a_resume_tests(tmp_path, capsys):
    probe = tmp_path / "probe"
    assert main(["evolve", *OFFLINE, "--iterations", "1", "--out", str(probe), "--quiet"]) == 0
    ev = events(probe)
    before_test = _tokens(ev, "seed") + _tokens(ev, "iteration")
    test = _tokens(ev, "test")
    assert test > 0
    # Room for the seeds and the iteration, not for the test: the old end tested anyway, past the cap.
    run = tmp_path / "capped"
    limit = before_test + test // 4
    assert main(["evolve", *OFFLINE, "--iterations", "1", "--out", str(run), "--quiet",
                 "--max-tokens", str(limit)]) == 0
    last = events(run)[-1]
    assert last["event"] == "stopped" and last["kind"] == "budget" and "held-out tests may cost" in last["reason"]
    assert not list((run / "cases").glob("*.test.json"))
    assert sum(r["prompt_tokens"] + r["completion_tokens"] for r in usage(run) if not r["cache_hit"]) <= limit
    # With room for it the resume races and tests: nothing but the end was left to do.
    capsys.readouterr()
    assert main(["resume", str(run), "--quiet", "--max-tokens", str(limit * 20)]) == 0
    assert open_run(run).status == "finished" and list((run / "cases").glob("*.test.json"))


def test_a_resume_whose_budget_is_not_above_what_the_run_spent_is_refused_and_changes_nothing(tmp_path, capsys):
    probe = tmp_path / "probe"
    assert main(["evolve", *OFFLINE, "--iterations", "1", "--out", str(probe), "--quiet"]) == 0
    seeds = _tokens(events(probe), "seed")
    run = tmp_path / "run"           # the seeds alone cross it: it stops after them, past its cap
    assert main(["evolve", *OFFLINE, "--iterations", "3", "--out", str(run), "--quiet",
                 "--max-tokens", str(seeds // 2)]) == 0
    spent = sum(r["prompt_tokens"] + r["completion_tokens"] for r in usage(run) if not r["cache_hit"])
    assert spent > seeds // 2 + 1 and events(run)[-1]["kind"] == "budget"
    before = [(run / f).read_text() for f in ("lineage.jsonl", "llm_usage.jsonl", "config.json")]
    capsys.readouterr()
    assert main(["resume", str(run), "--max-tokens", str(seeds // 2 + 1)]) == 2
    [line] = error_lines(capsys.readouterr().err)
    assert f"has spent {spent:,}" in line and "would stop again at once" in line
    assert [(run / f).read_text() for f in ("lineage.jsonl", "llm_usage.jsonl", "config.json")] == before


@pytest.mark.parametrize("signum,name,code", [(signal.SIGINT, "Ctrl-C", 130), (signal.SIGTERM, "SIGTERM", 143)])
def test_an_interrupt_ends_with_one_line_and_resume_continues(tmp_path, signum, name, code):
    run = tmp_path / "run"
    proc = mstar_process("evolve", *OFFLINE, "--iterations", "40", "--out", str(run))
    try:
        wait_for(lambda: (run / "lineage.jsonl").exists() and '"iteration"' in (run / "lineage.jsonl").read_text())
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == code, err
    assert "Traceback" not in err
    lines = [l for l in err.splitlines() if l.strip()]
    assert lines == [f"mstar: interrupted ({name}); what was done is saved -- continue with: mstar resume {run}"]
    assert temp_files(run) == []
    assert_strict_json(run)
    assert open_run(run).status == "stopped"
    done = sum(e["event"] == "iteration" for e in events(run))
    assert events(run)[-1]["event"] == "stopped" and events(run)[-1]["kind"] == "interrupted"
    if signum == signal.SIGINT:  # (once is enough: the folder is the same after either signal)
        assert main(["resume", str(run), "--iterations", str(done + 1), "--quiet"]) == 0
        assert open_run(run).status == "finished"


def test_a_read_only_runs_folder_is_one_line(tmp_path, monkeypatch, capsys):
    from mstar.run.store import RunStore

    def read_only(self):
        raise OSError(errno.EROFS, "Read-only file system", str(self.root))

    monkeypatch.setattr(RunStore, "create", read_only)
    assert main(["evolve", *OFFLINE, "--iterations", "1", "--out", str(tmp_path / "run")]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert error_lines(err) == [f"mstar: cannot write {tmp_path / 'run'}: Read-only file system (EROFS) -- the file "
                                "system is read-only: make it writable"]


def test_a_full_disk_mid_run_is_one_line_no_temp_file_and_resume_sweeps_and_finishes(tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    real_fsync, calls = os.fsync, []

    def fsync(fd):
        calls.append(fd)
        if len(calls) > 8:  # the run folder has begun to fill
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    assert main(["evolve", *OFFLINE, "--iterations", "1", "--out", str(run)]) == 1
    monkeypatch.setattr(os, "fsync", real_fsync)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    [line] = error_lines(err)
    assert line.startswith("mstar: cannot write ") and "No space left on device (ENOSPC)" in line
    assert line.endswith(f"the disk is full: free some space; then continue with: mstar resume {run}")
    assert temp_files(run) == []
    (run / "cases" / ".seed_x.static.json.tmp4242").write_text("{")   # as a killed process leaves it
    assert main(["resume", str(run), "--quiet"]) == 0
    assert temp_files(run) == [] and open_run(run).status == "finished"
    assert_strict_json(run)


def test_runs_json_into_a_closed_pipe_ends_quietly(tmp_path):
    base = tmp_path / "runs"
    for i in range(300):   # more than a pipe holds, so the writer meets the closed end
        (base / f"run{i:03d}").mkdir(parents=True)
        (base / f"run{i:03d}" / "config.json").write_text(json.dumps({"format_version": 1, "task": "sample" * 20}))
    proc = subprocess.run(["bash", "-o", "pipefail", "-c",
                           f"{sys.executable} -m mstar.cli runs --json --runs-dir {base} | head -n 2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.stdout.splitlines()[0] == "["
    assert proc.stderr == "" and proc.returncode == 141


def test_the_store_writes_strict_json_and_leaves_no_temp_file_when_a_write_fails(tmp_path, monkeypatch):
    from mstar.run.store import RunStore
    store = RunStore(tmp_path / "run")
    store.create()
    store.write_json("summary.json", {"test_score": float("nan"), "x": [float("inf"), 1.5]})
    store.append_jsonl("lineage.jsonl", {"score": float("-inf")})
    assert json.loads((store.root / "summary.json").read_text()) == {"test_score": None, "x": [None, 1.5]}
    assert_strict_json(store.root)

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        store.write_program("iter_001", "x = 1\n")
    assert temp_files(store.root) == []
    # what a killed process leaves: swept, its own or all (resume holds the folder)
    mine, other = store.root / "cases" / f".a.json.tmp{os.getpid()}", store.root / ".b.json.tmp1"
    mine.write_text("{"), other.write_text("{")
    assert store.sweep_temp(os.getpid()) == [mine] and other.exists()
    assert store.sweep_temp() == [other] and temp_files(store.root) == []


def test_a_primed_budget_counts_the_iterations_before_a_resume():
    from mstar.llm.budget import Budget, budget_flag
    fresh, primed = Budget(max_tokens=1000), Budget(max_tokens=1000)
    for b in (fresh, primed):
        b.observe(0.0, 700)
    primed.prime([(0.0, 400), (0.0, 200)])        # iterations of the first process: 300 on average, 400 at most
    assert fresh.stop_reason() is None             # knows nothing yet: would run one more
    reason = primed.stop_reason()
    assert reason.startswith("budget nearly reached") and "may cost 400 tokens (the largest so far)" in reason
    assert budget_flag(reason) == "--max-tokens" and budget_flag("budget reached: $1, --max-usd is $1") == "--max-usd"


def test_a_budget_reserves_the_largest_iteration_and_every_one_in_flight():
    from mstar.llm.budget import Budget
    budget = Budget(max_tokens=1000)
    budget.observe(0.0, 600)
    budget.prime([(0.0, 100), (0.0, 450), (0.0, 100), (0.0, 100)])   # average 187: the old rule ran one more
    assert "may cost 450 tokens" in budget.stop_reason()
    roomy = Budget(max_tokens=1000)
    roomy.observe(0.0, 500)
    roomy.prime([(0.0, 200)])
    assert roomy.check() is None                                      # 500 + 200 fits
    assert roomy.stop_reason(in_flight=1) is None                     # 500 + 2 x 200 fits
    assert "2 more in flight" in roomy.stop_reason(in_flight=2)       # 500 + 3 x 200 does not
    assert Budget(max_tokens=1000).stop_reason(in_flight=5) is None   # nothing seen yet, nothing to reserve


def test_the_reliability_scenario_stop_at_300k_resume_with_500k_spends_at_most_500k(tmp_path):
    """Issue 30, 8b: two seeds whose iterations differ ~3x (a summariser parent costs ~95k tokens, a
    vector-search one ~30k). With this --seed the iteration after the resume's fifth has the
    summariser as its parent; reserving the average (~40k) ran it and spent 543,954 tokens.
    The scenario is a lineage, and the lineage is the split's: it is defined on the MiniLM split
    ([embed]). On the hashing split nearly every parent is the summariser (14 iterations of seeds
    0-11 measured: the average and the largest cost agree), so there it tests nothing; the rule
    itself is tested above on any install (test_a_budget_reserves_the_largest_iteration...)."""
    from mstar.split.embed import minilm_available
    if not minilm_available():
        pytest.skip("the scenario's lineage is the MiniLM split's: needs the [embed] extra (.ci/run installs it)")
    run = tmp_path / "run"
    args = ["--task", "sample", "--size", "0.3", "--static-size", "6", "--seeds", "vector_search,llm_summarizer",
            "--seed", "9", "--quiet"]
    assert main(["evolve", *args[:-1], "--iterations", "40", "--max-tokens", "300000", "--out", str(run),
                 "--quiet"]) == 0
    first = sum(r["prompt_tokens"] + r["completion_tokens"] for r in usage(run) if not r["cache_hit"])
    assert events(run)[-1]["event"] == "stopped" and first <= 300_000
    assert main(["resume", str(run), "--max-tokens", "500000", "--quiet"]) == 0
    spent = sum(r["prompt_tokens"] + r["completion_tokens"] for r in usage(run) if not r["cache_hit"])
    ev = events(run)
    assert ev[-1]["event"] == "stopped" and ev[-1]["kind"] == "budget"
    assert sum(e["event"] == "iteration" for e in ev) >= 8      # it went on after the resume
    assert first < spent <= 500_000, spent


def test_a_resumed_runs_console_counts_the_calls_the_run_recorded_and_ends_with_its_spend(tmp_path, capsys):
    """Issue 30, 9: the resumed iteration's calls were counted twice on the console when its first,
    interrupted attempt had recorded calls (852 shown, 847 recorded), and resume printed no final
    spend line."""
    import re
    run = tmp_path / "run"
    assert main(["evolve", *OFFLINE, "--iterations", "2", "--max-tokens", "1000", "--out", str(run), "--quiet"]) == 0
    assert events(run)[-1]["event"] == "stopped"                 # after the seeds
    lines = (run / "llm_usage.jsonl").read_text().splitlines()
    attempt = [json.dumps({**json.loads(line), "scope": "iter_001"}) for line in lines[:5]]
    with open(run / "llm_usage.jsonl", "a") as f:                # iteration 1 began, then the run was killed
        f.write("\n".join(attempt) + "\n")
    capsys.readouterr()
    assert main(["resume", str(run), "--max-tokens", "100000000", "--iterations", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    recorded = len(usage(run))
    shown = [int(m.group(1)) for line in out if (m := re.search(r"spend (\d+) calls", line))]
    assert shown and shown[-1] == recorded, (shown, recorded)
    [final] = [line for line in out if line.startswith("llm     spend")]
    assert f"| {recorded} calls," in final

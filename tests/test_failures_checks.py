"""Issue 13, checks before spending and what the console shows: seeds that do not compile, numbers
out of range and broken config files fail before a run folder exists, with one line each; the
live progress display; columns that stay aligned for long program ids."""
import io

import pytest

from failure_helpers import error_lines
from mstar.cli import main
from mstar.run.eval_progress import LiveProgress
from mstar.run.events import IterationEvent, SeedEvent
from mstar.run.progress import ProgressPrinter

OFFLINE = ["--task", "sample", "--size", "0.3", "--static-size", "6"]


def test_a_seed_file_that_does_not_compile_fails_before_the_run_folder(tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("def write(self, item:\n    pass\n")
    run = tmp_path / "run"
    assert main(["evolve", *OFFLINE, "--seeds", f"vector_search,{broken}", "--out", str(run)]) == 2
    [line] = error_lines(capsys.readouterr().err)
    assert line.startswith(f"mstar: --seeds: {broken} does not pass the sandbox's gates (stage compile)")
    assert f"mstar check {broken}" in line
    assert not run.exists()


def test_a_seed_file_that_passes_its_gates_is_accepted(tmp_path, capsys):
    from mstar.program.sources import load_program_source
    good = tmp_path / "my_seed.py"
    good.write_text(load_program_source("vector_search")[1])
    assert main(["evolve", *OFFLINE, "--seeds", str(good), "--iterations", "0", "--out", str(tmp_path / "run"),
                 "--quiet"]) == 0


@pytest.mark.parametrize("flags,message", [
    (["--iterations", "-1"], "--iterations -1: give 0 or more"),
    (["--static-size", "0"], "--static-size 0: give 1 or more"),
    (["--workers", "0"], "--workers 0: give 1 or more"),
    (["--tau", "0"], "--tau 0.0: give a temperature above 0, e.g. 0.15"),
    (["--toolkit-budget", "-1"], "--toolkit-budget -1: give 0 or more"),
    (["--runtime-fix-rounds", "-2"], "--runtime-fix-rounds -2: give 0 or more"),
    (["--confirm-top", "0"], "--confirm-top 0: give 1 or more"),
    (["--confirm-size", "-5"], "--confirm-size -5: give 0 or more (0 = no confirmation)"),
    (["--confirm-rounds", "0"], "--confirm-rounds 0: give 1 or more"),
    (["--confirm-budget", "0"], "--confirm-budget 0.0: give a share of the tokens the run asked above 0, e.g. 0.1 (10%)"),
    (["--confirm-budget", "nan"], "--confirm-budget nan: give a share of the tokens the run asked above 0, e.g. 0.1 (10%)"),
    (["--patience", "0"], "--patience 0: give 1 or more iterations"),
    (["--guess-worth", "-1"], "--guess-worth -1.0: give the prompt tokens a second is worth, 0 or more, e.g. 4000"),
    (["--guess-worth", "nan"], "--guess-worth nan: give the prompt tokens a second is worth, 0 or more, e.g. 4000"),
    (["--max-tokens", "0"], "--max-tokens 0: give a budget above 0"),
])
def test_numbers_out_of_range_are_refused_with_one_line(tmp_path, capsys, flags, message):
    run = tmp_path / "run"
    assert main(["evolve", *OFFLINE, *flags, "--out", str(run)]) == 2
    assert error_lines(capsys.readouterr().err) == [f"mstar: {message}"]
    assert not run.exists()


def test_algorithm_flags_reach_the_run_configuration():
    from mstar.cli import build_parser
    from mstar.commands.evolve import resolve_config

    args = build_parser().parse_args(["evolve", "--selection", "max", "--tau", "0.3", "--toolkit-budget", "4",
                                      "--runtime-fix-rounds", "0", "--split-seed", "7", "--confirm-top", "2",
                                      "--confirm-size", "20", "--confirm-rounds", "5", "--pick", "static",
                                      "--prompts", "paper", "--confirm-budget", "0.25", "--patience", "12",
                                      "--guess-worth", "250"])
    cfg = resolve_config(args)
    ev = cfg.evolution
    assert (ev.selection, ev.tau, ev.runtime_fix_rounds, ev.split_seed, ev.confirm_top, ev.confirm_size,
            ev.confirm_rounds, ev.pick, ev.prompts) == ("max", 0.3, 0, 7, 2, 20, 5, "static", "paper")
    assert (ev.confirm_budget, ev.patience, ev.guess_worth) == (0.25, 12, 250.0)
    assert cfg.sandbox.llm_calls_per_op == 4
    defaults = resolve_config(build_parser().parse_args(["evolve"]))
    assert defaults.evolution.selection == "softmax" and defaults.sandbox.llm_calls_per_op == 1
    assert defaults.evolution.patience is None and defaults.evolution.confirm_budget == 0.1


def test_a_toml_error_names_the_file_and_the_table(tmp_path, capsys):
    bad = tmp_path / "llm.toml"
    bad.write_text('[llm]\ncache_dir = "x"\n\n[llm.reflector]\nmodel = "o4-mini"\nmax_tokens = 16 000\n')
    assert main(["evolve", *OFFLINE, "--config", str(bad), "--out", str(tmp_path / "run")]) == 2
    [line] = error_lines(capsys.readouterr().err)
    assert line.startswith(f"mstar: config file {bad} is not valid TOML:") and "line 6" in line
    assert line.endswith("in table [llm.reflector]")
    wrong = tmp_path / "wrong.toml"
    wrong.write_text('[llm.judge]\nconcurrency = 0\n')
    assert main(["evolve", *OFFLINE, "--config", str(wrong), "--out", str(tmp_path / "run")]) == 2
    [line] = error_lines(capsys.readouterr().err)
    assert line.startswith(f"mstar: config file {wrong}: [llm.judge] concurrency = 0")
    assert not (tmp_path / "run").exists()


class _Router:
    def __init__(self, flying, throttled=None):
        self.flying, self.throttled = flying, throttled

    def in_flight(self):
        return {"task": self.flying, "reflector": 0}

    def throttling(self):
        return [self.throttled] if self.throttled else []


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_live_progress_lines_when_not_a_terminal():
    out, err, clock = io.StringIO(), io.StringIO(), _Clock()
    live = LiveProgress(_Router(7), out=out, err=err, tty=False, interval=10, clock=clock)
    entry = live.begin("seed_vector_search")
    entry.update("writes", 12, 20)
    entry.update("cases", 0, 6)
    clock.now += 5
    live.show()
    assert out.getvalue() == ""                         # less than an interval into the wait
    live.attempt_error("task", "timeout", "role 'task' (m at http://x/v1): timed out after 4s")
    live.attempt_error("task", "timeout", "role 'task' (m at http://x/v1): timed out after 4s")
    live.attempt_error("judge", "rate_limit", "role 'judge': HTTP 429 (slow down)")
    clock.now += 6
    live.show()
    # a 429 is not a retry: the call waits on its endpoint's limiter (issue 28)
    assert out.getvalue() == ("wait  seed_vector_search: cases 0/6, writes 12/20, 7 calls in flight, 2 retries, "
                              "0 failed, 11s\n")
    said = err.getvalue().splitlines()
    assert len(said) == 2 and "timed out after 4s" in said[0] and "HTTP 429 (slow down)" in said[1]
    assert "paced together" in said[1] and "waiting, not failing" in said[1]
    # the rate served over the last minute, not the pace the limiter probes at (issue 41)
    live.router.throttled = {"throttling": True, "pace_rpm": 918.4, "served_rpm": 0.0, "answered_rpm": 582.4,
                             "rate_limited": 41}
    clock.now += 10
    live.show()
    last = out.getvalue().split("wait  ")[-1]           # over two lines: it fits 100 columns
    assert " ".join(last.split()) == ("seed_vector_search: cases 0/6, writes 12/20, 7 calls in "
                                      "flight, throttled to 582/min (41 x 429), 2 retries, 0 failed, 21s")
    assert all(len(line) <= 100 for line in out.getvalue().splitlines())
    live.end(entry)
    clock.now += 30
    live.show()
    assert out.getvalue().count("wait  ") == 2          # nothing in flight: nothing to say


def test_live_progress_bar_on_a_terminal_is_redrawn_and_cleared():
    out, clock = io.StringIO(), _Clock()
    live = LiveProgress(_Router(2), out=out, err=io.StringIO(), tty=True, clock=clock)
    a, b = live.begin("iter_001"), live.begin("iter_002")
    a.update("cases", 3, 5)
    b.update("cases", 1, 5)
    live.show()
    assert out.getvalue().startswith("\r\x1b[K[########............] iter_001, iter_002: cases 4/10")
    live.pause()
    assert out.getvalue().endswith("\r\x1b[K")
    live.end(a)
    live.end(b)
    assert live.status() is None


def test_progress_columns_stay_aligned_for_long_program_ids():
    out = io.StringIO()
    long_id = "seed_my_own_memory_program_with_a_long_name"
    printer = ProgressPrinter(2, out=out, ids=[long_id, "seed_vector_search"], legend=False)
    printer(SeedEvent(program_id=long_id, static_score=0.5))
    printer(SeedEvent(program_id="seed_vector_search", static_score=0.25, case_errors=2))
    printer(IterationEvent(iteration=1, parent_id=long_id, status="failed", title="t",
                           attempts=[{"error": "x" * 300}], best_static_score=0.5, seconds=1.0))
    printer(IterationEvent(iteration=2, parent_id="seed_vector_search", status="failed", title="t",
                           attempts=[{"error": "short"}], best_static_score=0.5, seconds=1.0))
    lines = out.getvalue().splitlines()
    seeds, bests = [lines[0], lines[1]], [line for line in lines if "best 0.500" in line]
    assert seeds[0].index("static") == seeds[1].index("static")
    assert "[2 case errors]" in seeds[1]
    assert len(bests) == 2 and bests[0].index("best ") == bests[1].index("best ")
    assert all(len(line) <= printer.width for line in lines)


def test_a_wait_line_before_the_evaluation_has_counted_anything_says_starting():
    live = LiveProgress(_Router(13), out=io.StringIO(), err=io.StringIO(), tty=False, interval=10, clock=_Clock())
    entry = live.begin("seed_vector_search")
    assert live.status().startswith("seed_vector_search: starting, 13 calls in flight")
    entry.update("cases", 0, 6)
    assert live.status().startswith("seed_vector_search: cases 0/6, 13 calls in flight")

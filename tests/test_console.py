"""Console lines fit the terminal without losing a word, and say what their terms mean."""
from __future__ import annotations

import io
from types import SimpleNamespace

from mstar.run import events as ev
from mstar.run.console import (LEGEND, console_width, done_lines, fit, legend_lines, next_lines, offline_note,
                               pack, split_line)
from mstar.run.console import held_out_lines as verdict
from mstar.run.progress import ProgressPrinter


def words(lines):
    return " ".join(lines).split()


def test_pack_fills_lines_then_continues_indented_and_keeps_every_word():
    segs = ["iter   1/20  parent seed_vector_search", "child iter_001 static 0.667 (+0.213) GAIN",
            "best 0.667", "spend 436 calls 391.4k tok -> ~4.3k calls 2.39M tok", "eta 23s"]
    lines = pack(segs, 60, indent=10)
    assert len(lines) > 2 and all(len(line) <= 60 for line in lines)
    assert all(line.startswith(" " * 10) for line in lines[1:])
    assert words(lines) == words(segs)
    assert pack(segs, 300) == ["  ".join(segs)]   # a wide terminal: one line, as before


def test_a_word_wider_than_the_line_is_cut_into_pieces_that_keep_every_character():
    path = "runs/" + "x" * 150 + "/best_program.py"
    lines = pack(["files   " + path], 70)
    assert all(len(line) <= 70 for line in lines)
    assert "".join("".join(lines).split()) == "files" + path


def test_the_width_is_the_terminals_and_100_for_a_pipe(monkeypatch):
    monkeypatch.setenv("COLUMNS", "72")
    assert console_width() == 72
    monkeypatch.delenv("COLUMNS")
    assert console_width() == 100   # pytest's stdout is not a terminal
    monkeypatch.setenv("COLUMNS", "10")
    assert console_width() == 40    # never so narrow that the indents leave no room


def test_fit_keeps_a_short_line_and_wraps_prose_under_its_label():
    assert fit("plan    short", 100) == ["plan    short"]
    long = "plan    " + " ".join(f"word{i}" for i in range(40))
    lines = fit(long, 50)
    assert all(len(line) <= 50 for line in lines) and lines[1].startswith(" " * 8 + "word")
    assert words(lines) == long.split()


def test_the_legend_defines_every_term_the_progress_lines_use():
    lines = legend_lines(100)
    text = " ".join(lines)
    for term in ("static", "rotating pool", "GAIN", "same answers", "stalled", "static jump", "check", "tied"):
        assert term in text, term
    assert all(len(line) <= 100 for line in lines) and len(lines) == len(LEGEND) + 1
    assert all(len(line) <= 50 for line in legend_lines(50))


def test_offline_note_says_what_offline_scores_are_only_when_a_role_is_offline():
    note = " ".join(offline_note({"task": "offline", "reflector": "offline"}, 100))
    assert "deterministic stand-in" in note and "retrieves" in note and "not how well a model reasons" in note
    assert offline_note({"task": "openai", "reflector": "openai"}) == []
    part = " ".join(offline_note({"task": "openai", "judge": "offline"}))
    assert "judge role runs on the offline backend" in part and "retrieves" not in part
    assert all(len(line) <= 60 for line in offline_note({"task": "offline"}, 60))


def _summary(**kw):
    base = dict(stop_reason=None, stop_kind=None, best_id="iter_019", best_static=0.952, best_seed_static=0.453,
                children_added=20, iterations=20, seconds=42.5, early_stop=None, test_score=0.873,
                best_seed_id="seed_vector_search", best_seed_test=0.447,
                test_gain={"mean": 0.426, "low": 0.376, "high": 0.476, "n": 357, "significant": True})
    base.update(kw)
    return SimpleNamespace(**base)


def test_the_end_of_a_run_fits_100_columns_and_keeps_its_verdict_and_commands():
    root = "runs/sample-s0-20261206-062406"
    lines = done_lines(_summary(), root, 100)
    assert all(len(line) <= 100 for line in lines), [line for line in lines if len(line) > 100]
    text = " ".join(words(lines))
    assert "+0.426 [+0.376, +0.476] (95% paired, 357 questions) -- the gain holds" in text
    commands = {line.split("mstar ", 1)[1].split()[0] for line in lines if "mstar " in line}
    assert {"ui", "serve", "export", "lineage", "report"} <= commands
    assert f"mstar export {root} --out best.py" in text and f"mstar serve {root}/best_program.py --store" in text
    assert "next mstar ui (live" in text   # the runs folder is the default one: no --runs-dir needed


def test_every_next_command_parses_as_written(tmp_path):
    """The `next` lines are meant to be copied: each must be a command line `mstar` accepts."""
    from mstar.cli import build_parser
    from mstar.run.console import next_commands
    for root in ("runs/sample-s0-1", str(tmp_path / "elsewhere" / "r")):
        for command, _ in next_commands(root):
            args = build_parser().parse_args(command.split()[1:])
            assert args.command == command.split()[1]
        assert next_commands(root)[0][0] == ("mstar ui" if root.startswith("runs/") else
                                             f"mstar ui --runs-dir {tmp_path / 'elsewhere'}")


def test_a_stopped_run_says_how_to_go_on_and_test_lines_fit_narrow_terminals():
    lines = done_lines(_summary(stop_reason="the LLM endpoint failed: " + "connection refused " * 8,
                                stop_kind="endpoint", test_score=None), "runs/r", 80)
    assert all(len(line) <= 80 for line in lines)
    assert any(line.startswith("resume  mstar resume runs/r") for line in lines)
    assert verdict(_summary(test_score=None)) == ["test    not run"]
    assert words(verdict(_summary(test_gain=None), 40)) == "test iter_019 0.873 (the best program is the best seed)".split()
    long = "runs/" + "a-very-long-run-folder-name" * 4
    assert all(len(line) <= 100 for line in next_lines(long, 100))
    assert split_line(25, 0, 50, "hashing-1024", 100) == \
        ["split   static 25 | rotating pool 0 | training episodes 50 | embeddings hashing-1024"]


def _iteration(it, parent, child, static, delta, best, *, gain=False, parent_gain=False, no_change=False):
    return ev.IterationEvent(
        iteration=it, parent_id=parent, status="ok", program_id=child, static_score=static, delta=delta,
        best_static_score=best, no_change=no_change, title=f"change number {it} " + "with a long title " * 6,
        evidence={"mean": delta, "significant": parent_gain},
        progress_evidence={"mean": delta, "significant": gain}, seconds=1.0,
        llm={"calls": 111, "prompt_tokens": 60000, "completion_tokens": 700})


def _first_run(printer):
    for pid, score in (("seed_vector_search", 0.453), ("seed_llm_summarizer", 0.42), ("seed_experience_learner", 0.02)):
        printer(ev.SeedEvent(program_id=pid, static_score=score, llm={"calls": 100, "prompt_tokens": 45000}))
    printer(_iteration(1, "seed_vector_search", "iter_001", 0.667, 0.213, 0.667, gain=True, parent_gain=True))
    printer(_iteration(2, "iter_001", "iter_002", 0.667, 0.0, 0.667, no_change=True))
    printer(_iteration(3, "iter_002", "iter_003", 0.947, 0.28, 0.947))   # a new best, no paired gain
    printer(_iteration(4, "iter_003", "iter_004", 0.96, 0.013, 0.96, gain=True))
    printer(ev.ConfirmationEvent(items=20, scores={f"iter_00{i}": {"union": 0.9, "n": 45} for i in range(1, 5)},
                                 confirmed_id="iter_004", static_id="iter_004", rule="confirmed",
                                 rounds=[{}, {}], stop="tied"))
    printer(ev.TestEvent(program_id="iter_004", test_score=0.873))


def test_a_first_run_prints_the_legend_once_and_every_line_fits():
    out = io.StringIO()
    _first_run(ProgressPrinter(total=20, out=out, width=100, ids=["seed_experience_learner"], patience=20))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("key ") and sum(line.startswith("key ") for line in lines) == 1
    assert all(len(line) <= 100 for line in lines), [line for line in lines if len(line) > 100]
    said = " ".join(lines)
    assert said.count("(static jump, not a paired gain)") == 1
    jump = next(i for i, line in enumerate(lines) if "(static jump" in line)
    assert "best 0.947" in lines[jump] and "child iter_003" in lines[jump - 1]
    assert "tied: no verdict in reach" in " ".join(words(lines))


def test_a_resumed_or_quiet_run_prints_no_legend():
    resumed, quiet = io.StringIO(), io.StringIO()
    _first_run(ProgressPrinter(total=20, out=resumed, first_iteration=5, width=100))
    _first_run(ProgressPrinter(total=20, out=quiet, quiet=True))
    assert "key " not in resumed.getvalue() and quiet.getvalue() == ""


def test_narrow_terminals_get_the_same_words_on_more_lines():
    wide, narrow = io.StringIO(), io.StringIO()
    _first_run(ProgressPrinter(total=20, out=wide, width=250, legend=False))
    _first_run(ProgressPrinter(total=20, out=narrow, width=60, legend=False))
    assert all(len(line) <= 60 for line in narrow.getvalue().splitlines())
    assert words(wide.getvalue().splitlines()) == words(narrow.getvalue().splitlines())
    assert len(narrow.getvalue().splitlines()) > len(wide.getvalue().splitlines())

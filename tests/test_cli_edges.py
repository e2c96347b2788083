"""The command line's edges a newcomer meets first (issue 40, point 6): no abbreviated flags, an
unknown flag answered with its subcommand's usage and the flag it is close to, a closed output
pipe that is no crash, `memory info` on a folder that is no store, and the run's champion as a
row of `mstar baselines`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mstar.cli import build_parser, main
from mstar.run.views import RunView
from run_helpers import copy_run, lineage, small_run

ROOT = Path(__file__).resolve().parents[1]


def test_a_flag_is_never_taken_for_a_longer_one(capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["evolve", "--iteration", "3"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: mstar evolve ") and "unrecognized arguments: --iteration 3" in err
    assert "did you mean --iterations?" in err
    assert build_parser().parse_args(["evolve", "--iterations", "3"]).iterations == 3
    with pytest.raises(SystemExit):   # the nested parsers too (`mstar memory info`)
        build_parser().parse_args(["memory", "info", "--js", "x"])
    assert "usage: mstar memory info " in capsys.readouterr().err


def test_an_unknown_flag_shows_its_subcommands_usage_and_the_close_flag(capsys):
    with pytest.raises(SystemExit):
        main(["evolve", "--iters", "3"])
    err = capsys.readouterr().err
    assert err.startswith("usage: mstar evolve ")
    assert "mstar evolve: error: unrecognized arguments: --iters 3 (--iters: did you mean --iterations?)" in err
    with pytest.raises(SystemExit):
        main(["runs", "--bogus"])
    err = capsys.readouterr().err
    assert err.startswith("usage: mstar runs ") and "did you mean" not in err
    with pytest.raises(SystemExit):   # a subcommand nobody has is still the top-level parser's to say
        main(["evolv"])
    assert "usage: mstar [-h]" in capsys.readouterr().err


def test_the_sandbox_checker_takes_no_abbreviations_either(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["check", str(tmp_path / "p.py"), "--allow", "os"])
    assert "unrecognized arguments: --allow os" in capsys.readouterr().err


def test_a_resume_piped_into_head_is_stopped_not_crashed_and_goes_on(tmp_path, tmp_path_factory):
    src = small_run(tmp_path_factory)
    run = copy_run(src, tmp_path / "run")
    lines = (src / "lineage.jsonl").read_text().splitlines(keepends=True)
    (run / "lineage.jsonl").write_text("".join(lines[:5]))  # 3 seeds, iterations 1 and 2 of 4
    (run / "summary.json").unlink()
    # The reader takes one line and goes away (what `| head -n 1` does): the run's next line
    # meets a closed pipe, whenever it comes.
    proc = subprocess.Popen([sys.executable, "-m", "mstar.cli", "resume", str(run), "--no-preflight"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("run ")
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait() == 141 and "Traceback" not in err
    view = RunView(run)
    assert view.status == "stopped" and view.stop.kind == "interrupted" and "closed the pipe" in view.stop.reason
    assert main(["resume", str(run), "--quiet"]) == 0
    assert [e for e in lineage(run) if e["event"] != "stopped"] == lineage(src)


def test_memory_info_on_a_folder_that_is_no_store_says_so(tmp_path, capsys):
    (tmp_path / "notes").mkdir()
    assert main(["memory", "info", str(tmp_path / "notes")]) == 2
    err = capsys.readouterr().err
    assert "is not a memory store (it has no store.json)" in err and "give the program" not in err
    assert "mstar serve PROGRAM --store DIR" in err
    assert main(["memory", "info", str(tmp_path / "nowhere")]) == 2
    assert "nowhere is not a memory store (no such folder)" in capsys.readouterr().err
    assert main(["memory", "migrate", str(tmp_path / "notes"), "--program", "vector_search"]) == 2
    assert "is not a memory store" in capsys.readouterr().err


def test_baselines_given_a_run_has_a_row_for_its_champion_on_the_runs_task(tmp_path_factory, capsys):
    run = small_run(tmp_path_factory)
    champion = json.loads((run / "summary.json").read_text())["best_id"]
    assert main(["baselines", "--run", str(run), "--programs", "vector_search", "--limit", "4", "--quiet"]) == 0
    table = capsys.readouterr().out
    rows = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ")]
    assert "Vector Search" in rows and champion in rows


def test_baselines_refuses_a_run_without_a_champion(tmp_path, tmp_path_factory, capsys):
    run = copy_run(small_run(tmp_path_factory), tmp_path / "run")
    (run / "summary.json").unlink()
    assert main(["baselines", "--run", str(run), "--quiet"]) == 2
    assert "has no champion yet" in capsys.readouterr().err


class _Flying:
    """Router stand-in for the live display: one call in flight, no throttling."""
    def in_flight(self):
        return {"task": 1}

    def throttling(self):
        return []


def test_the_live_display_thread_stops_quietly_at_a_closed_pipe(monkeypatch):
    import os
    import threading

    from mstar.run.eval_progress import LiveProgress
    escaped = []
    monkeypatch.setattr(threading, "excepthook", lambda args: escaped.append(args.exc_type))
    read_end, write_end = os.pipe()
    os.close(read_end)                                   # the reader went away
    with os.fdopen(write_end, "w") as out:
        live = LiveProgress(_Flying(), out=out, err=out, tty=False, interval=0, tick=0.01)
        live.begin("seed_vector_search")
        live.start()
        live._thread.join(timeout=60)                    # it ends by itself, at its first line
        assert not live._thread.is_alive() and escaped == []
        try:
            out.close()
        except BrokenPipeError:
            pass

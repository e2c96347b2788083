"""Crash-safe runs: kill a run with SIGKILL at random points and resume it to the same lineage
as a run that was never interrupted; damaged and foreign run folders give clear messages."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
import time
from pathlib import Path

import pytest

from mstar.cli import main
from mstar.run.store import RunStore
from run_helpers import SMALL_ARGS, copy_run, lineage, lock_holders, small_run

ROOT = Path(__file__).resolve().parents[1]
TRIALS = 10              # runs killed mid-run and resumed
FINAL_EVENTS = 9         # 3 seeds + 4 iterations + confirmation + test


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return -1


def _kill_run(out: Path, after_lines: int, delay: float, record: dict) -> None:
    """Start a run in a subprocess and SIGKILL it `delay` s after lineage.jsonl has `after_lines`
    lines (0: once config.json exists). When the run ended before the kill (a fast machine),
    try again in a fresh folder with no delay, so every trial is a real crash."""
    for attempt in range(3):
        folder = out if attempt == 0 else out.with_name(f"{out.name}-retry{attempt}")
        _kill_once(folder, after_lines, delay if attempt == 0 else 0.0, record)
        record["folder"] = str(folder)
        if record["returncode"] != 0 and (folder / "config.json").exists() \
                and record["lines_at_kill"] < FINAL_EVENTS:
            return


def _kill_once(out: Path, after_lines: int, delay: float, record: dict,
               command: list[str] | None = None) -> None:
    """Run `command` (default: a new run into `out`) and SIGKILL it as _kill_run describes."""
    env = {**os.environ, "PYTHONHASHSEED": str(random.randint(1, 10_000))}  # another hash seed each time
    command = command or [sys.executable, "evolve.py", *SMALL_ARGS, "--out", str(out), "--quiet"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            ready = (out / "config.json").exists() if after_lines == 0 else _lines(out / "lineage.jsonl") >= after_lines
            if ready:
                time.sleep(delay)
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)  # the engine only: its sandbox workers must die with it
        proc.wait(timeout=30)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever of this run's own group is left
        except ProcessLookupError:
            pass
    record.update(returncode=proc.returncode, lines_at_kill=_lines(out / "lineage.jsonl"),
                  stderr=proc.stderr.read().decode(errors="replace")[-2000:])
    proc.stderr.close()


def test_sigkill_at_random_points_then_resume_gives_the_same_lineage(tmp_path, tmp_path_factory, capsys):
    baseline = lineage(small_run(tmp_path_factory))
    assert len(baseline) == FINAL_EVENTS
    rng = random.Random(20261130)
    # Spread the kill points over every phase: before the first event, during each seed and
    # iteration, during the final test evaluation; a random delay lands anywhere inside it.
    plan = [(k, rng.uniform(0.0, 0.8 if k < 7 else 0.4)) for k in [0, 1, 2, 3, 4, 5, 5, 6, 7, 7][:TRIALS]]
    records = [dict(after=k, delay=round(d, 3)) for k, d in plan]
    t0 = time.perf_counter()
    landed = 0
    # Three killed runs at a time (the kills are triggered by events, not by the clock), and each
    # killed run is resumed here as soon as it is dead, while the next ones are being killed.
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(_kill_run, tmp_path / f"t{i}", *plan[i], records[i]) for i in range(TRIALS)]
        for i, fut in enumerate(futures):
            fut.result()
            rec = records[i]
            run = Path(rec["folder"])
            assert rec["returncode"] in (0, -signal.SIGKILL), rec
            if not (run / "config.json").exists():
                continue  # killed before the run folder was written: nothing to resume
            if rec["returncode"] == -signal.SIGKILL and rec["lines_at_kill"] < FINAL_EVENTS:
                landed += 1
            rc = main(["resume", str(run), "--quiet"])
            out = capsys.readouterr()
            assert rc == 0, (rec, out.err[-2000:])
            got = lineage(run)
            if got != baseline:
                diff = [(j, sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)))
                        for j, (a, b) in enumerate(zip(baseline, got)) if a != b]
                pytest.fail(f"trial {i} {rec}: lineage differs from the uninterrupted run at (event, keys) {diff} "
                            f"(lengths {len(baseline)} vs {len(got)}); differences only in 'llm' token counts "
                            "usually mean an offline model depends on PYTHONHASHSEED (set iteration order)")
            assert json.loads((run / "summary.json").read_text())["format_version"] >= 1
            # This process forks the next trials' runs meanwhile: a child forked while the resume
            # held the lock shares it until its exec closes the descriptor (close-on-exec), which
            # on a loaded machine can come a moment after the resume returned. A lock still held
            # after that is the resume's.
            deadline = time.monotonic() + 5
            while RunStore(run).is_locked() and time.monotonic() < deadline:
                time.sleep(0.01)
            assert not RunStore(run).is_locked(), (rec, os.getpid(), lock_holders(run / ".lock"))
    t_total = time.perf_counter() - t0
    print(f"resume trials: {landed} kills landed mid-run of {TRIALS}; {t_total:.1f} s in all")
    assert landed == TRIALS >= 10, records


def test_a_killed_resume_is_resumed_too(tmp_path, tmp_path_factory, capsys):
    """Killed during iteration 2, resumed, the resume killed during iteration 4, resumed again:
    still the uninterrupted run's lineage, and both resumes on record."""
    baseline = lineage(small_run(tmp_path_factory))
    record: dict = {}
    _kill_run(tmp_path / "run", 4, 0.2, record)
    run = Path(record["folder"])
    assert record["returncode"] == -signal.SIGKILL and record["lines_at_kill"] < 6, record
    resume = [sys.executable, "-m", "mstar.cli", "resume", str(run), "--quiet"]
    second: dict = {}
    _kill_once(run, 6, 0.2, second, command=resume)
    assert second["returncode"] == -signal.SIGKILL and second["lines_at_kill"] < FINAL_EVENTS, second
    assert main(["resume", str(run), "--quiet"]) == 0, capsys.readouterr().err[-2000:]
    assert lineage(run) == baseline
    assert len((run / "resumes.jsonl").read_text().splitlines()) == 2


def test_partial_last_line_and_evaluated_but_unrecorded_iteration(tmp_path, tmp_path_factory, capsys):
    """Killed while appending the event of an iteration that added a child: the child was already
    evaluated and its files written (they are left in place), the event is half a line, and so is
    the last usage record."""
    src = small_run(tmp_path_factory)
    run = copy_run(src, tmp_path / "run")
    lines = (src / "lineage.jsonl").read_text().splitlines(keepends=True)
    at = max(i for i, l in enumerate(lines) if json.loads(l)["event"] == "iteration" and json.loads(l)["status"] == "ok")
    it = json.loads(lines[at])["iteration"]
    (run / "lineage.jsonl").write_text("".join(lines[:at]) + lines[at][: len(lines[at]) // 2])
    usage = (src / "llm_usage.jsonl").read_bytes()
    (run / "llm_usage.jsonl").write_bytes(usage[: len(usage) - 40])
    (run / "summary.json").unlink()
    pid = json.loads(lines[at])["program_id"]
    assert (run / "programs" / f"{pid}.py").exists() and (run / "cases" / f"{pid}.static.json").exists()
    assert main(["lineage", str(run)]) == 0  # inspection copes with the partial line
    assert "partial write" in capsys.readouterr().out
    assert main(["resume", str(run), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"lineage.jsonl:{at + 1}: the last line is a partial write" in err and "llm_usage.jsonl" in err
    assert lineage(run) == lineage(src)
    resumes = [json.loads(l) for l in (run / "resumes.jsonl").read_text().splitlines()]
    assert resumes[-1]["next_iteration"] == it and resumes[-1]["seeds_done"] == 3
    # the usage ledger stays line-per-record: the cut record was dropped, not glued to the next
    assert all(json.loads(l) for l in (run / "llm_usage.jsonl").read_text().splitlines())


def test_resume_restores_the_reflectors_replay_counters_from_the_events(tmp_path, tmp_path_factory):
    """Each iteration event lists the replay-mode prompts it asked (replay_keys); rebuilding a
    run counts them again, so a redone iteration's n-th identical prompt (a compile-fix prompt an
    earlier iteration also asked, say) replays the same stored reply as before the crash."""
    from mstar.llm.router import LLMRouter
    from mstar.loop import Evolution
    from mstar.run.resume import load_split, load_state, rebuild
    from mstar.tasks import load_task

    src = small_run(tmp_path_factory)
    run = copy_run(src, tmp_path / "run")
    events = [json.loads(l) for l in (src / "lineage.jsonl").read_text().splitlines()][:5]  # seeds, it. 1-2
    assert [e["event"] for e in events] == ["seed"] * 3 + ["iteration"] * 2
    assert all(e["replay_keys"] == [] for e in events[3:])  # the offline backend is never cached
    events[3]["replay_keys"] = ["fix-prompt", "first-prompt-1"]
    events[4]["replay_keys"] = ["fix-prompt"]
    (run / "lineage.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    store = RunStore(run)
    state = load_state(store)
    task = load_task(state.config.task)
    router = LLMRouter.from_config(state.config.llm, seed=state.config.evolution.seed)
    evo = Evolution(state.config, task, router, store, split=load_split(store, task))
    rebuild(evo, state, store)
    assert router._seen == {"fix-prompt": 2, "first-prompt-1": 1}
    assert router.replay_since(0) == ["fix-prompt", "first-prompt-1", "fix-prompt"]


def test_resume_can_set_a_new_number_of_iterations(tmp_path, tmp_path_factory, capsys):
    """A run cut off after iteration 2 of 4 goes on to 5 when asked; fewer than are done is refused."""
    src = small_run(tmp_path_factory)
    run = copy_run(src, tmp_path / "run")
    lines = (src / "lineage.jsonl").read_text().splitlines(keepends=True)
    (run / "lineage.jsonl").write_text("".join(lines[:5]))  # 3 seeds, iterations 1 and 2
    (run / "summary.json").unlink()
    assert main(["resume", str(run), "--iterations", "1", "--quiet"]) == 2
    assert "2 iteration(s) are done already" in capsys.readouterr().err
    assert main(["resume", str(run), "--iterations", "5", "--quiet"]) == 0
    events = lineage(run)
    assert [e.get("iteration") for e in events if e["event"] == "iteration"] == [1, 2, 3, 4, 5]
    assert events[-1]["event"] == "test"
    assert events[:7] == lineage(src)[:7]  # the first four iterations are what they were
    assert json.loads((run / "config.json").read_text())["evolution"]["iterations"] == 5


def test_finished_run_is_not_resumed(tmp_path, tmp_path_factory, capsys):
    run = copy_run(small_run(tmp_path_factory), tmp_path / "run")
    before = (run / "lineage.jsonl").read_text()
    assert main(["resume", str(run)]) == 0
    assert "already finished" in capsys.readouterr().out
    assert (run / "lineage.jsonl").read_text() == before


@pytest.mark.parametrize("damage, message", [
    (lambda r: _edit_config(r, lambda c: c.pop("format_version")), "older mstar (run format 0"),
    (lambda r: _edit_config(r, lambda c: c.update(format_version=99)), "newer than this mstar reads"),
    (lambda r: (r / "config.json").write_text((r / "config.json").read_text()[:50]), "config.json: not valid JSON"),
    (lambda r: (r / "config.json").unlink(), "has no config.json: not an mstar run folder"),
    (lambda r: _cut_middle_line(r / "lineage.jsonl"), "lineage.jsonl:3: not a JSON line"),
    (lambda r: (r / "programs" / "iter_002.py").unlink(), "iter_002.py is missing"),
])
def test_damaged_or_foreign_run_folders_get_a_clear_message(tmp_path, tmp_path_factory, capsys, damage, message):
    run = copy_run(small_run(tmp_path_factory), tmp_path / "run")
    _unfinish(run)
    damage(run)
    assert main(["resume", str(run)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_running_run_is_not_resumed_twice(tmp_path, tmp_path_factory, capsys):
    run = copy_run(small_run(tmp_path_factory), tmp_path / "run")
    _unfinish(run)
    holder = RunStore(run)
    holder.acquire_lock()
    try:
        assert main(["resume", str(run)]) == 2
        assert "in use by another mstar process" in capsys.readouterr().err
        assert main(["runs", "--runs-dir", str(tmp_path), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)[0]["status"] == "running"
    finally:
        holder.release_lock()
    assert main(["runs", "--runs-dir", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["status"] == "crashed"


def _unfinish(run: Path) -> None:
    lines = (run / "lineage.jsonl").read_text().splitlines(keepends=True)
    (run / "lineage.jsonl").write_text("".join(lines[:-2]))  # drop iteration 4 and the test event


def _edit_config(run: Path, change) -> None:
    cfg = json.loads((run / "config.json").read_text())
    change(cfg)
    (run / "config.json").write_text(json.dumps(cfg))


def _cut_middle_line(path: Path) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[2] = lines[2][:30] + "\n"
    path.write_text("".join(lines))


def test_a_run_stopped_by_its_budget_goes_on_with_a_new_one(tmp_path, tmp_path_factory, capsys):
    src = small_run(tmp_path_factory)
    run = copy_run(src, tmp_path / "run")
    lines = (src / "lineage.jsonl").read_text().splitlines(keepends=True)
    stopped = json.dumps({"event": "stopped", "reason": "token budget reached", "iteration": 3, "llm": {}})
    (run / "lineage.jsonl").write_text("".join(lines[:6]) + stopped + "\n")
    assert main(["runs", "--runs-dir", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["status"] == "stopped"
    assert main(["resume", str(run), "--quiet", "--max-tokens", "100000000"]) == 0
    assert json.loads((run / "config.json").read_text())["llm"]["max_tokens"] == 100000000
    assert [e for e in lineage(run) if e["event"] != "stopped"] == lineage(src)

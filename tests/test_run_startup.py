"""What a run does before its seeds' first calls runs side by side with its preflight's wait for
its replies: the sandbox's fork server starts (sandbox.engine.launchers.warm_default_launcher;
its ~0.8 s import of chromadb was on every run's path, between the run's start and its seeds'
first calls) and the split is computed (mstar/library/launch.py, _split_ahead)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import mstar
import mstar.split.for_run as for_run

from failure_helpers import SMALL, endpoint
from gate_helpers import wait_until
from mstar.llm.preflight import PROMPT
from mstar.testing.fake_server import FakeOpenAIServer, offline_responder
from sandbox.engine.launch import SubprocessLauncher
from sandbox.engine.launchers import set_default_launcher, warm_default_launcher

ROOT = Path(__file__).resolve().parents[1]


def _fork_servers_of(pid: int) -> list[int]:
    """The fork servers started by process `pid` (their command line names it as their parent)."""
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(b"sandbox.worker.forkserver" in part for part in cmd) and str(pid).encode() in cmd \
                and b"--parent-pid" in cmd:
            found.append(int(entry))
    return found


def _held_preflight():
    """A fake server's responder that holds the preflight's calls until `release` is set."""
    answer = offline_responder()
    release, held = threading.Event(), []

    def respond(model, messages):
        if messages[-1]["content"] == PROMPT[-1]["content"]:
            held.append(model)
            release.wait(60)             # until the test has looked
        return answer(model, messages)
    return respond, release, held


def _up_during_the_preflight(srv, release, held, argv) -> None:
    """Run `mstar <argv>` while the preflight's calls are held; the fork server of that process is
    up before they are answered."""
    release.clear()
    held.clear()
    proc = subprocess.Popen([sys.executable, "-m", "mstar.cli", *argv, "--quiet"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until(lambda: held or proc.poll() is not None, timeout=60)   # the preflight has asked, and waits
        assert held, proc.communicate()[1].decode()[-2000:]
        wait_until(lambda: _fork_servers_of(proc.pid), timeout=30)
    finally:
        release.set()
    _, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err.decode()[-2000:]


def test_the_fork_server_is_up_while_the_preflight_still_waits_for_its_replies(tmp_path):
    respond, release, held = _held_preflight()
    run = tmp_path / "run"
    with FakeOpenAIServer(respond) as srv:
        llm = endpoint(srv.base_url, tmp_path / "cache")
        _up_during_the_preflight(srv, release, held, ["evolve", *SMALL, "--iterations", "1", "--out", str(run), *llm])
        # Cut back to its seed, as a run killed then: resumed, it warms up too.
        lines = (run / "lineage.jsonl").read_text().splitlines(keepends=True)
        assert json.loads(lines[0])["event"] == "seed" and json.loads(lines[-1])["event"] == "test"
        (run / "lineage.jsonl").write_text(lines[0])
        (run / "summary.json").unlink()
        _up_during_the_preflight(srv, release, held, ["resume", str(run)])
    events = [json.loads(line)["event"] for line in (run / "lineage.jsonl").read_text().splitlines()]
    assert events[0] == "seed" and "iteration" in events and events[-1] == "test"


def test_nothing_is_warmed_where_sessions_start_fresh_interpreters():
    previous = set_default_launcher(SubprocessLauncher())
    try:
        assert warm_default_launcher() is False
    finally:
        set_default_launcher(previous)


def test_the_split_is_computed_while_the_preflight_waits_and_is_the_one_the_run_uses(tmp_path, monkeypatch):
    respond, release, held = _held_preflight()
    made, real = [], for_run.split_for
    monkeypatch.setattr(for_run, "split_for", lambda *a, **k: made.append(real(*a, **k)) or made[-1])
    runs = []
    with FakeOpenAIServer(respond) as srv:
        t = threading.Thread(target=lambda: runs.append(mstar.evolve(
            "sample", size=0.3, static_size=6, seeds=["vector_search"], iterations=1, quiet=True,
            out=tmp_path / "run", base_url=srv.base_url, model="m", no_cache=True)))
        t.start()
        try:
            wait_until(lambda: held and made, timeout=60)    # the split is done, the preflight still waits
            assert not release.is_set()
        finally:
            release.set()
        t.join(240)
    [run] = runs
    assert len(made) == 1 and json.loads((tmp_path / "run" / "split.json").read_text()) == made[0].to_dict()
    assert run.champion.id


def test_a_split_that_fails_fails_the_run_with_its_own_error(tmp_path, monkeypatch):
    def broken(*a, **k):
        raise ValueError("no static set can be drawn from these queries")
    monkeypatch.setattr(for_run, "split_for", broken)
    with pytest.raises(ValueError, match="no static set can be drawn"):
        mstar.evolve("sample", size=0.3, static_size=6, iterations=1, quiet=True, no_preflight=True,
                     out=tmp_path / "run")

"""The sandbox's fork server starts while a run's preflight and split run, not when the first
seed asks for a worker (sandbox.engine.launchers.warm_default_launcher): its ~0.8 s import of
chromadb was on every run's path, between the run's start and its seeds' first calls."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

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
    answer = offline_responder()
    release, held = threading.Event(), []

    def respond(model, messages):
        if messages[-1]["content"] == PROMPT[-1]["content"]:
            held.append(model)
            release.wait(60)             # the preflight's calls wait here until the test has looked
        return answer(model, messages)

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

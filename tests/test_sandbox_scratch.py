"""Workers' scratch directories do not pile up when an engine is killed (sandbox/engine/scratch.py).

Real engines in subprocesses, each with its own temp folder (TMPDIR), real workers; one engine
is killed with SIGKILL, as a user's run can be, and the next engine on the machine cleans up.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from test_sandbox_host import kb

ROOT = str(Path(__file__).resolve().parents[1])

PROGRAM = kb('''    def __init__(self, toolkit):
        self.notes = []

    def write(self, item, raw_text):
        self.notes.append(raw_text)

    def read(self, query):
        return " ".join(self.notes)[:100]
''')

# An engine: starts `n` workers (each loads PROGRAM), says READY, then waits or ends cleanly.
ENGINE = '''
import sys, time
sys.path.insert(0, sys.argv[1])
from sandbox.engine.session import ProgramSession
sessions = [ProgramSession(open(sys.argv[2]).read()) for _ in range(int(sys.argv[3]))]
for s in sessions:
    s.start()
print("READY", flush=True)
if sys.argv[4] == "hang":
    time.sleep(600)
for s in sessions:
    s.close()
'''


@pytest.fixture
def temp_folder():
    # Under /tmp itself: the workers run as nobody, and pytest's tmp_path is closed to others.
    path = tempfile.mkdtemp(prefix="mstar-scratch-test-")
    os.chmod(path, 0o711)
    yield Path(path)
    shutil.rmtree(path, ignore_errors=True)


def _engine(folder: Path, workers: int, mode: str) -> subprocess.Popen:
    prog = folder.parent / f"{folder.name}-program.py"
    prog.write_text(PROGRAM)
    env = {**os.environ, "TMPDIR": str(folder)}
    proc = subprocess.Popen([sys.executable, "-c", ENGINE, ROOT, str(prog), str(workers), mode],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.strip() == "READY", proc.stderr.read() if proc.poll() is not None else line
    return proc


def _names(folder: Path, prefix: str) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(prefix))


def _age(folder: Path, seconds: float) -> None:
    for lock in folder.glob("mstar-eng-*.lock"):
        past = time.time() - seconds
        os.utime(lock, (past, past))


def test_a_killed_engine_leaves_its_directories_and_the_next_engine_removes_them(temp_folder):
    killed = _engine(temp_folder, 3, "hang")
    killed_dirs = _names(temp_folder, "mstar-sbx-")
    assert len(killed_dirs) >= 3   # its workers (and perhaps spares) are up
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    time.sleep(0.5)   # its workers die with it (PR_SET_PDEATHSIG)
    assert set(killed_dirs) <= set(_names(temp_folder, "mstar-sbx-")), "nothing removed them"
    [dead_lock] = _names(temp_folder, "mstar-eng-")
    token = dead_lock[len("mstar-eng-"):-len(".lock")]
    assert all(name.startswith(f"mstar-sbx-{token}-") for name in killed_dirs)

    # A directory of another kind and a fresh dead lock are not touched; an aged one is.
    (temp_folder / "mstar-sbx-legacy0001").mkdir()
    alive = _engine(temp_folder, 1, "hang")
    try:
        left = _names(temp_folder, "mstar-sbx-")
        assert set(killed_dirs) <= set(left), "a lock younger than the grace period was swept"
        _age(temp_folder, 120)
        ended = _engine(temp_folder, 1, "end")   # its first worker sweeps
        assert ended.wait(timeout=60) == 0
        left = _names(temp_folder, "mstar-sbx-")
        assert not set(killed_dirs) & set(left), left
        assert dead_lock not in _names(temp_folder, "mstar-eng-")
        assert "mstar-sbx-legacy0001" in left
        # The live engine's lock is held: its worker's directory stays, aged or not.
        alive_dirs = [n for n in left if n != "mstar-sbx-legacy0001"]
        assert alive_dirs and len(_names(temp_folder, "mstar-eng-")) == 1
    finally:
        alive.kill()
        alive.wait(timeout=30)


def test_an_engine_that_ends_cleanly_leaves_nothing(temp_folder):
    proc = _engine(temp_folder, 2, "end")
    assert proc.wait(timeout=60) == 0, proc.stderr.read()
    assert _names(temp_folder, "mstar-") == []


def test_sweep_takes_only_free_locks_past_the_grace_period(temp_folder, monkeypatch):
    import fcntl

    from sandbox.engine import scratch

    monkeypatch.setattr(tempfile, "tempdir", str(temp_folder))
    for token in ("free0", "held0", "young0"):
        (temp_folder / f"mstar-eng-{token}.lock").write_text("")
        (temp_folder / f"mstar-sbx-{token}-abc").mkdir()
        (temp_folder / f"mstar-fsrv-{token}-abc").mkdir()
    _age(temp_folder, 120)
    os.utime(temp_folder / "mstar-eng-young0.lock")   # just now
    fd = os.open(temp_folder / "mstar-eng-held0.lock", os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert sorted(scratch.sweep()) == ["free0"]
    finally:
        os.close(fd)
    left = _names(temp_folder, "mstar-")
    assert not [n for n in left if "free0" in n]
    assert {"mstar-sbx-held0-abc", "mstar-fsrv-held0-abc", "mstar-sbx-young0-abc"} <= set(left)
    assert sorted(scratch.sweep(grace_s=0)) == ["held0", "young0"]   # the lock is free now
    assert _names(temp_folder, "mstar-") == []

"""Starting and ending worker processes (spec layer L5, engine side).

A worker gets: a fresh empty scratch directory as cwd, HOME and TMPDIR; an environment of four
variables (no API keys -- chromadb's Settings also read env vars and a `.env` in the cwd); its own
session and process group, so one killpg reaches it and anything it starts; only the two frame
pipe ends beyond stdin/stdout/stderr. It is always ended the same way: SIGKILL to the group,
reap, close the pipes, remove the scratch directory.

`Launcher` is the seam for a later fork-server (a pre-warmed parent that forks ready workers):
it receives the same arguments and must honour the same contract.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from sandbox.protocol import SandboxLimits

ENGINE_ROOT = str(Path(__file__).resolve().parent.parent)
# `python -I` ignores PYTHONPATH and the user site; the venv's editable install may point at
# another checkout. So the worker is imported from *this* tree, and refuses to run otherwise.
BOOT = ("import sys; root = sys.argv[1]; sys.path.append(root); import sandbox.worker as w; "
        "sys.exit('sandbox.worker resolved outside ' + root + ': ' + w.__file__) "
        "if not w.__file__.startswith(root + '/sandbox/') else w.main(sys.argv[2:])")
WORKER_PATH = "/usr/bin:/bin"
REAP_TIMEOUT_S = 10.0


class Launcher(Protocol):
    """Starts one worker. Of the returned object the engine uses `pid` (which must also be the
    process group id), `stdout` (the worker's merged stdout/stderr, a pipe), `returncode` and
    `wait(timeout)`; `subprocess.Popen` is the reference."""

    def launch(self, worker_args: list[str], *, env: dict[str, str], cwd: str,
               pass_fds: tuple[int, ...]) -> subprocess.Popen: ...


class SubprocessLauncher:
    """A fresh isolated interpreter per worker (about 0.8 s to ready, chromadb's import is most
    of it), in a new session and process group."""

    def launch(self, worker_args: list[str], *, env: dict[str, str], cwd: str,
               pass_fds: tuple[int, ...]) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-I", "-c", BOOT, ENGINE_ROOT, *worker_args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=env, cwd=cwd, start_new_session=True, close_fds=True, pass_fds=pass_fds)


@dataclass
class WorkerProcess:
    """One live worker: its process, the engine's ends of its pipes, its scratch directory."""

    proc: subprocess.Popen
    frames_in: int  # worker -> engine frames (non-blocking)
    frames_out: int  # engine -> worker frames (non-blocking)
    output: int  # worker stdout+stderr (non-blocking)
    home: str

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill_group(self) -> None:
        """SIGKILL the whole process group. Safe until reaped: the unreaped leader keeps its
        pid (= the pgid) from being reused by an unrelated process."""
        if self.proc.returncode is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def end(self) -> int | None:
        """Kill, reap, close and clean up; the Popen-style return code (None: would not die)."""
        self.kill_group()
        try:
            status = self.proc.wait(timeout=REAP_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # unkillable (D state); nothing more we can do
            status = None
        for fd in (self.frames_in, self.frames_out):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        shutil.rmtree(self.home, ignore_errors=True)
        return status


def spawn(launcher: Launcher, limits: SandboxLimits) -> WorkerProcess:
    home = tempfile.mkdtemp(prefix="mstar-sbx-")
    to_worker_r, to_worker_w = os.pipe2(os.O_CLOEXEC)
    from_worker_r, from_worker_w = os.pipe2(os.O_CLOEXEC)
    args = ["--in-fd", str(to_worker_r), "--out-fd", str(from_worker_w),
            "--parent-pid", str(os.getpid()), "--limits", json.dumps(limits.to_json()), "--home", home]
    env = {"PATH": WORKER_PATH, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}
    try:
        proc = launcher.launch(args, env=env, cwd=home, pass_fds=(to_worker_r, from_worker_w))
    except BaseException:
        for fd in (to_worker_w, from_worker_r):
            os.close(fd)
        shutil.rmtree(home, ignore_errors=True)
        raise
    finally:  # the worker's ends belong to the worker now (or to nobody, on failure)
        os.close(to_worker_r)
        os.close(from_worker_w)
    output = proc.stdout.fileno()
    for fd in (from_worker_r, to_worker_w, output):
        os.set_blocking(fd, False)
    return WorkerProcess(proc, from_worker_r, to_worker_w, output, home)


def exit_text(status: int | None) -> str:
    if status is None:
        return "did not exit after SIGKILL"
    if status < 0:
        try:
            return f"was killed by signal {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}"

"""Starting and ending worker processes (docs/sandbox.md, L5, engine side).

A worker gets: a fresh empty scratch directory as cwd, HOME and TMPDIR; an environment of four
variables (no API keys -- chromadb's Settings also read env vars and a `.env` in the cwd); its own
session and process group, so one killpg reaches it and anything it starts; only the two frame
pipe ends beyond stdin/stdout/stderr. It is always ended the same way: SIGKILL to the group,
reap, close the pipes, remove the scratch directory.

`Launcher` is the seam between that contract and how a process comes to be: `SubprocessLauncher`
starts a fresh interpreter per worker (~1 s, chromadb's import is most of it);
`sandbox.engine.forkserver.ForkServerLauncher` forks it from a pre-warmed server (tens of ms). Sessions
created without a launcher use `default_launcher()`: the fork server where the platform has one
(with fresh interpreters as the fallback if it cannot start), else fresh interpreters; the engine
may pick another once with `set_default_launcher`.
"""
from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Protocol

from sandbox.engine import scratch
from sandbox.jail import cgroups
from sandbox.protocol import SandboxLimits

ENGINE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder that holds sandbox/
# `python -I` ignores PYTHONPATH and the user site; the venv's editable install may point at
# another checkout. So the worker is imported from *this* tree, and refuses to run otherwise.
BOOT = ("import sys; root = sys.argv[1]; sys.path.append(root); import sandbox.worker.main as w; "
        "sys.exit('sandbox.worker.main resolved outside ' + root + ': ' + w.__file__) "
        "if not w.__file__.startswith(root + '/sandbox/') else w.main(sys.argv[2:])")
WORKER_PATH = "/usr/bin:/bin"
REAP_TIMEOUT_S = 10.0
# Each worker enters a network namespace of its own (docs/sandbox.md, L6, sandbox.jail.limits.enter_net_namespace).
# Only benchmarks and debugging turn it off; a worker started without it reports a warning.
NET_NAMESPACE = True
# Likewise a pid namespace per worker: a forked worker is born in one its fork server made
# (sandbox.worker.fork_jail); a fresh one splits itself, the launched process staying outside as its
# keeper and process-group leader, the program running in its child (sandbox.jail.pidns).
PID_NAMESPACE = True
# And a cgroup per worker (sandbox.jail.cgroups) where one is writable.
CGROUP = True


class LaunchedWorker(Protocol):
    """What the engine uses of a started worker; `subprocess.Popen` is the reference. `pid` is
    also the process group id; `stdout` is the worker's merged stdout/stderr (a pipe);
    `returncode`/`wait` follow Popen's convention (negative: killed by that signal). A launcher
    whose engine is not the worker's parent also provides `kill_group()`, because only the
    reaper can tell that a pid still names its worker."""

    pid: int
    stdout: IO[bytes] | None

    @property
    def returncode(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class Launcher(Protocol):
    """Starts one worker with exactly these arguments, environment, cwd and descriptors (kept at
    the same numbers), in a new session; the worker must die when the engine dies."""

    def launch(self, worker_args: list[str], *, env: dict[str, str], cwd: str,
               pass_fds: tuple[int, ...]) -> LaunchedWorker: ...


class SubprocessLauncher:
    """A fresh isolated interpreter per worker (about 0.8 s to ready, chromadb's import is most
    of it), in a new session and process group. Started from the process's spawner thread: the
    worker's parent-death signal follows the thread that started it, and a session may be
    started from a pool thread yet outlive it (mstar keeps ingested knowledge bases alive)."""

    def launch(self, worker_args: list[str], *, env: dict[str, str], cwd: str,
               pass_fds: tuple[int, ...]) -> subprocess.Popen:
        return call_in_spawner_thread(lambda: subprocess.Popen(
            [sys.executable, "-I", "-c", BOOT, ENGINE_ROOT, *worker_args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=env, cwd=cwd, start_new_session=True, close_fds=True, pass_fds=pass_fds))


@dataclass
class WorkerProcess:
    """One live worker: its process, the engine's ends of its pipes, its scratch directory."""

    proc: LaunchedWorker
    frames_in: int  # worker -> engine frames (non-blocking)
    frames_out: int  # engine -> worker frames (non-blocking)
    output: int  # worker stdout+stderr (non-blocking)
    home: str
    _program_pid: int | None = None

    @property
    def pid(self) -> int:
        """The launched process: the group leader; the worker itself when forked (its fork server
        made its pid namespace), its keeper when a fresh worker split itself (sandbox.jail.pidns)."""
        return self.proc.pid

    def program_pid(self) -> int:
        """The process that runs the program, as the engine sees it (for /proc and diagnostics)."""
        if self._program_pid is None:
            from sandbox.jail.pidns import find_worker

            found = find_worker(self.proc.pid) if self.proc.returncode is None else None
            if found is None:
                return self.proc.pid  # no pid namespace: the launched process is the worker
            self._program_pid = found
        return self._program_pid

    def kill_group(self) -> None:
        """SIGKILL the whole process group. Safe until reaped: the unreaped leader keeps its
        pid (= the pgid) from being reused by an unrelated process."""
        kill_group = getattr(self.proc, "kill_group", None)
        if kill_group is not None:  # not our child: its reaper does it (see LaunchedWorker)
            kill_group()
            return
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
        if status is not None:
            cgroups.remove(self.proc.pid)  # the cgroup named after it (sandbox.jail.cgroups), if one was made
        return status


def spawn(launcher: Launcher, limits: SandboxLimits) -> WorkerProcess:
    home = scratch.make_dir(scratch.WORKER_PREFIX)
    to_worker_r, to_worker_w = os.pipe2(os.O_CLOEXEC)
    from_worker_r, from_worker_w = os.pipe2(os.O_CLOEXEC)
    args = ["--in-fd", str(to_worker_r), "--out-fd", str(from_worker_w),
            "--parent-pid", str(os.getpid()), "--limits", json.dumps(limits.to_json()), "--home", home]
    if not NET_NAMESPACE:
        args.append("--no-net-namespace")
    if not PID_NAMESPACE:
        args.append("--no-pid-namespace")
    if not CGROUP:
        args.append("--no-cgroup")
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


class _SpawnerThread:
    """One daemon thread that lives as long as the process and runs what it is given."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._run, name="mstar-sandbox-spawner", daemon=True).start()

    def _run(self) -> None:
        while True:
            fn, box, done = self.jobs.get()
            try:
                box["value"] = fn()
            except BaseException as exc:  # noqa: BLE001 -- handed back to the caller
                box["error"] = exc
            done.set()


_spawner: _SpawnerThread | None = None
_spawner_lock = threading.Lock()


def call_in_spawner_thread(fn: Callable[[], Any]) -> Any:
    """Run `fn` (e.g. a Popen) in a thread that lives as long as this process and return its
    result. PR_SET_PDEATHSIG fires when the *thread* that started a child exits: a long-lived
    process started from a pool thread would be killed when that thread ends."""
    global _spawner
    with _spawner_lock:
        if _spawner is None or _spawner.pid != os.getpid():  # threads do not survive a fork
            _spawner = _SpawnerThread()
        spawner = _spawner
    box: dict[str, Any] = {}
    done = threading.Event()
    spawner.jobs.put((fn, box, done))
    done.wait()
    if "error" in box:
        raise box["error"]
    return box["value"]


def exit_text(status: int | None) -> str:
    if status is None:
        return "did not exit after SIGKILL"
    if status < 0:
        try:
            return f"was killed by signal {signal.Signals(-status).name}"
        except ValueError:
            return f"was killed by signal {-status}"
    return f"exited with status {status}"


LAST_WORDS_CHARS = 1000
_SCRATCH_PATH = re.compile(r"/[^\s\"':]*mstar-sbx-[^\s\"':/]*")


def last_words(output: str) -> str:
    """The end of what a dead worker wrote to stdout/stderr, for its verdict (which the reflector
    reads). The worker ran program code, so a program chooses much of this text (an exception's
    message a finalizer printed, say): it is cut to LAST_WORDS_CHARS and shown as the worker's, and
    the engine's own paths in its tracebacks -- where the engine and Python are installed, the
    scratch directories -- are replaced by <engine>, <python>, <scratch> (issue 30)."""
    tail = output[-4 * LAST_WORDS_CHARS:]
    for path, name in sorted(((ENGINE_ROOT, "<engine>"), (sys.prefix, "<python>"), (sys.base_prefix, "<python>"),
                              (sys.exec_prefix, "<python>")), key=lambda p: -len(p[0])):
        if len(path) > 1:
            tail = tail.replace(path, name)
    return _SCRATCH_PATH.sub("<scratch>", tail)[-LAST_WORDS_CHARS:].strip()

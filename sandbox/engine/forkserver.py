"""Fork-server launcher (engine side): workers forked from a pre-warmed server.

A fresh interpreter spends ~1 s importing chromadb before a worker is ready; a fork of a server
that already imported it is ready in a few tens of milliseconds (docs/sandbox.md, 'Measurements'). The server
(sandbox.worker.forkserver) is started the way a worker is -- `python -I`, scrubbed environment,
empty cwd (removed once it is up), own session -- so it never holds a secret its children
could inherit. Each worker is still one program in its own process and process group.

Who dies with whom: the server sets PR_SET_PDEATHSIG against the engine and each worker against
the server; the kernel ties that signal to the *thread* that started the process, so the server
is always started from one long-lived thread (launch.call_in_spawner_thread), never from a
caller's thread (an evaluation pool thread may exit while the server is needed).

Exit statuses and kills: the engine is not the workers' parent. The server reaps them and writes
each status to the worker's own status pipe; kills are requests to the server, which alone knows
that a pid still names its worker (see forkserver_main).

One `ForkServerLauncher` runs one server: started lazily by the first launch (or by `start()`),
shared by all threads, restarted when it died, shut down at exit.
"""
from __future__ import annotations

import atexit
import json
import logging
import math
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import weakref
from typing import Any

from sandbox.engine import scratch
from sandbox.engine.launch import ENGINE_ROOT, WORKER_PATH, Launcher, call_in_spawner_thread

log = logging.getLogger(__name__)
SERVER_BOOT = ("import sys; root = sys.argv[1]; sys.path.append(root); import sandbox.worker.forkserver as m; "
               "sys.exit('sandbox.worker.forkserver resolved outside ' + root + ': ' + m.__file__) "
               "if not m.__file__.startswith(root + '/sandbox/') else m.main(sys.argv[2:])")
SERVER_START_TIMEOUT_S = 60.0
FORK_REPLY_TIMEOUT_S = 30.0
SHUTDOWN_TIMEOUT_S = 5.0
_STATUS = struct.Struct(">i")


class ForkServerUnavailable(RuntimeError):
    """The fork server could not be started here; the message says why."""


class _ServerGone(Exception):
    """The server died or stopped answering; a new one may do better."""


def fork_server_supported() -> bool:
    """Linux with fork, unix SOCK_SEQPACKET sockets and descriptor passing."""
    return (sys.platform.startswith("linux") and hasattr(os, "fork") and hasattr(socket, "send_fds")
            and hasattr(socket, "SOCK_SEQPACKET") and os.path.isdir("/proc/self/task"))


# --------------------------------------------------------------------------- worker handle


class ForkedWorker:
    """The engine's handle on one forked worker: what the engine uses of a Popen (`pid`,
    `stdout`, `returncode`, `poll`, `wait`) plus `kill_group`, which asks the server."""

    def __init__(self, pid: int, stdout_fd: int, status_fd: int, server: "_Server") -> None:
        self.pid = pid
        self.args = [f"<forked worker {pid}>"]
        self.stdout = os.fdopen(stdout_fd, "rb")
        self.server_lost = False  # True when the server died before reporting this worker's exit
        self._status_fd = status_fd
        self._status = bytearray()
        self._returncode: int | None = None
        self._server = server
        self._lock = threading.Lock()  # a finalizer on another thread may read the status too
        os.set_blocking(status_fd, False)

    @property
    def returncode(self) -> int | None:
        self._read_status(0)
        return self._returncode

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._returncode is None:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._read_status(remaining)
        return self._returncode

    def kill_group(self) -> None:
        """SIGKILL the worker's process group -- done by the server, and only while it has not
        reaped the worker (after that the pid may belong to someone else)."""
        if self.returncode is None:
            self._server.kill(self.pid)

    def _read_status(self, timeout_s: float | None) -> None:
        """Take the status if it arrives within `timeout_s` (None: wait for it)."""
        fd = self._status_fd
        if fd < 0:
            return
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(-1 if timeout_s is None else max(0, math.ceil(timeout_s * 1000))):
            return
        with self._lock:
            if self._status_fd != fd:  # another thread took it meanwhile
                return
            try:
                data = os.read(fd, 16)
            except BlockingIOError:
                return
            if data:
                self._status += data
                if len(self._status) < _STATUS.size:
                    return
                (status,) = _STATUS.unpack_from(self._status)
            else:  # EOF without a status: the server died, and its workers with it (PR_SET_PDEATHSIG)
                status, self.server_lost = -signal.SIGKILL, True
            self._returncode = status
            self._close_status()

    def _close_status(self) -> None:
        if self._status_fd >= 0:
            os.close(self._status_fd)
            self._status_fd = -1

    def __del__(self) -> None:
        # Closing the status pipe of a live worker tells the server to kill it.
        try:
            self._close_status()
        except Exception:  # noqa: BLE001 -- interpreter shutdown
            pass


# --------------------------------------------------------------------------- one server


class _Server:
    """A running server process and the engine's end of its control socket."""

    def __init__(self, proc: subprocess.Popen, sock: socket.socket, info: dict[str, Any]) -> None:
        self.proc, self.sock, self.info = proc, sock, info
        self.pid: int = proc.pid
        self.lock = threading.RLock()  # RLock: a finalizer may ask for a kill mid-request
        self.closed = False

    def alive(self) -> bool:
        return not self.closed and self.proc.poll() is None

    def drain_stderr(self) -> None:
        """Log what the server printed (nothing, normally) before its pipe could fill up."""
        try:
            data = os.read(self.proc.stderr.fileno(), 1 << 16) if self.proc.stderr else b""
        except (BlockingIOError, OSError, ValueError):
            return
        if data:
            log.warning("sandbox fork server %d said: %s", self.pid, data.decode("utf-8", "replace")[-2000:])

    def fork(self, worker_args: list[str], env: dict[str, str], cwd: str, pass_fds: tuple[int, ...]) -> ForkedWorker:
        request = json.dumps({"op": "fork", "args": worker_args, "env": env, "cwd": cwd,
                              "targets": list(pass_fds)}).encode()
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        try:
            with self.lock:
                if self.closed:
                    raise _ServerGone("the fork server was shut down")
                self.drain_stderr()
                try:
                    socket.send_fds(self.sock, [request], [out_w, status_w, *pass_fds])
                    data = self.sock.recv(65536)
                except (OSError, socket.timeout) as exc:  # timeout: wedged; kill it, a new one follows
                    self.close(kill=True)
                    raise _ServerGone(f"fork server did not answer: {type(exc).__name__}: {exc}") from None
                if not data:
                    self.close(kill=True)
                    raise _ServerGone("fork server closed its socket")
            reply = json.loads(data)
            if not reply.get("ok") or type(reply.get("pid")) is not int:
                raise OSError(f"fork server could not start a worker: {reply.get('error', reply)}")
        except BaseException:
            os.close(out_r)
            os.close(status_r)
            raise
        finally:  # the server (and the worker) hold their own copies now
            os.close(out_w)
            os.close(status_w)
        return ForkedWorker(reply["pid"], out_r, status_r, self)

    def kill(self, pid: int) -> None:
        with self.lock:
            if self.closed:
                return  # its workers died with it
            try:
                self.sock.send(json.dumps({"op": "kill", "pid": pid}).encode())
            except OSError:
                pass

    def close(self, kill: bool = False, timeout: float = SHUTDOWN_TIMEOUT_S) -> None:
        """Close the socket (the server then kills and reaps its workers and exits) and wait."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.sock.close()
        if kill:
            self.proc.kill()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()


def _server_env(home: str) -> dict[str, str]:
    return {"PATH": WORKER_PATH, "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8"}


def _start_server(timeout_s: float) -> _Server:
    home = scratch.make_dir(scratch.SERVER_PREFIX)
    engine_end, server_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        args = [sys.executable, "-I", "-c", SERVER_BOOT, ENGINE_ROOT,
                "--control-fd", str(server_end.fileno()), "--parent-pid", str(os.getpid())]
        proc = call_in_spawner_thread(lambda: subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=_server_env(home), cwd=home, start_new_session=True, close_fds=True,
            pass_fds=(server_end.fileno(),)))
    except BaseException:
        engine_end.close()
        shutil.rmtree(home, ignore_errors=True)
        raise
    finally:
        server_end.close()
    try:
        engine_end.settimeout(timeout_s)
        try:
            data = engine_end.recv(65536)
        except socket.timeout:
            data = None
        finally:  # it is up (or gone): it never needs the directory again
            shutil.rmtree(home, ignore_errors=True)
        try:
            message = json.loads(data) if data else {}
        except ValueError:
            message = {"error": f"unreadable start-up message {data[:200]!r}"}
        if not isinstance(message, dict) or message.get("op") != "ready" or type(message.get("pid")) is not int:
            if data is None:
                why = f"no 'ready' within {timeout_s:g} s"
            else:
                why = (message.get("error") if isinstance(message, dict) else None) or "it exited during start-up"
            raise ForkServerUnavailable(f"fork server did not start: {why}{_stderr_tail(proc)}")
    except BaseException:
        engine_end.close()
        proc.kill()
        proc.wait()
        raise
    engine_end.settimeout(FORK_REPLY_TIMEOUT_S)
    os.set_blocking(proc.stderr.fileno(), False)
    for warning in message.get("warnings") or []:  # e.g. no network namespace (not root)
        log.warning("sandbox fork server %d: layer unavailable: %s", proc.pid, warning)
    return _Server(proc, engine_end, message)


def _stderr_tail(proc: subprocess.Popen) -> str:
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    text = proc.stderr.read().decode("utf-8", "replace").strip() if proc.stderr else ""
    return f"; its stderr:\n{text[-2000:]}" if text else f" (exit status {proc.returncode})"


# --------------------------------------------------------------------------- the launcher


class ForkServerLauncher:
    """Launcher (see sandbox.engine.launch) that forks workers from one pre-warmed server.

    `fallback`: the launcher used when the server cannot start here (e.g. SubprocessLauncher());
    None raises ForkServerUnavailable instead. A server that *started* and later died is simply
    started again on the next launch.
    """

    def __init__(self, *, fallback: Launcher | None = None,
                 start_timeout_s: float = SERVER_START_TIMEOUT_S) -> None:
        self.fallback = fallback
        self.start_timeout_s = start_timeout_s
        self.servers_started = 0
        self.failure = ""  # why the server could not start (then every launch uses the fallback)
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._owner = os.getpid()
        self._exit_hook_set = False

    @property
    def server_pid(self) -> int | None:
        server = self._server
        return server.pid if server is not None and server.alive() else None

    def start(self) -> int:
        """Start the server now (else the first launch does); its pid. Raises
        ForkServerUnavailable whatever the fallback."""
        server = self._current(None)
        if server is None:
            raise ForkServerUnavailable(self.failure)
        return server.pid

    def launch(self, worker_args: list[str], *, env: dict[str, str], cwd: str,
               pass_fds: tuple[int, ...]) -> Any:
        gone = None
        for _ in range(2):  # a server found dead mid-request is replaced once
            try:
                server = self._current(gone)
            except ForkServerUnavailable:
                if self.fallback is None:
                    raise
                server = None
            if server is None:
                return self.fallback.launch(worker_args, env=env, cwd=cwd, pass_fds=pass_fds)
            try:
                return server.fork(worker_args, env, cwd, pass_fds)
            except _ServerGone as exc:
                log.warning("sandbox fork server %d lost (%s); starting a new one", server.pid, exc)
                gone = server
        raise OSError("the fork server was lost twice in a row while starting a worker")

    def shutdown(self) -> None:
        """Stop the server; its live workers are killed. A later launch starts a new one."""
        with self._lock:
            server, self._server = self._server, None
        if server is not None and self._owner == os.getpid():
            try:
                server.close()
            except KeyboardInterrupt:
                server.proc.kill()    # interrupted while waiting for it: it goes at once
                raise

    def _current(self, gone: _Server | None) -> _Server | None:
        with self._lock:
            if self._owner != os.getpid():  # the engine forked: that server belongs to the parent
                self._owner, self._server, self.failure = os.getpid(), None, ""
            server = self._server
            if server is not None and (server is gone or not server.alive()):
                server.close(kill=True)
                self._server = server = None
            if server is None:
                if self.failure:
                    if self.fallback is None:
                        raise ForkServerUnavailable(self.failure)
                    return None
                try:
                    server = _start_server(self.start_timeout_s)
                except ForkServerUnavailable as exc:
                    self.failure = str(exc)
                    log.warning("sandbox fork server unavailable, %s: %s",
                                "falling back" if self.fallback else "no fallback", exc)
                    raise
                self._server = server
                self.servers_started += 1
                if not self._exit_hook_set:
                    atexit.register(_shutdown_at_exit, weakref.ref(self))
                    self._exit_hook_set = True
            return server


def _shutdown_at_exit(ref: "weakref.ref[ForkServerLauncher]") -> None:
    launcher = ref()
    if launcher is None:
        return
    try:
        launcher.shutdown()
    except KeyboardInterrupt:
        # A second Ctrl-C while the server winds down (it waits up to SHUTDOWN_TIMEOUT_S): the user
        # wants out now. shutdown() has killed it (its workers die with it: pdeathsig); Python would
        # otherwise print this callback's traceback under the run's own last line.
        pass

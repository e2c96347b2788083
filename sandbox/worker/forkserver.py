"""The fork server process: a pre-warmed parent that forks sandbox workers (docs/sandbox.md, L5).

Started by sandbox.engine.forkserver (engine side) the way a worker is started: `python -I`, a scrubbed
environment, an empty cwd, its own session. Everything it holds is inherited by every worker it
forks, so it must never see a secret: it gets no engine environment, no engine file descriptor but
its control socket, and nothing from the engine but fork requests.

It imports what every worker needs (chromadb and its Rust bindings, RestrictedPython, the sandbox
modules), then checks two things a fork cannot survive: a thread (fork copies only the calling
thread; locks other threads held stay locked in the child) and a chromadb client (a child forked
from a process that holds one hangs on its first chromadb call). Then it serves one unix
SOCK_SEQPACKET socket, one JSON object per message:

  server -> engine, once   {"op": "ready", "pid", "preloaded", "layers", "warnings", "seconds"}
                           or {"op": "failed", "error"}
  engine -> server         {"op": "fork", "args", "env", "cwd", "targets"} with descriptors
                           [output, status, *pass] attached (SCM_RIGHTS)
  server -> engine         {"ok": true, "pid"} or {"ok": false, "error"}, one per fork
  engine -> server         {"op": "kill", "pid"} (no reply)

Each worker is forked into a pid namespace the server makes for it, and moved into its cgroup
right after the fork (sandbox.worker.fork_jail): the server holds the namespace's init on a
lifeline it closes when it reaps the worker, so a forked worker needs no keeper process.

The server reaps its children (SIGCHLD wakes its poll loop) and then writes each one's exit
status -- 4 bytes, Popen's convention: negative = killed by that signal -- to the worker's own
status pipe and closes it. Kills go through the server because only the reaper knows that a pid
still names its worker and not a stranger that reused it. When the engine closes a status pipe
of a live worker (it dropped the worker), or closes the control socket (it exits), the server
kills those workers itself.
"""
from __future__ import annotations

import argparse
import faulthandler
import fcntl
import gc
import importlib
import json
import os
import select
import signal
import socket
import struct
import sys
import tempfile
import time
import traceback
from typing import Any, NoReturn

from sandbox.jail.pidns import PARENT_OUTSIDE
from sandbox.worker.fork_jail import ForkJail

STATUS = struct.Struct(">i")
MAX_MESSAGE_BYTES = 1 << 16  # a fork request is ~1 KB (worker args, four env variables)
MAX_FDS = 8
# Imported once here so that a forked worker finds them in memory. The first five are the set
# docs/sandbox.md records at ~33 ms to a ready worker; the rest is what the worker itself imports.
PRELOAD = ("chromadb", "chromadb.api.rust", "chromadb_rust_bindings",
           "chromadb.telemetry.product.posthog", "sqlite3", "chromadb.config", "numpy",
           "RestrictedPython", "sandbox.worker.main", "sandbox.worker.loader", "sandbox.worker.embedding",
           "sandbox.worker.toolkit_chroma", "sandbox.worker.chroma_exact", "sandbox.worker.toolkit_db",
           "sandbox.worker.one_cpu",
           "json", "re", "math", "hashlib", "collections", "dataclasses", "typing", "datetime",
           "textwrap", "heapq", "itertools", "stringprep")
# BLAS libraries start a thread pool when numpy loads; set before the import, in-process only
# (so it is not part of the environment block every worker's /proc/<pid>/environ shows).
_SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


class BadRequest(Exception):
    """A fork request that does not have the expected shape."""


def preload() -> list[str]:
    os.environ.update(_SINGLE_THREADED)
    from sandbox.worker import main as worker

    names = [*PRELOAD, *worker.LAZY_STDLIB]
    for name in names:
        importlib.import_module(name)
    worker.prepare_in_server()
    return names


def fork_hazards() -> list[str]:
    """What would make a fork of this process unsafe; empty when it is fit to serve."""
    hazards = []
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        hazards.append(f"{threads} threads are running (a fork copies only one)")
    from chromadb.api.client import SharedSystemClient

    if getattr(SharedSystemClient, "_identifier_to_system", None):
        hazards.append("a chromadb client exists (its forked copies hang)")
    return hazards


def check_fork_request(request: Any, n_fds: int) -> tuple[list[str], dict[str, str], str, list[int]]:
    if not isinstance(request, dict):
        raise BadRequest("request is not a JSON object")
    args, env, cwd, targets = (request.get(k) for k in ("args", "env", "cwd", "targets"))
    if not (isinstance(args, list) and all(isinstance(a, str) for a in args)):
        raise BadRequest("args must be a list of str")
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        raise BadRequest("env must map str to str")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        raise BadRequest("cwd must be an absolute path")
    if not (isinstance(targets, list) and all(type(t) is int and t > 2 for t in targets)
            and len(set(targets)) == len(targets)):
        raise BadRequest("targets must be distinct fd numbers above 2")
    if n_fds != 2 + len(targets):
        raise BadRequest(f"expected {2 + len(targets)} descriptors (output, status, one per target), got {n_fds}")
    return args, env, cwd, targets


class ForkServer:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.pid = os.getpid()
        self.jail = ForkJail()
        self.status_fds: dict[int, int] = {}  # live child pid -> its status pipe (-1: the engine let go)
        self.pid_of: dict[int, int] = {}  # status pipe -> child pid
        self.wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that the wakeup fd fires
        self.poller = select.poll()
        self.poller.register(sock, select.POLLIN)
        self.poller.register(self.wake_r, select.POLLIN)

    def run(self) -> None:
        while True:
            for fd, _ in self.poller.poll():
                if fd == self.sock.fileno():
                    if not self.handle_message():
                        return self.shutdown()
                elif fd == self.wake_r:
                    _drain(self.wake_r)
                elif fd in self.pid_of:  # POLLERR: the engine closed this worker's status pipe
                    self.let_go(fd)
            self.reap()

    def handle_message(self) -> bool:
        """Serve one message; False when the engine is gone."""
        try:
            data, fds, flags, _ = socket.recv_fds(self.sock, MAX_MESSAGE_BYTES, MAX_FDS)
        except OSError:
            return False
        if not data and not fds:
            return False
        kept: set[int] = set()
        try:
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                raise BadRequest("message or descriptors truncated")
            try:
                request = json.loads(data)
            except ValueError as exc:
                raise BadRequest(f"not JSON: {exc}") from None
            op = request.get("op") if isinstance(request, dict) else None
            if op == "kill" and type(request.get("pid")) is int:
                self.kill(request["pid"])
                return True
            if op != "fork":
                raise BadRequest(f"unknown op {op!r}")
            pid = self.fork(request, fds)
            kept.add(fds[1])
            reply = {"ok": True, "pid": pid}
        except (BadRequest, OSError) as exc:
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        finally:
            for fd in fds:
                if fd not in kept:
                    os.close(fd)
        try:
            self.sock.send(json.dumps(reply).encode())
        except OSError:
            return False
        return True

    def fork(self, request: dict[str, Any], fds: list[int]) -> int:
        args, env, cwd, targets = check_fork_request(request, len(fds))
        output, status, passed = fds[0], fds[1], fds[2:]
        plan = self.jail.prepare(args)  # the worker's pid namespace, made here (fork_jail)
        seen_as = self.pid
        if plan is not None:
            report_target = max([2, *targets]) + 1
            args = self.jail.child_args(plan, args, report_target)
            if plan.report_r is not None:
                passed, targets = [*passed, plan.report_r], [*targets, report_target]
            seen_as = PARENT_OUTSIDE  # we are outside the worker's namespace: its getppid() is 0
        try:
            pid = os.fork()
        except OSError:
            if plan is not None:
                self.jail.after_fork(plan, None)
            raise
        if pid == 0:
            become_worker(self.pid, seen_as, args, env, cwd, output, passed, targets)
        if plan is not None:
            self.jail.after_fork(plan, pid)
        self.status_fds[pid] = status
        self.pid_of[status] = pid
        self.poller.register(status, 0)  # only POLLERR: the engine closed its end
        return pid

    def kill(self, pid: int) -> None:
        if pid not in self.status_fds:  # reaped already (or never ours): the pid may be a stranger's
            return
        # killpg for the worker and anything it started; kill for a child that has not reached
        # its setsid() yet (no group of that id exists then).
        for send in (os.killpg, os.kill):
            try:
                send(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def let_go(self, fd: int) -> None:
        """The engine dropped a worker without waiting for it: nobody else will ever kill it."""
        pid = self.pid_of.pop(fd)
        self.poller.unregister(fd)
        os.close(fd)
        self.status_fds[pid] = -1
        self.kill(pid)

    def reap(self, block: bool = False) -> None:
        """Collect exited children. Besides the workers these include their namespaces' inits
        (each ends once its worker is reaped and its lifeline closed) and orphans re-parented to
        us (we are the child subreaper), which nobody else would reap."""
        while True:
            try:
                pid, raw = os.waitpid(-1, 0 if block and self.status_fds else os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.jail.reaped(pid)
            fd = self.status_fds.pop(pid, -1)
            if fd < 0:
                continue
            del self.pid_of[fd]
            self.poller.unregister(fd)
            try:  # an empty pipe takes 4 bytes without blocking
                os.write(fd, STATUS.pack(os.waitstatus_to_exitcode(raw)))
            except OSError:
                pass
            os.close(fd)

    def shutdown(self) -> None:
        """The engine is gone or done: kill every worker, report what is left, exit."""
        for pid in list(self.status_fds):
            self.kill(pid)
        self.reap(block=True)


def become_worker(server_pid: int, seen_as: int, args: list[str], env: dict[str, str], cwd: str, output: int,
                  passed: list[int], targets: list[int]) -> NoReturn:
    """In the forked child: turn into exactly what `python -I -c BOOT` would have been, then run
    the worker. Never returns into the server's loop. `seen_as`: the server's pid as getppid()
    reads it here (0 when forked into a pid namespace of its own)."""
    code = 1
    try:
        os.setsid()  # own session and process group: the engine's group kill reaches only us
        from sandbox.jail import limits
        from sandbox.worker import main as worker

        try:  # die with the server (which dies with the engine), from the first instant
            limits.set_parent_death_signal(seen_as)
        except limits.LayerUnavailable:
            pass  # the worker reports the layer as missing when it sets it again after the uid drop
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        place_fds(output, passed, targets)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        tempfile.tempdir = None  # recomputed from the worker's TMPDIR
        worker.main(with_parent_pid(args, server_pid))
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException:  # noqa: BLE001 -- whatever it was, it ends this child, not the server
        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(code)


def place_fds(output: int, passed: list[int], targets: list[int]) -> None:
    """stdin /dev/null, stdout+stderr the engine's output pipe, each passed pipe end at the number
    the engine's arguments name (as Popen's pass_fds would); every other descriptor closed --
    the control socket and the other workers' status pipes above all."""
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    floor = max([2, *targets]) + 1  # above every target, so no dup2 below overwrites a source
    keep = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, floor) for fd in (null, output, *passed)]
    close_all_but(set(keep))
    os.dup2(keep[0], 0)
    os.dup2(keep[1], 1)
    os.dup2(keep[1], 2)
    for fd, target in zip(keep[2:], targets):
        os.dup2(fd, target)
    for fd in keep:
        os.close(fd)


def close_all_but(keep: set[int]) -> None:
    from sandbox.jail.limits import open_fds

    for fd in open_fds():
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:  # e.g. the descriptor listdir itself used
                pass


def with_parent_pid(args: list[str], parent: int) -> list[str]:
    """The worker checks its parent for PR_SET_PDEATHSIG; for a forked worker that is the server."""
    args = list(args)
    if "--parent-pid" in args:
        args[args.index("--parent-pid") + 1] = str(parent)
    return args


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="sandbox.worker.forkserver")
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    args = parser.parse_args(argv)
    faulthandler.enable()  # a crash of the server leaves a traceback on its stderr (the engine logs it)
    sock = socket.socket(fileno=args.control_fd)
    t0 = time.monotonic()
    jail: list[str] = []
    jail_warnings: list[str] = []
    try:
        from sandbox.jail import limits

        # Exits at once if the engine is gone; also resolves libc for prctl once, for every child.
        limits.set_parent_death_signal(args.parent_pid)
        limits.become_subreaper()
        # Before preload starts anything: the server itself never has a network either (each
        # worker still enters a namespace of its own, so workers cannot reach one another).
        try:
            jail = [limits.enter_net_namespace()]
        except limits.LayerUnavailable as exc:
            jail, jail_warnings = [], [f"enter_net_namespace: {exc}"]
        names = preload()
        # The preloaded modules outlive every worker: frozen, a worker's full collections skip
        # them (75,000 objects, 0.05 s a collection) and leave their shared pages uncopied.
        gc.collect()
        gc.freeze()
        hazards = fork_hazards()
    except BaseException as exc:  # noqa: BLE001 -- reported to the engine, which falls back
        hazards, names = [f"start-up failed: {type(exc).__name__}: {exc}"], []
    if hazards:
        sock.send(json.dumps({"op": "failed", "error": "; ".join(hazards)[:4000]}).encode())
        raise SystemExit(1)
    sock.send(json.dumps({"op": "ready", "pid": os.getpid(), "preloaded": names, "layers": jail,
                          "warnings": jail_warnings, "seconds": time.monotonic() - t0}).encode())
    ForkServer(sock).run()


if __name__ == "__main__":
    main()

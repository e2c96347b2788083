"""Own pid space for each worker (docs/sandbox.md, L6): the program cannot name, signal or read any process
of the engine's, and its /proc lists only its own namespace.

This is the split of a worker started as a fresh interpreter. A forked worker is born in a
namespace its fork server made (sandbox.worker.fork_jail, with `new_namespace_with_init` from
here): the server is the process outside, and there is no keeper.

Why three processes and not one. The first process of a new pid namespace is its init, and the
kernel drops every signal that init has no handler for unless it comes from an ancestor namespace
-- including the SIGXCPU of RLIMIT_CPU, so a worker that was init would never see its "cpu limit"
verdict, and a SIGTERM or abort() would do nothing. So the process the launcher started splits:

  keeper  (the launched process; stays in the engine's pid space, is the process-group leader)
    |-- init    pid 1 of the new space: /bin/cat reading a pipe only the keeper can write to
    `-- worker  pid 2: a fork of the keeper, the real worker (so the keeper gets its status)

init holds the namespace open and ends it -- the kernel then SIGKILLs everything left in it --
when the keeper is gone by any means: the keeper's end of the pipe closes and cat reads EOF. It
is a tiny program started with posix_spawn, not a fork: a fork of a process that has chromadb
loaded costs ~4 ms on the way to a ready worker and as much again to tear down. Nothing in the
namespace can fork (no os module; the seccomp filter), so init has no orphans to reap.

The keeper waits for the worker, closes init's pipe and then ends the way the worker ended --
same exit code, or killed by the same signal -- so exit statuses mean to the engine what they
meant without a namespace. All three share the keeper's process group: the engine's killpg
reaches everything. Neither keeper nor init holds a descriptor of the worker's, so the engine
sees the worker's pipes close the moment the worker dies.

Work the worker should not wait for, but that must be done before program code runs (moving the
three into a cgroup), the keeper does after the split (`keeper_task`); its one-line report
reaches the worker through a pipe the worker reads when it needs to know (`read_keeper_report`).

The worker then mounts its own /proc in a private mount namespace (`mount_private_proc`), so that
/proc shows its namespace, not the engine's processes.
"""
from __future__ import annotations

import ctypes
import faulthandler
import os
import resource
import shutil
import signal
from typing import Callable

from sandbox.jail.limits import LayerUnavailable, _libc, open_fds, set_parent_death_signal

CLONE_NEWNS = 0x00020000  # <linux/sched.h>; the os.CLONE_* constants only exist from Python 3.12
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 0x2, 0x4, 0x8, 0x4000, 0x40000
# The worker's parent (the keeper) lives outside its pid namespace, where getppid() reads 0.
PARENT_OUTSIDE = 0
INIT_PROGRAM = "cat"
REPORT_MAX_BYTES = 4096
_KEEPER_FAILED = 71
# keeper_task(worker_pid, init_pid) -> one report line: "layer:NAME" or "warning:TEXT"
KeeperTask = Callable[[int, int], str]


def enter_pid_namespace(engine_pid: int, keeper_task: KeeperTask | None = None) -> tuple[str, int | None]:
    """Split this process as described above. Returns only in the worker: the layer's name and
    the read end of the keeper's report pipe (None without a `keeper_task`). Raises
    LayerUnavailable where the kernel refuses; the caller is then still one process and goes on
    as the worker itself.

    Call first thing, in a single-threaded session leader. `engine_pid` is the parent the keeper
    must die with.
    """
    init, lifeline_w = new_namespace_with_init()
    report_r, report_w = os.pipe2(os.O_CLOEXEC) if keeper_task else (None, None)
    try:
        worker = os.fork()
    except OSError as exc:  # e.g. init died at once: the namespace takes no more processes
        end_init(init, lifeline_w)
        raise LayerUnavailable(f"fork into the new pid namespace failed: {exc}") from None
    if worker == 0:
        os.close(lifeline_w)
        if report_w is not None:
            os.close(report_w)
        return "pid_namespace", report_r
    if report_r is not None:
        os.close(report_r)
    _be_keeper(engine_pid, worker, init, lifeline_w, keeper_task, report_w)


def new_namespace_with_init() -> tuple[int, int]:
    """unshare(CLONE_NEWPID) and start its init: (init's pid, the write end of init's lifeline).
    The caller's next child is pid 2 there; init lives until every copy of that write end is
    closed. Raises LayerUnavailable where the kernel refuses: InitFailed when unshare worked
    and init did not start (the caller's children would still go into the new namespace)."""
    cat = shutil.which(INIT_PROGRAM, path="/usr/bin:/bin")
    if cat is None:
        raise LayerUnavailable(f"no {INIT_PROGRAM} in /usr/bin or /bin to be the namespace's init")
    libc = _libc()
    if libc.unshare(ctypes.c_int(CLONE_NEWPID)) != 0:
        errno = ctypes.get_errno()
        raise LayerUnavailable(f"unshare(CLONE_NEWPID) failed: {os.strerror(errno)}")
    lifeline_r, lifeline_w = os.pipe2(os.O_CLOEXEC)  # only the caller keeps the write end
    try:
        init = _spawn_init(cat, lifeline_r)
    except OSError as exc:
        os.close(lifeline_w)
        raise InitFailed(f"starting the namespace's init failed: {exc}") from None
    finally:
        os.close(lifeline_r)
    return init, lifeline_w


class InitFailed(LayerUnavailable):
    """The new pid namespace exists, but its init did not start."""


def read_keeper_report(fd: int) -> tuple[list[str], list[str]]:
    """In the worker: wait for the keeper's report; (layers, warnings) from it."""
    data = b""
    try:
        while len(data) < REPORT_MAX_BYTES and (chunk := os.read(fd, REPORT_MAX_BYTES)):
            data += chunk
    finally:
        os.close(fd)
    if not data.strip():
        return [], ["keeper: no report (the keeper died before it finished)"]
    return parse_report(data.decode("utf-8", "replace"))


def send_report(fd: int, line: str) -> None:
    """Write the worker's one report line (by its keeper, or its fork server) and close the pipe."""
    try:
        os.write(fd, line.encode("utf-8", "replace")[:REPORT_MAX_BYTES])
    except OSError:
        pass  # the worker is gone already
    os.close(fd)


def parse_report(line: str) -> tuple[list[str], list[str]]:
    """A keeper task's report line -> (layers, warnings)."""
    kind, _, text = line.strip().partition(":")
    return ([text], []) if kind == "layer" else ([], [text or line.strip()])


def mount_private_proc() -> str:
    """In the worker (pid 2 of its namespace, still root, single-threaded): a mount namespace of
    its own, private so nothing propagates back to the host, with a fresh /proc of this pid
    namespace on top."""
    libc = _libc()
    steps = ((lambda: libc.unshare(ctypes.c_int(CLONE_NEWNS)), "unshare(CLONE_NEWNS)"),
             (lambda: libc.mount(None, b"/", None, ctypes.c_ulong(MS_REC | MS_PRIVATE), None),
              "making / private"),
             (lambda: libc.mount(b"proc", b"/proc", b"proc",
                                 ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC), None), "mounting /proc"))
    for step, what in steps:
        if step() != 0:
            errno = ctypes.get_errno()
            raise LayerUnavailable(f"{what} failed: {os.strerror(errno)}")
    return "private_proc"


# --------------------------------------------------------------------------- keeper and init


def _spawn_init(cat: str, lifeline: int) -> int:
    """cat as pid 1: stdin the lifeline, stdout/stderr /dev/null, empty environment, and no other
    descriptor: all are made close-on-exec first (nobody here execs anything else, and forks keep
    their descriptors whatever the flag)."""
    for fd in open_fds():
        if fd > 2:
            try:
                os.set_inheritable(fd, False)
            except OSError:  # e.g. the descriptor listdir itself used
                pass
    null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
    try:
        actions = [(os.POSIX_SPAWN_DUP2, lifeline, 0), (os.POSIX_SPAWN_DUP2, null, 1),
                   (os.POSIX_SPAWN_DUP2, null, 2)]
        return os.posix_spawn(cat, [INIT_PROGRAM], {}, file_actions=actions)
    finally:
        os.close(null)


def _be_keeper(engine_pid: int, worker: int, init: int, lifeline: int, task: KeeperTask | None,
               report: int | None) -> None:
    """Report, wait for the worker, end init, end as the worker ended. Never returns."""
    status = None
    try:
        _detach_descriptors(keep=tuple(fd for fd in (lifeline, report) if fd is not None))
        try:
            set_parent_death_signal(engine_pid)  # exits at once if the engine is already gone
        except LayerUnavailable:
            pass  # prctl missing, yet unshare worked: the group kill still reaches us
        if task is not None and report is not None:
            try:
                line = task(worker, init)
            except Exception as exc:  # noqa: BLE001 -- reported to the worker as a warning
                line = f"warning:keeper task failed: {type(exc).__name__}: {exc}"
            send_report(report, line)
        while status is None:
            try:
                _, status = os.waitpid(worker, 0)
            except ChildProcessError:
                break
    except BaseException:  # noqa: BLE001 -- the keeper must never fall back into worker code
        status = None
    finally:
        end_init(init, lifeline)
        _end_like(status)


def end_init(init: int, lifeline: int) -> None:
    """Take the namespace down: init reads EOF (and gets SIGKILL, were it stuck) and is reaped."""
    try:
        os.close(lifeline)
    except OSError:
        pass
    _kill_and_reap(init)


def _detach_descriptors(keep: tuple[int, ...]) -> None:
    """Close everything but `keep`; stdio goes to /dev/null. The engine learns that a worker died
    from its pipes closing, so no other process may hold them."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    lowest = 3
    for fd in sorted(keep):
        os.closerange(lowest, fd)
        lowest = fd + 1
    os.closerange(lowest, 1 << 20)


def _kill_and_reap(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)  # from the ancestor namespace, init cannot ignore it
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _end_like(status: int | None) -> None:
    """Exit with the worker's status: its exit code, or death by its signal."""
    if status is None:
        os._exit(_KEEPER_FAILED)
    if os.WIFEXITED(status):
        os._exit(os.WEXITSTATUS(status))
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            faulthandler.disable()  # its handlers would turn SIGSEGV/SIGABRT into a traceback
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            pass  # SIGKILL and SIGSTOP have no handler to reset
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal whose default is to be ignored
    os._exit(_KEEPER_FAILED)


# --------------------------------------------------------------------------- engine side


def find_worker(launched: int) -> int | None:
    """The pid (as the caller sees it) of the worker of the process the engine launched: that
    process itself when a fork server made its namespace (it is pid 2 of a nested one), else its
    keeper's child that is pid 2 of a nested namespace. None if there is none (no namespace, or
    the worker is gone). For diagnostics and tests -- the engine itself only ever signals the
    launched process's group."""
    if _is_pid_2(_status(str(launched))):
        return launched
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _status(entry)
        if fields.get("PPid", "").strip() == str(launched) and _is_pid_2(fields):
            return int(entry)
    return None


def _status(pid: str) -> dict[str, str]:
    try:
        with open(f"/proc/{pid}/status") as f:
            return dict(line.split(":", 1) for line in f if ":" in line)
    except OSError:
        return {}


def _is_pid_2(fields: dict[str, str]) -> bool:
    nspid = fields.get("NSpid", "").split()
    return len(nspid) > 1 and nspid[-1] == "2"

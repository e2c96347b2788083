"""OS-level limits a worker applies to itself before any program code runs (docs/sandbox.md, L5).

Each function returns the name of the layer it put in place, or raises LayerUnavailable with the
reason; the worker collects both so the engine can report which layers were active and warn about
the missing ones instead of failing on machines that lack one (no root, no prctl, not Linux).

Order matters and is the worker's job: the network namespace first (while the worker is still
single-threaded and root), then rlimits and no_new_privs, then imports and warm-up, then the uid
drop, and only then PR_SET_PDEATHSIG (the kernel clears it on a credential change).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import resource
import signal
import tempfile
import time

NOBODY_UID = NOBODY_GID = 65534
FSIZE_BYTES = 1 << 20  # programs have no file API; this only bounds what host code might write
NOFILE = 128  # a warmed-up worker holds ~12 descriptors
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWNET = 0x40000000  # <linux/sched.h>; os.CLONE_NEWNET only exists from Python 3.12


class LayerUnavailable(Exception):
    """A wanted isolation layer could not be put in place here; the message says why."""


def set_rlimits(memory_mb: int, cpu_s: int) -> str:
    """Soft == hard, so the worker cannot raise a limit once it is not root.

    One exception: RLIMIT_CPU's soft limit sits one second below the hard one. At soft == hard
    the kernel SIGKILLs, indistinguishable from any other kill (and rusage CPU figures lag the
    kernel's own count on loaded VMs); SIGXCPU at the soft limit names the cause. Raising the
    soft limit would need setrlimit, which programs cannot reach, and buys at most that second.
    """
    wanted = {
        resource.RLIMIT_AS: (memory_mb * 1024 * 1024,) * 2,
        resource.RLIMIT_CPU: (max(1, cpu_s - 1), cpu_s),
        resource.RLIMIT_FSIZE: (FSIZE_BYTES,) * 2,
        resource.RLIMIT_NOFILE: (NOFILE,) * 2,
        resource.RLIMIT_CORE: (0, 0),
    }
    for which, (soft, hard) in wanted.items():
        _, current_hard = resource.getrlimit(which)
        if current_hard != resource.RLIM_INFINITY and current_hard < hard:
            hard = current_hard  # never ask for more than we already have (fails unprivileged)
            soft = min(soft, hard)
        try:
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError) as exc:
            raise LayerUnavailable(f"setrlimit({which}, {(soft, hard)}) failed: {exc}") from None
    # Writing past RLIMIT_FSIZE would kill the worker with SIGXFSZ; an EFBIG error is clearer.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _cap_malloc_arenas()
    return "rlimits"


M_ARENA_MAX = -8   # <malloc.h>


def _cap_malloc_arenas() -> None:
    """glibc gives each new thread a malloc arena that reserves 64 MiB of address space; under
    RLIMIT_AS a worker reading on 16 threads ran out of address space ("can't start new thread")
    long before it ran out of memory. Two arenas are plenty for one program."""
    try:
        _libc().mallopt(M_ARENA_MAX, 2)
    except (AttributeError, OSError, LayerUnavailable):
        pass  # not glibc: no arenas to cap


def return_freed_heap() -> None:
    """Hand the heap's freed chunks back to the system (glibc's malloc_trim; elsewhere nothing).
    glibc keeps them for reuse, so a worker kept idle for later reads held ~1 MB of them for the
    rest of the run (measured: 10 MB less at a run's peak with 8 kept). The worker calls it when
    its pipe falls silent (sandbox.worker.channel)."""
    try:
        _libc().malloc_trim(0)   # resolved in the fork server: nothing is loaded from disk here
    except (AttributeError, OSError, LayerUnavailable):
        pass


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    # Cached: find_library runs `ldconfig -p`, and a fork server resolves it once for all children.
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        raise LayerUnavailable("libc not found (prctl needs Linux)")
    return ctypes.CDLL(libc_name, use_errno=True)


def _prctl(option: int, arg: int) -> None:
    libc = _libc()
    if libc.prctl(option, ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        errno = ctypes.get_errno()
        raise LayerUnavailable(f"prctl({option}) failed: {os.strerror(errno)}")


def set_no_new_privs() -> str:
    """No setuid/file-capability gain on exec, for the worker and anything it could start."""
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    return "no_new_privs"


def set_parent_death_signal(expected_parent: int) -> str:
    """SIGKILL the worker when the engine dies.

    The kernel tracks the parent *thread*: the thread that starts a session must outlive it.
    If the engine already died before this call, there is no one to notify us -- exit now.
    """
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != expected_parent:
        os._exit(70)
    return "pdeathsig"


def become_subreaper() -> None:
    """Orphans of our descendants come to us, not to the system's init: e.g. a worker that split
    itself has a keeper process above it (sandbox.jail.pidns), and a group kill that ends both
    leaves the worker for whoever is the nearest subreaper to reap."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def enter_scratch_root(scratch_dir: str) -> str:
    """chroot into the worker's own empty scratch directory: from here on the file system is that
    one directory, so even a program that found a way around the Python-level defences has no
    user files, no .env, no other run folder to read (the uid drop that follows keeps it there:
    leaving a chroot needs CAP_SYS_CHROOT, and the seccomp filter refuses chroot anyway).

    Everything the worker needs from the file system is loaded by now. What glibc reads lazily
    is read first: the local time zone (/etc/localtime).
    """
    time.localtime()
    try:
        os.chroot(scratch_dir)
        os.chdir("/")
    except OSError as exc:
        raise LayerUnavailable(f"chroot({scratch_dir!r}) failed: {exc.strerror or exc}") from None
    os.environ.update(HOME="/", TMPDIR="/")
    tempfile.tempdir = None
    return "scratch_root"


def drop_privileges(writable_dir: str) -> str:
    """Become nobody (65534) when started as root: rlimits become binding (root may raise hard
    limits), DAC checks apply again, and the engine's /proc/<pid>/environ and signals are out of
    reach. `writable_dir` (HOME/TMPDIR/cwd) is handed over first so the worker can still use it.

    Everything the worker will import must already be imported: the interpreter may live under a
    directory nobody cannot read (here /root/.pyenv).
    """
    if os.geteuid() != 0:
        raise LayerUnavailable(f"not started as root (euid {os.geteuid()}): no uid drop needed or possible")
    try:
        os.chown(writable_dir, NOBODY_UID, NOBODY_GID)
        os.setgroups([])
        os.setresgid(NOBODY_GID, NOBODY_GID, NOBODY_GID)
        os.setresuid(NOBODY_UID, NOBODY_UID, NOBODY_UID)
    except OSError as exc:
        raise LayerUnavailable(f"dropping to uid {NOBODY_UID} failed: {exc}") from None
    if os.getuid() == 0 or os.geteuid() == 0:
        raise LayerUnavailable("uid drop did not take effect")
    return "uid_nobody"


def enter_net_namespace() -> str:
    """Move this process into a new, empty network namespace (docs/sandbox.md, L6): no interface but a
    loopback that is down, so no egress, no engine port on 127.0.0.1, no abstract unix socket of
    another namespace. The LLM is reached through the frame pipe, which a namespace does not cut.

    unshare() moves only the calling *thread*, so it must run while the process has one thread
    (threads started later inherit it). Needs CAP_SYS_ADMIN: root here; elsewhere it is reported
    as unavailable rather than tried through a user namespace, which would break the uid drop.
    """
    threads = _thread_count()
    if threads != 1:
        raise LayerUnavailable(f"{threads} threads are running; a new network namespace would hold only one")
    libc = _libc()
    if libc.unshare(ctypes.c_int(CLONE_NEWNET)) != 0:
        errno = ctypes.get_errno()
        raise LayerUnavailable(f"unshare(CLONE_NEWNET) failed: {os.strerror(errno)}")
    return "net_namespace"


def open_fds() -> list[int]:
    """This process's open descriptors, ascending (a generous guess where /proc is missing)."""
    try:
        return sorted(int(name) for name in os.listdir("/proc/self/fd"))
    except OSError:
        return list(range(1024))


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        raise LayerUnavailable("/proc/self/task is not readable (not Linux?)") from None

"""A seccomp filter for the worker (docs/sandbox.md, L6, the optional part): system calls a memory program
never needs are refused by the kernel, whatever Python-level escape a program might find.

Built by hand as classic BPF and installed through ctypes -- no libseccomp binding to install --
for x86_64 and aarch64; elsewhere the layer is reported as unavailable. Installed with
SECCOMP_FILTER_FLAG_TSYNC so that the threads chromadb already started are covered too, after
every import and the warm-up (nothing after it may need exec or a new process), just before the
program's own code first runs.

What the filter refuses (EPERM unless said otherwise):
- new processes: fork, vfork, clone without CLONE_THREAD (threads stay allowed), execve(at);
  clone3 answers ENOSYS, so that glibc falls back to clone, whose flags a filter can read;
- sockets of any family but AF_UNIX (no network even where the net namespace is missing);
- signals to anyone but this process: kill, tgkill and pidfd signalling of other pids, tkill;
- looking into or changing other processes: ptrace, process_vm_readv/writev, kcmp, pidfd_getfd,
  prlimit64 on another pid;
- the kernel's administrative surface: mount and the new mount API, namespaces (unshare, setns),
  chroot/pivot_root, modules, kexec, reboot, swap, bpf, perf events, keyrings, userfaultfd,
  io_uring, clock and host name setting, set*id and capset, personality.
Any other architecture than the one the filter was built for (e.g. x32 or 32-bit calls on
x86_64) kills the process.
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

from sandbox.jail.limits import LayerUnavailable, _libc

# <linux/seccomp.h>, <linux/audit.h>, <linux/filter.h>
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JSET_K, BPF_RET_K = 0x20, 0x15, 0x45, 0x06
OFFSET_NR, OFFSET_ARCH = 0, 4
X32_SYSCALL_BIT = 0x40000000
CLONE_THREAD = 0x00010000
AF_UNIX = 1


def _arg_low(i: int) -> int:
    """Offset of the low 32 bits of syscall argument i in struct seccomp_data (little endian)."""
    return 16 + 8 * i


_REFUSED_NAMES = (
    "fork", "vfork", "execve", "execveat", "tkill", "ptrace", "process_vm_readv", "process_vm_writev",
    "kcmp", "pidfd_getfd", "pidfd_send_signal", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "mount_setattr", "init_module", "finit_module", "delete_module",
    "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct", "quotactl", "bpf",
    "perf_event_open", "add_key", "request_key", "keyctl", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "settimeofday", "clock_settime", "adjtimex",
    "sethostname", "setdomainname", "setuid", "setgid", "setreuid", "setregid", "setresuid",
    "setresgid", "setgroups", "capset", "personality", "syslog", "name_to_handle_at",
    "open_by_handle_at", "fanotify_init", "move_pages", "migrate_pages", "setrlimit", "vhangup",
    "iopl", "ioperm", "uselib",
)
# Syscall numbers from the kernel's uapi headers (asm/unistd_64.h; asm-generic/unistd.h for
# aarch64). Names missing on an architecture (fork on aarch64, say) simply do not exist there.
_X86_64 = dict(
    socket=41, clone=56, fork=57, vfork=58, execve=59, kill=62, ptrace=101, syslog=103, setuid=105,
    setgid=106, setreuid=113, setregid=114, setgroups=116, setresuid=117, setresgid=119, capset=126,
    rt_sigqueueinfo=129, uselib=134, personality=135, vhangup=153, pivot_root=155, adjtimex=159,
    setrlimit=160, chroot=161, acct=163, settimeofday=164, mount=165, umount2=166, swapon=167,
    swapoff=168, reboot=169, sethostname=170, setdomainname=171, iopl=172, ioperm=173,
    init_module=175, delete_module=176, quotactl=179, tkill=200, clock_settime=227, tgkill=234,
    kexec_load=246, add_key=248, request_key=249, keyctl=250, migrate_pages=256, unshare=272,
    move_pages=279, rt_tgsigqueueinfo=297, perf_event_open=298, fanotify_init=300, prlimit64=302,
    name_to_handle_at=303, open_by_handle_at=304, setns=308, process_vm_readv=310,
    process_vm_writev=311, kcmp=312, finit_module=313, seccomp=317, kexec_file_load=320, bpf=321,
    execveat=322, userfaultfd=323, pidfd_send_signal=424, io_uring_setup=425, io_uring_enter=426,
    io_uring_register=427, open_tree=428, move_mount=429, fsopen=430, fsconfig=431, fsmount=432,
    clone3=435, pidfd_getfd=438, mount_setattr=442)
_AARCH64 = dict(
    umount2=39, mount=40, pivot_root=41, chroot=51, vhangup=58, quotactl=60, acct=89, capset=91,
    personality=92, unshare=97, kexec_load=104, init_module=105, delete_module=106,
    clock_settime=112, syslog=116, ptrace=117, kill=129, tkill=130, tgkill=131, rt_sigqueueinfo=138,
    reboot=142, setregid=143, setgid=144, setreuid=145, setuid=146, setresuid=147, setresgid=149,
    setgroups=159, sethostname=161, setdomainname=162, setrlimit=164, settimeofday=170,
    adjtimex=171, socket=198, add_key=217, request_key=218, keyctl=219, clone=220, execve=221,
    swapon=224, swapoff=225, migrate_pages=238, move_pages=239, rt_tgsigqueueinfo=240,
    perf_event_open=241, prlimit64=261, fanotify_init=262, name_to_handle_at=264,
    open_by_handle_at=265, setns=268, process_vm_readv=270, process_vm_writev=271, kcmp=272,
    finit_module=273, seccomp=277, bpf=280, execveat=281, userfaultfd=282, kexec_file_load=294,
    pidfd_send_signal=424, io_uring_setup=425, io_uring_enter=426, io_uring_register=427,
    open_tree=428, move_mount=429, fsopen=430, fsconfig=431, fsmount=432, clone3=435,
    pidfd_getfd=438, mount_setattr=442)
_ARCHES = {"x86_64": (0xC000003E, _X86_64), "aarch64": (0xC00000B7, _AARCH64)}


class _Program:
    """A list of BPF instructions with forward jumps resolved by label."""

    def __init__(self) -> None:
        self.code: list[tuple[int, int | str, int | str, int]] = []

    def load(self, offset: int) -> None:
        self.code.append((BPF_LD_W_ABS, 0, 0, offset))

    def ret(self, value: int) -> None:
        self.code.append((BPF_RET_K, 0, 0, value))

    def jump(self, op: int, k: int, if_true: int | str, if_false: int | str) -> None:
        """Jump targets: an int (instructions to skip) or a label placed later with `mark`."""
        self.code.append((op, if_true, if_false, k))

    def mark(self, label: str) -> None:
        self.code.append((-1, 0, 0, label))  # type: ignore[arg-type]

    def assemble(self) -> bytes:
        where, real = {}, []
        for op, jt, jf, k in self.code:
            if op == -1:
                where[k] = len(real)
            else:
                real.append((op, jt, jf, k))
        out = bytearray()
        for index, (op, jt, jf, k) in enumerate(real):
            jt = where[jt] - index - 1 if isinstance(jt, str) else jt
            jf = where[jf] - index - 1 if isinstance(jf, str) else jf
            if not (0 <= jt < 256 and 0 <= jf < 256):
                raise ValueError("BPF jump out of range")
            out += struct.pack("=HBBI", op, jt, jf, k)
        return bytes(out)


def build_filter(machine: str, own_pid: int) -> bytes:
    """The filter program for `machine` (platform.machine()), allowing signals to `own_pid`."""
    if machine not in _ARCHES:
        raise LayerUnavailable(f"no seccomp filter for architecture {machine!r}")
    arch, nr = _ARCHES[machine]
    deny = SECCOMP_RET_ERRNO | errno.EPERM
    p = _Program()
    p.load(OFFSET_ARCH)
    p.jump(BPF_JEQ_K, arch, 1, 0)
    p.ret(SECCOMP_RET_KILL_PROCESS)
    p.load(OFFSET_NR)
    if machine == "x86_64":
        p.jump(BPF_JSET_K, X32_SYSCALL_BIT, "kill", 0)
    for name in _REFUSED_NAMES:
        if name in nr:
            p.jump(BPF_JEQ_K, nr[name], "deny", 0)
    p.jump(BPF_JEQ_K, nr["clone3"], "enosys", 0)
    p.jump(BPF_JEQ_K, nr["clone"], "clone", 0)
    p.jump(BPF_JEQ_K, nr["socket"], "socket", 0)
    p.jump(BPF_JEQ_K, nr["kill"], "first_arg_is_self", 0)
    p.jump(BPF_JEQ_K, nr["tgkill"], "first_arg_is_self", 0)
    p.jump(BPF_JEQ_K, nr["prlimit64"], "prlimit", 0)
    p.ret(SECCOMP_RET_ALLOW)
    p.mark("clone")  # a thread shares the process; anything else is a new process
    p.load(_arg_low(0))
    p.jump(BPF_JSET_K, CLONE_THREAD, "allow", "deny")
    p.mark("socket")
    p.load(_arg_low(0))
    p.jump(BPF_JEQ_K, AF_UNIX, "allow", "deny")
    p.mark("prlimit")  # pid 0 is "this process"
    p.load(_arg_low(0))
    p.jump(BPF_JEQ_K, 0, "allow", "first_arg_is_self")
    p.mark("first_arg_is_self")
    p.load(_arg_low(0))
    p.jump(BPF_JEQ_K, own_pid, "allow", "deny")
    p.mark("allow")
    p.ret(SECCOMP_RET_ALLOW)
    p.mark("deny")
    p.ret(deny)
    p.mark("enosys")
    p.ret(SECCOMP_RET_ERRNO | errno.ENOSYS)
    p.mark("kill")
    p.ret(SECCOMP_RET_KILL_PROCESS)
    return p.assemble()


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_filter() -> str:
    """Install the filter on every thread of this process. Needs no_new_privs (or root)."""
    machine = platform.machine()
    program = build_filter(machine, os.getpid())
    _, nr = _ARCHES[machine]
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = _libc()
    result = libc.syscall(ctypes.c_long(nr["seccomp"]), ctypes.c_uint(SECCOMP_SET_MODE_FILTER),
                          ctypes.c_uint(SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(fprog))
    if result != 0:
        code = ctypes.get_errno()
        # TSYNC failure returns the id of a thread that could not be synchronised, not -1
        why = os.strerror(code) if result < 0 else f"thread {result} could not take the filter"
        raise LayerUnavailable(f"seccomp(SET_MODE_FILTER, TSYNC) failed: {why}")
    return "seccomp"

"""The seccomp filter (docs/sandbox.md, L6, optional part): real workers carry it on every thread, and a
fresh child that installs it is refused exactly what a memory program never needs -- while
threads, AF_UNIX sockets, signals to itself and everything chromadb does keep working (the
realistic programs and the hostile suite run with it on)."""
from __future__ import annotations

import os
import signal

import pytest

from sandbox.jail import seccomp
from sandbox.jail.limits import LayerUnavailable
from test_sandbox_host import GOOD, LAUNCHERS, session
from test_sandbox_jail import run_child, try_unprivileged

SUPPORTED = os.uname().machine in ("x86_64", "aarch64")
needs_filter = pytest.mark.skipif(not SUPPORTED, reason="the filter is built for x86_64 and aarch64 only")


@needs_filter
@pytest.mark.parametrize("name", sorted(LAUNCHERS))
def test_every_thread_of_a_real_worker_is_filtered(name):
    with session(GOOD, launcher=LAUNCHERS[name]) as s:
        info = s.start()
        s.write({"topic": "t"}, "a dog named Rex")  # chromadb adds, queries and starts threads ...
        assert s.read({"text": "dog"}).output == "a dog named Rex"  # ... under the filter
        assert "seccomp" in info.layers and info.warnings == []
        tids = os.listdir(f"/proc/{s.pid}/task")
        assert len(tids) > 1
        for tid in tids:
            status = open(f"/proc/{s.pid}/task/{tid}/status").read()
            assert "Seccomp:\t2" in status, tid  # mode 2: a filter


PROBES = '''
    import os, resource, socket, sys, threading
    from sandbox.jail import limits, seccomp
    limits.set_no_new_privs()
    early = threading.Thread(target=lambda: __import__("time").sleep(1))
    early.start()  # started before the filter: TSYNC must cover it too
    print(seccomp.install_filter())
    def seccomp_mode(tid):
        status = open(f"/proc/self/task/{tid}/status").read()
        return status.split("Seccomp:")[1].split()[0]
    print("early thread", seccomp_mode(early.native_id))
    def unshare_nothing():  # unshare(0) changes nothing and succeeds -- unless refused
        if limits._libc().unshare(0) != 0:
            raise PermissionError("unshare")
    attempts = {
        "socket AF_INET": lambda: socket.socket(socket.AF_INET).close(),
        "socket AF_INET6": lambda: socket.socket(socket.AF_INET6).close(),
        "socket AF_NETLINK": lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close(),
        "socket AF_UNIX": lambda: socket.socket(socket.AF_UNIX).close(),
        "fork": lambda: os.fork() == 0 and os._exit(0),
        "exec": lambda: os.execv("/bin/true", ["true"]),
        "kill parent": lambda: os.kill(os.getppid(), 0),
        "kill group": lambda: os.kill(0, 0),
        "kill self": lambda: os.kill(os.getpid(), 0),
        "thread": lambda: threading.Thread(target=lambda: None).start(),
        "unshare": unshare_nothing,
        "prlimit parent": lambda: resource.prlimit(os.getppid(), resource.RLIMIT_CORE),
        "prlimit self": lambda: resource.prlimit(0, resource.RLIMIT_CORE),
        "lower own rlimit": lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)),  # hard limits bind
    }
    for name, attempt in attempts.items():
        try:
            attempt()
            print(name, "allowed")
        except PermissionError:
            print(name, "refused")
'''


@needs_filter
def test_a_filtered_process_is_refused_what_programs_never_need():
    child = run_child(PROBES)
    assert child.returncode == 0, child.stderr
    lines = child.stdout.splitlines()
    assert lines[:2] == ["seccomp", "early thread 2"]
    outcome = dict(line.rsplit(" ", 1) for line in lines[2:])
    assert outcome == {
        "socket AF_INET": "refused", "socket AF_INET6": "refused", "socket AF_NETLINK": "refused",
        "socket AF_UNIX": "allowed", "fork": "refused", "exec": "refused", "kill parent": "refused",
        "kill group": "refused", "kill self": "allowed", "thread": "allowed", "unshare": "refused",
        "prlimit parent": "refused", "prlimit self": "allowed", "lower own rlimit": "allowed"}


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="x32 calls exist on x86_64 only")
def test_a_call_through_another_abi_kills_the_process():
    child = run_child('''
        import ctypes
        from sandbox.jail import limits, seccomp
        limits.set_no_new_privs()
        seccomp.install_filter()
        print("installed", flush=True)
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall(39 | 0x40000000)  # getpid through the x32 ABI, which the filter does not model
        print("survived", flush=True)
    ''')
    assert child.stdout.strip() == "installed"
    assert child.returncode == -signal.SIGSYS


def test_an_unknown_architecture_is_reported_not_guessed():
    with pytest.raises(LayerUnavailable, match="no seccomp filter for architecture 'riscv64'"):
        seccomp.build_filter("riscv64", 2)


def test_without_no_new_privs_an_unprivileged_process_cannot_install_it():
    outcome = try_unprivileged("seccomp.install_filter()")
    assert outcome == "unavailable: seccomp(SET_MODE_FILTER, TSYNC) failed: Permission denied"

"""The OS jail (docs/sandbox.md, L6): every worker, and the fork server, in a network namespace of its own.

Programs cannot import socket, so the namespace is proven from outside: by /proc/<pid>/ns/net of
real workers (every thread of them), and by a child that applies the same helper and then tries
to reach a listener of this test process. The degraded paths (not root, threads already running)
are run for real in children too.
"""
from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import textwrap

import pytest

import sandbox.engine.launch as launch
from sandbox.engine.launch import ENGINE_ROOT
from test_sandbox_host import FORK, GOOD, LAUNCHERS, session

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="network namespaces need CAP_SYS_ADMIN here")


def net_ns(pid: int | str, tid: int | str | None = None) -> str:
    return os.readlink(f"/proc/{pid}/task/{tid}/ns/net" if tid else f"/proc/{pid}/ns/net")


def run_child(code: str, *args: str) -> subprocess.CompletedProcess:
    """A fresh interpreter that imports sandbox.jail.limits from this tree and runs `code`."""
    boot = f"import sys; sys.path.insert(0, {ENGINE_ROOT!r})\n" + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-I", "-c", boot, *args], capture_output=True, text=True, timeout=60)


def try_unprivileged(call: str) -> str:
    """Run `call` (an expression over sandbox.<module> names) in a fresh child that first drops to
    nobody when it is root; what it printed: "unavailable: <why>" or "ok: <result>"."""
    child = run_child(f'''
        import os
        from sandbox.jail import cgroups, limits, pidns, seccomp
        if os.geteuid() == 0:
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
        try:
            print("ok:", {call})
        except limits.LayerUnavailable as exc:
            print("unavailable:", exc)
    ''')
    assert child.returncode == 0, child.stderr
    return child.stdout.strip()


@pytest.fixture
def listener():
    """A TCP listener of the engine on 127.0.0.1 (what a program with a network could reach)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


@pytest.mark.parametrize("name", sorted(LAUNCHERS))
def test_every_worker_thread_is_outside_the_engines_network_namespace(name):
    launcher = LAUNCHERS[name]
    with session(GOOD, launcher=launcher) as a, session(GOOD, launcher=launcher) as b:
        infos = [a.start(), b.start()]
        a.write({"topic": "t"}, "a dog named Rex")  # chromadb works without any network
        assert a.read({"text": "dog"}).output == "a dog named Rex"
        if not ROOT:  # degraded, and says so
            for info in infos:
                assert "net_namespace" not in info.layers
                assert any(w.startswith("enter_net_namespace:") for w in info.warnings)
            return
        engine = net_ns("self")
        for s, info in zip((a, b), infos):
            assert "net_namespace" in info.layers and info.warnings == []
            # chromadb started threads after the unshare; each must have inherited the namespace
            tids = os.listdir(f"/proc/{s.pid}/task")
            assert len(tids) > 1
            assert {net_ns(s.pid, tid) for tid in tids} == {net_ns(s.pid)}
            assert net_ns(s.pid) != engine
        assert net_ns(a.pid) != net_ns(b.pid)  # workers cannot reach one another either
        if launcher is FORK:  # the server, which every worker is forked from, has none of ours
            server = FORK.server_pid
            assert net_ns(server) not in (engine, net_ns(a.pid), net_ns(b.pid))
            assert FORK._server.info["layers"] == ["net_namespace"]


def test_switching_the_namespace_off_is_reported(monkeypatch):
    monkeypatch.setattr(launch, "NET_NAMESPACE", False)
    with session(GOOD, launcher=FORK) as s:
        info = s.start()
        assert "net_namespace" not in info.layers
        assert any("switched off" in w for w in info.warnings)
        if ROOT:  # it stays in the fork server's namespace, which is still not the engine's
            assert net_ns(s.pid) == net_ns(FORK.server_pid) != net_ns("self")


@needs_root
def test_a_jailed_child_cannot_connect_to_the_engine(listener):
    connect = '''
        import socket, sys
        from sandbox.jail import limits
        if sys.argv[2] == "jail":
            print(limits.enter_net_namespace())
        try:
            socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
            print("connected")
        except OSError as exc:
            print("refused", exc.errno)
    '''
    control = run_child(connect, str(listener), "none")
    assert control.stdout.split() == ["connected"], control.stderr  # the listener is reachable
    jailed = run_child(connect, str(listener), "jail")
    out = jailed.stdout.split()
    assert out[:2] == ["net_namespace", "refused"], (jailed.stdout, jailed.stderr)
    # ENETUNREACH: not even the loopback interface is up in the new namespace
    assert int(out[2]) == errno.ENETUNREACH
    # and no interface but that loopback exists there
    interfaces = run_child('''
        import socket
        from sandbox.jail import limits
        limits.enter_net_namespace()
        print(sorted(name for _, name in socket.if_nameindex()))
    ''')
    assert interfaces.stdout.splitlines()[0] == "['lo']", interfaces.stderr


@needs_root
def test_unavailable_when_not_root_or_not_single_threaded():
    not_root = try_unprivileged("limits.enter_net_namespace()")
    assert not_root == "unavailable: unshare(CLONE_NEWNET) failed: Operation not permitted"
    threaded = run_child('''
        import threading
        from sandbox.jail import limits
        stop = threading.Event()
        threading.Thread(target=stop.wait).start()
        try:
            limits.enter_net_namespace()
        except limits.LayerUnavailable as exc:
            print("unavailable:", exc)
        stop.set()
    ''')
    assert "unavailable: 2 threads are running" in threaded.stdout, threaded.stderr


@needs_root
def test_the_scratch_root_hides_every_file_but_keeps_local_time(tmp_path):
    """After enter_scratch_root a process sees its scratch directory as / and nothing else --
    no /etc/passwd, no engine folder -- while the local time zone read before still applies."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    child = run_child('''
        import os, sys, time
        from sandbox.jail import limits
        before = time.strftime("%Z %z")
        print(limits.enter_scratch_root(sys.argv[1]))
        print(sorted(os.listdir("/")), os.getcwd(), os.environ["TMPDIR"])
        for path in ("/etc/passwd", sys.argv[2], "/proc/self/environ"):
            try:
                open(path).close()
                print("readable", path)
            except OSError as exc:
                print("hidden", type(exc).__name__)
        print(time.strftime("%Z %z") == before)
    ''', str(scratch), str(ENGINE_ROOT) + "/README.md")
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == ["scratch_root", "[] / /", "hidden FileNotFoundError",
                                         "hidden FileNotFoundError", "hidden FileNotFoundError", "True"]


def test_no_scratch_root_without_root():
    assert try_unprivileged("limits.enter_scratch_root('/tmp')") == \
        "unavailable: chroot('/tmp') failed: Operation not permitted"


@needs_root
def test_a_real_worker_holds_no_directory_it_could_climb_out_through():
    """A chroot is left through a directory descriptor opened outside it (fchdir): the worker
    may hold none."""
    with session(GOOD) as s:
        s.start()
        s.write({"topic": "t"}, "a dog named Rex")
        pid = s.pid
        for fd in os.listdir(f"/proc/{pid}/fd"):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            assert not (target.startswith("/") and os.path.isdir(target)), (fd, target)
        assert os.readlink(f"/proc/{pid}/root") == s._worker.home

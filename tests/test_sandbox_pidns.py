"""The OS jail, part two (docs/sandbox.md, L6): every worker in a pid namespace of its own, with its own /proc.

Programs cannot reach os or signal, so this is proven from outside -- /proc/<pid>/status (NSpid),
/proc/<pid>/ns/pid, and the worker's own view of /proc through /proc/<pid>/root -- and by fresh
children that apply the same helper and then try what a program with os would try. Exit
statuses must survive the keeper in between (the cpu-limit and SIGTERM cases are in
test_sandbox_host.py and test_sandbox_forkserver.py).
"""
from __future__ import annotations

import os
import signal
import time

import pytest

import sandbox.engine.launch as launch
from sandbox.engine.session import SandboxError
from test_sandbox_host import FORK, GOOD, LAUNCHERS, LOOPS, ROOT, init_of, ppid_of, session, wait_gone
from test_sandbox_jail import run_child, try_unprivileged

needs_root = pytest.mark.skipif(not ROOT, reason="pid namespaces need CAP_SYS_ADMIN here")


def status_fields(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return {k: v.strip() for k, v in (line.split(":", 1) for line in f if ":" in line)}


def pid_ns(pid: int | str) -> str:
    return os.readlink(f"/proc/{pid}/ns/pid")


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if status_fields(int(entry)).get("PPid") == str(pid):
                    found.append(int(entry))
            except OSError:
                pass
    return found


@needs_root
@pytest.mark.parametrize("name", sorted(LAUNCHERS))
def test_each_worker_is_pid_2_of_its_own_namespace_and_sees_only_it(name):
    with session(GOOD, launcher=LAUNCHERS[name]) as a, session(GOOD, launcher=LAUNCHERS[name]) as b:
        infos = [a.start(), b.start()]
        a.write({"topic": "t"}, "a dog named Rex")
        assert a.read({"text": "dog"}).output == "a dog named Rex"
        engine = pid_ns("self")
        for s, info in zip((a, b), infos):
            assert {"pid_namespace", "private_proc"} <= set(info.layers)
            assert info.warnings == []
            worker, launched = s.pid, s.group_pid
            assert status_fields(worker)["NSpid"].split() == [str(worker), "2"]
            # its parent stays out here: the fork server, which made the namespace (no keeper), or
            # the keeper a fresh worker split off (sandbox.worker.fork_jail, sandbox.jail.pidns)
            outside = ppid_of(worker)
            if name == "fork":
                assert launched == worker and outside == FORK.server_pid
            else:
                assert launched != worker and outside == launched
            assert status_fields(outside)["NSpid"].split() == [str(outside)]
            assert pid_ns(outside) == engine != pid_ns(worker)
            # its file system is its own empty scratch directory (chroot; its /proc is tested below)
            assert os.readlink(f"/proc/{worker}/root") == s._worker.home
            assert os.listdir(f"/proc/{worker}/root") == []
            assert "scratch_root" in info.layers
            # the parent's other child in that namespace is its init: pid 1 there, cat on a pipe,
            # no other descriptor
            init = [c for c in children_of(outside) if c != worker and pid_ns(c) == pid_ns(worker)]
            assert len(init) == 1 and status_fields(init[0])["NSpid"].split()[-1] == "1"
            assert open(f"/proc/{init[0]}/cmdline").read() == "cat\0"
            assert sorted(os.listdir(f"/proc/{init[0]}/fd")) == ["0", "1", "2"]
            assert os.readlink(f"/proc/{init[0]}/fd/0").startswith("pipe:")
            assert open(f"/proc/{init[0]}/environ").read() == ""
            assert status_fields(worker)["Uid"].split()[0] == "65534"
        assert pid_ns(a.pid) != pid_ns(b.pid)  # no shared namespace: workers cannot see each other
        # the mount of that /proc stayed inside the worker: the engine's mount table is unchanged
        assert sum(" /proc " in line for line in open("/proc/self/mountinfo")) == 1


@needs_root
@pytest.mark.parametrize("name, victim", [("fork", "init"), ("subprocess", "init"), ("subprocess", "keeper")])
def test_killing_init_or_the_keeper_ends_the_worker_and_the_engine_says_so(name, victim):
    with session(LOOPS, launcher=LAUNCHERS[name]) as s:
        s.start()
        worker = s.pid
        target = s.group_pid if victim == "keeper" else init_of(worker)
        assert target not in (None, worker)
        os.kill(target, signal.SIGKILL)  # one process only, not the group
        assert wait_gone([worker])  # the namespace dies with its init; init dies with the keeper
        with pytest.raises(SandboxError) as err:
            s.write({}, "x")
        assert err.value.verdict.rule == "worker died"


JAILED = '''
    import os, signal, sys
    from sandbox.jail import pidns
    engine = int(sys.argv[1])
    layer, report = pidns.enter_pid_namespace(engine)  # from here on: the worker, pid 2
    print(layer, os.getpid(), os.getppid(), report, flush=True)
    try:
        os.kill(engine, 0)
        print("engine reachable", flush=True)
    except ProcessLookupError:
        print("engine unreachable", flush=True)
    how = sys.argv[2]
    if how == "exit":
        sys.exit(7)
    os.kill(os.getpid(), getattr(signal, how))
'''


@needs_root
@pytest.mark.parametrize("how, code", [("exit", 7), ("SIGSEGV", -signal.SIGSEGV), ("SIGTERM", -signal.SIGTERM),
                                       ("SIGXCPU", -signal.SIGXCPU)])
def test_the_keeper_ends_the_way_its_worker_ended(how, code):
    child = run_child(JAILED, str(os.getpid()), how)
    assert child.returncode == code, child.stderr
    first, second = child.stdout.splitlines()[:2]
    assert first == "pid_namespace 2 0 None"  # pid 2, its parent (the keeper) outside; no task
    # our pid cannot name anything outside its namespace (2 would name itself, 1 its init)
    assert second == "engine unreachable" or os.getpid() in (1, 2)


def test_not_root_means_no_pid_namespace_and_a_warning():
    # still one process: the caller goes on as the worker, outside any new namespace
    outcome = try_unprivileged("pidns.enter_pid_namespace(os.getppid()), os.getpid() != 2")
    assert outcome == "unavailable: unshare(CLONE_NEWPID) failed: Operation not permitted"


# A fork server's preparation for one worker, after `setup`: the plan (None: fork as it is) and
# whether its next children are still born in its own pid namespace.
PREPARE = '''
    import os
    import sandbox.worker.main
    from sandbox.jail import pidns
    from sandbox.worker.fork_jail import ForkJail
    {setup}
    args = ["--in-fd", "3", "--out-fd", "4", "--parent-pid", "1", "--limits", '{{"memory_mb": 512}}',
            "--home", "/tmp"]
    plan = ForkJail().prepare(args)
    print(plan, os.readlink("/proc/self/ns/pid_for_children") == os.readlink("/proc/self/ns/pid"))
'''


def test_a_fork_server_that_may_not_make_namespaces_forks_workers_as_they_are():
    # Not root: the server's unshare is refused, and so would be a setns back. It must neither
    # stop (a refused setns is fatal to it) nor leave its next children in another namespace;
    # the worker then tries its own split and reports why it could not.
    child = run_child(PREPARE.format(setup="""
    if os.geteuid() == 0:
        os.setresgid(65534, 65534, 65534)
        os.setresuid(65534, 65534, 65534)"""))
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["None", "True"]


@needs_root
def test_a_fork_server_whose_init_fails_to_start_returns_to_its_own_namespace():
    child = run_child(PREPARE.format(setup="""
    def refuse(cat, lifeline):
        raise OSError(11, "no init today")
    pidns._spawn_init = refuse   # after a successful unshare"""))
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["None", "True"]   # its next children are born beside it again


def test_switching_the_pid_namespace_off_is_reported(monkeypatch):
    monkeypatch.setattr(launch, "PID_NAMESPACE", False)
    with session(GOOD, launcher=FORK) as s:
        info = s.start()
        assert "pid_namespace" not in info.layers and "private_proc" not in info.layers
        assert any(w.startswith("enter_pid_namespace: switched off") for w in info.warnings)
        assert s.pid == s.group_pid  # one process again: the launched one runs the program
        if ROOT:
            assert pid_ns(s.pid) == pid_ns("self")
        s.write({"topic": "t"}, "hello")


def test_a_missing_layer_is_logged_once_not_per_worker(monkeypatch, caplog):
    import sandbox.engine.layers as layers

    monkeypatch.setattr(launch, "PID_NAMESPACE", False)
    monkeypatch.setattr(layers, "_warned", set())
    with caplog.at_level("WARNING", logger="sandbox.engine.session"):
        for _ in range(3):
            with session(GOOD, launcher=FORK) as s:
                assert any(w.startswith("enter_pid_namespace:") for w in s.start().warnings)
    logged = [r.getMessage() for r in caplog.records if "enter_pid_namespace" in r.getMessage()]
    assert len(logged) == 1 and "logged once per process" in logged[0]


@needs_root
def test_a_worker_killed_by_the_deadline_leaves_no_process_behind():
    with session(LOOPS, launcher=FORK) as s:
        s.start()
        worker = s.pid
        assert s.group_pid == worker  # no keeper: the fork server made the namespace
        init = init_of(worker)
        assert init is not None
        s.close()
    assert wait_gone([worker, init])
    deadline = time.monotonic() + 5  # the fork server reaps both: no zombie is left behind
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p in (worker, init)):
        time.sleep(0.05)
    assert not any(os.path.exists(f"/proc/{p}") for p in (worker, init))


@needs_root
def test_a_worker_mounts_a_proc_that_shows_only_its_namespace():
    child = run_child('''
        import os
        from sandbox.jail import pidns
        layer, _ = pidns.enter_pid_namespace(os.getppid())
        print(layer, pidns.mount_private_proc(), sorted(int(e) for e in os.listdir("/proc") if e.isdigit()))
    ''')
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "pid_namespace private_proc [1, 2]"


KEEPER_TASK = '''
    import os, sys
    from sandbox.jail import pidns
    def task(worker, init):
        if sys.argv[1] == "raise":
            raise RuntimeError("no cgroup today")
        # the keeper sees both by their pids in its own (the engine's) namespace
        ns = [open(f"/proc/{p}/status").read().split("NSpid:")[1].splitlines()[0].split()[-1]
              for p in (worker, init)]
        return "layer:task saw " + " ".join(ns)
    layer, report = pidns.enter_pid_namespace(os.getppid(), task)
    print(pidns.read_keeper_report(report), flush=True)
'''


@needs_root
@pytest.mark.parametrize("how, report", [("ok", "(['task saw 2 1'], [])"),
                                         ("raise", "([], ['keeper task failed: RuntimeError: no cgroup today'])")])
def test_the_keeper_runs_its_task_and_the_worker_reads_the_report(how, report):
    child = run_child(KEEPER_TASK, how)
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == report

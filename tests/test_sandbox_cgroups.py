"""A cgroup per worker (docs/sandbox.md, L6): keeper, init and worker inside it, limits that really bind,
removal after the worker, and a sweep of what a killed engine left. Runs where a cgroup is
writable (root on these machines); the degraded paths run everywhere."""
from __future__ import annotations

import os
import signal

import pytest

import sandbox.engine.launch as launch
from sandbox.jail import cgroups
from sandbox.jail.limits import LayerUnavailable
from test_sandbox_host import FORK, GOOD, LAUNCHERS, init_of, ppid_of, session, wait_gone
from test_sandbox_jail import run_child, try_unprivileged
from test_sandbox_pidns import children_of


def _writable_hierarchies() -> dict[str, str]:
    if os.geteuid() != 0:
        return {}
    try:
        return {name: path for name, path in cgroups._hierarchies().items() if os.access(path, os.W_OK)}
    except LayerUnavailable:
        return {}


HIERARCHIES = _writable_hierarchies()
needs_cgroup = pytest.mark.skipif("pids" not in HIERARCHIES and "unified" not in HIERARCHIES,
                                  reason="no writable cgroup with a pids controller here")


def cgroup_of(pid: int, controller: str) -> str:
    for line in open(f"/proc/{pid}/cgroup"):
        _, controllers, path = line.rstrip("\n").split(":", 2)
        if controller in controllers.split(",") or (not controllers and controller == ""):
            return path
    raise AssertionError(f"no {controller} line for {pid}")


def pids_dir(keeper: int) -> str:
    base = HIERARCHIES.get("pids") or HIERARCHIES["unified"]
    return os.path.join(base, cgroups.PARENT, f"w{keeper}")


@needs_cgroup
@pytest.mark.parametrize("name", sorted(LAUNCHERS))
def test_init_and_worker_and_any_keeper_share_a_capped_cgroup_that_goes_with_them(name):
    with session(GOOD, launcher=LAUNCHERS[name]) as s:
        info = s.start()
        s.write({"topic": "t"}, "a dog named Rex")
        assert s.read({"text": "dog"}).output == "a dog named Rex"
        assert "cgroup" in info.layers and info.warnings == []
        keeper, worker = s.group_pid, s.pid  # the cgroup is named after the launched process
        if name == "fork":  # the fork server made the namespace: no keeper, and the server stays out
            members = [worker, init_of(worker)]
            assert keeper == worker and None not in members
        else:
            members = [keeper, *children_of(keeper)]
            assert worker in members and len(members) == 3  # keeper, init, worker
        controller = "pids" if "pids" in HIERARCHIES else ""
        expected = cgroup_of(os.getpid(), controller).rstrip("/") + f"/{cgroups.PARENT}/w{keeper}"
        assert {cgroup_of(p, controller) for p in members} == {expected}
        if name == "fork":
            assert cgroup_of(ppid_of(worker), controller) != expected  # the fork server stays out
        directory = pids_dir(keeper)
        assert open(os.path.join(directory, "pids.max")).read().strip() == str(cgroups.PIDS_MAX)
        tasks = int(open(os.path.join(directory, "pids.current")).read())
        assert len(os.listdir(f"/proc/{worker}/task")) + len(members) - 1 <= tasks <= cgroups.PIDS_MAX
        if "memory" in HIERARCHIES:
            memory_dir = os.path.join(HIERARCHIES["memory"], cgroups.PARENT, f"w{keeper}")
            limit = int(open(os.path.join(memory_dir, "memory.limit_in_bytes")).read())
            assert limit == (s.limits.memory_mb + cgroups.MEMORY_SLACK_MB) << 20
    assert wait_gone(list({worker, keeper, *members}))
    assert not os.path.exists(directory)


@needs_cgroup
def test_the_task_cap_binds():
    child = run_child('''
        import threading, time
        from sandbox.jail import cgroups
        import os
        print(cgroups.join_worker_cgroup(100), os.getpid(), flush=True)
        started = 0
        try:
            for _ in range(200):
                threading.Thread(target=time.sleep, args=(3,), daemon=True).start()
                started += 1
        except RuntimeError as exc:
            print("refused after", started, exc, flush=True)
    ''')
    assert child.returncode == 0, child.stderr
    lines = child.stdout.splitlines()
    layer, pid = lines[0].split()
    assert layer == "cgroup"
    started = int(lines[1].split()[2])
    assert cgroups.PIDS_MAX - 5 <= started < cgroups.PIDS_MAX  # the main thread counts too
    assert cgroups.remove(int(pid))


@needs_cgroup
@pytest.mark.skipif("memory" not in HIERARCHIES, reason="no writable memory cgroup here")
def test_the_memory_cap_binds_on_resident_memory():
    child = run_child('''
        import os
        from sandbox.jail import cgroups
        print(cgroups.join_worker_cgroup(16), os.getpid(), flush=True)  # 16 + 64 MiB in all
        blocks = [bytearray(8 << 20) for _ in range(40)]  # 320 MiB, touched (zeroed) page by page
        print("allocated", flush=True)
    ''')
    (line,) = child.stdout.splitlines()
    layer, pid = line.split()
    assert layer == "cgroup"
    assert child.returncode == -signal.SIGKILL  # the cgroup's OOM killer, not a MemoryError
    assert cgroups.remove(int(pid))


@needs_cgroup
def test_a_new_worker_sweeps_cgroups_a_killed_engine_left():
    parent = os.path.dirname(pids_dir(0))
    stale_pid = _unused_pid()
    os.makedirs(os.path.join(parent, f"w{stale_pid}"))
    live = os.path.join(parent, f"w{os.getpid()}")  # a keeper that still runs: left alone
    os.makedirs(live)
    try:
        with session(GOOD, launcher=FORK) as s:
            s.start()
        assert not os.path.exists(os.path.join(parent, f"w{stale_pid}"))
        assert os.path.isdir(live)
    finally:
        os.rmdir(live)


def _unused_pid() -> int:
    pid = 4_000_000
    while os.path.exists(f"/proc/{pid}"):
        pid -= 1
    return pid


def test_not_root_means_no_cgroup_and_a_warning():
    assert try_unprivileged("cgroups.join_worker_cgroup(100)").startswith("unavailable: ")


def test_switching_the_cgroup_off_is_reported(monkeypatch):
    monkeypatch.setattr(launch, "CGROUP", False)
    with session(GOOD, launcher=FORK) as s:
        info = s.start()
        assert "cgroup" not in info.layers
        assert any(w.startswith("join_worker_cgroup: switched off") for w in info.warnings)
        if HIERARCHIES:
            controller = "pids" if "pids" in HIERARCHIES else ""
            assert cgroup_of(s.pid, controller) == cgroup_of(os.getpid(), controller)


def test_a_v2_hierarchy_without_our_controllers_is_reported_not_half_used(monkeypatch):
    """On these machines cgroup v2 is mounted (hybrid) but offers neither pids nor memory: with
    the v1 hierarchies out of sight, joining says so instead of creating a cgroup without limits."""
    found = cgroups._hierarchies()
    if "unified" not in found:
        pytest.skip("no cgroup2 mount here")
    controllers = open(os.path.join(found["unified"], "cgroup.controllers")).read().split()
    if {"pids", "memory"} <= set(controllers):
        pytest.skip("this cgroup2 mount offers both controllers")
    monkeypatch.setattr(cgroups, "_hierarchies", lambda: {"unified": found["unified"]})
    with pytest.raises(LayerUnavailable, match="does not offer the pids and memory controllers"):
        cgroups.join_worker_cgroup(100)
    assert not os.path.exists(os.path.join(found["unified"], cgroups.PARENT, f"w{os.getpid()}"))

"""The fork-server launcher: speed, a clean inheritance, who dies with whom, exit statuses,
concurrency, restarts and the fallback. Real server and worker processes throughout; the
behaviour every launcher shares (including dying with a killed engine) is tested under both in
test_sandbox_host.py."""
from __future__ import annotations

import gc
import os
import shutil
import signal
import statistics
import threading
import time

import pytest

import sandbox.engine.forkserver as forkserver
from sandbox.engine.forkserver import ForkServerLauncher, ForkServerUnavailable
from sandbox.engine.session import ProgramSession, SandboxError, SandboxLimits, default_launcher, set_default_launcher
from sandbox.engine.launch import SubprocessLauncher, spawn
from test_sandbox_host import FORK, GOOD, LOOPS, kb, ppid_of, process_gone, session, wait_gone

SECRET = "sk-forkserver-secret-4711"

COUNTER = kb('''
    def __init__(self, toolkit):
        self.col = toolkit.chroma.get_or_create_collection("shared_name")

    def write(self, item, raw_text):
        self.col.add(ids=[raw_text], documents=[raw_text])

    def read(self, query):
        return ",".join(sorted(self.col.get()["ids"]))
''')


def fd_links(pid: int) -> set[str]:
    return {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}


def memory_contains(pid: int, needle: bytes, chunk: int = 8 << 20) -> bool:
    """Whether any readable mapping of `pid` holds `needle` (root, or the same uid, needed)."""
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("r"):
                continue
            start, end = (int(x, 16) for x in span.split("-"))
            tail = b""
            for offset in range(start, end, chunk):
                try:
                    mem.seek(offset)
                    data = tail + mem.read(min(chunk, end - offset))
                except (OSError, OverflowError, ValueError):  # e.g. [vvar], guard pages
                    break
                if needle in data:
                    return True
                tail = data[-len(needle):]
    return False


def test_time_to_ready_is_far_below_a_fresh_interpreter():
    launcher = ForkServerLauncher()
    try:
        with session(GOOD, launcher=launcher) as s:  # cold: includes the server's own start-up
            cold = s.start().ready_s
        warm = []
        for _ in range(5):
            with session(GOOD, launcher=launcher) as s:
                warm.append(s.start().ready_s)
                s.write({"topic": "t"}, "a dog named Rex")
                assert s.read({"text": "dog"}).output == "a dog named Rex"
        with session(GOOD, launcher=SubprocessLauncher()) as s:
            fresh = s.start().ready_s
    finally:
        launcher.shutdown()
    assert statistics.median(warm) < 0.5, warm
    assert statistics.median(warm) < fresh / 3, (warm, fresh)
    assert cold > statistics.median(warm)
    assert launcher.servers_started == 1


def test_no_secret_reaches_the_server_or_its_workers(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("MSTAR_SOME_TOKEN", SECRET)
    launcher = ForkServerLauncher()  # a server started while the engine's environment holds secrets
    try:
        with session(GOOD, launcher=launcher) as s:
            s.start()
            server = launcher.server_pid
            assert ppid_of(s.group_pid) == server and ppid_of(server) == os.getpid()
            for pid in (server, s.group_pid, s.pid):
                environ = open(f"/proc/{pid}/environ", "rb").read()
                assert SECRET.encode() not in environ and b"OPENAI_API_KEY" not in environ
                keys = {kv.split(b"=", 1)[0] for kv in environ.split(b"\0") if kv}
                assert keys == {b"PATH", b"HOME", b"TMPDIR", b"LANG"}
                assert SECRET.encode() not in open(f"/proc/{pid}/cmdline", "rb").read()
            if os.geteuid() == 0:  # nothing of it anywhere in the server's memory either
                assert memory_contains(os.getpid(), SECRET.encode())  # (the scan finds it where it is)
                assert not memory_contains(server, SECRET.encode())
            # The worker holds no descriptor of the server's: no control socket, no status pipes.
            worker_fds, server_fds = fd_links(s.pid), fd_links(server)
            assert any(link.startswith("socket:") for link in server_fds)
            assert (worker_fds & server_fds) - {"/dev/null"} == set()
            assert (fd_links(s.group_pid) & server_fds) - {"/dev/null"} == set()  # nor its keeper
            assert os.getpgid(s.pid) == s.group_pid == os.getsid(s.pid)
    finally:
        launcher.shutdown()


def test_server_and_session_started_from_a_short_lived_thread_outlive_that_thread():
    launcher = ForkServerLauncher()
    started: list[ProgramSession] = []

    def start() -> None:
        s = session(GOOD, launcher=launcher)
        s.start()
        started.append(s)

    starter = threading.Thread(target=start)
    starter.start()
    starter.join()
    s = started[0]
    try:
        time.sleep(0.3)  # PR_SET_PDEATHSIG would have fired by now if tied to that thread
        server = launcher.server_pid
        assert server and not process_gone(s.pid)
        s.write({"topic": "t"}, "a cat named Tom")
        assert s.read({"text": "cat"}).output == "a cat named Tom"
    finally:
        s.close()
        launcher.shutdown()
    assert wait_gone([server, s.pid])


def test_concurrent_starts_share_one_server_and_nothing_else():
    launcher = ForkServerLauncher()
    n = 4
    results: dict[int, tuple[int, str]] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def run(i: int) -> None:
        try:
            barrier.wait()  # all start at once, while the server itself is still starting
            with session(COUNTER, launcher=launcher) as s:
                s.start()
                s.write({}, f"doc{i}")
                results[i] = (s.pid, s.read({}).output)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    try:
        threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        launcher.shutdown()
    assert errors == []
    assert launcher.servers_started == 1
    assert len({pid for pid, _ in results.values()}) == n
    assert {i: out for i, (_, out) in results.items()} == {i: f"doc{i}" for i in range(n)}  # one program each


def test_a_dead_server_means_dead_workers_and_a_new_server_next_time():
    launcher = ForkServerLauncher()
    try:
        with session(LOOPS, launcher=launcher) as s:
            s.start()
            first = launcher.server_pid
            worker = s.pid
            os.kill(first, signal.SIGKILL)
            assert wait_gone([worker])  # PR_SET_PDEATHSIG
            assert launcher.server_pid is None  # reaped by us, its parent
            with pytest.raises(SandboxError) as err:
                s.write({}, "x")
            v = err.value.verdict
            assert (v.stage, v.gate, v.rule) == ("write", "runtime", "worker died")
            assert "SIGKILL" in v.message and s._worker.proc.server_lost
        with session(GOOD, launcher=launcher) as s:
            s.start()
            s.write({"topic": "t"}, "hello")
            assert launcher.server_pid not in (None, first)
        assert launcher.servers_started == 2
    finally:
        launcher.shutdown()


def test_a_second_ctrl_c_while_the_server_winds_down_at_exit_kills_it_without_a_traceback(monkeypatch):
    """The exit hook waits for the server to go; a Ctrl-C during that wait (a user's second one)
    used to print "Exception ignored in atexit callback" and a traceback. The server (and with it
    its workers) goes at once instead, quietly."""
    import weakref
    launcher = ForkServerLauncher()
    with session(LOOPS, launcher=launcher) as s:
        s.start()
        server_pid, worker = launcher.server_pid, s.pid

        def interrupted(self, kill=False, timeout=0.0):
            raise KeyboardInterrupt          # the signal arriving while close() waits
        monkeypatch.setattr(forkserver._Server, "close", interrupted)
        forkserver._shutdown_at_exit(weakref.ref(launcher))     # no exception comes out
        assert wait_gone([server_pid, worker])


def test_exit_statuses_come_from_the_server():
    with session(LOOPS, limits=SandboxLimits(call_timeout_s=10.0), launcher=FORK) as s:
        s.start()
        threading.Timer(0.3, os.kill, (s.pid, signal.SIGTERM)).start()
        with pytest.raises(SandboxError) as err:
            s.read({})
    assert err.value.verdict.rule == "worker died" and "SIGTERM" in err.value.verdict.message


def drop_a_worker(launcher) -> tuple[int, str]:
    """Start a worker and let go of it without end(): the server sees its status pipe closed and
    kills its group. (pid, scratch directory)."""
    worker = spawn(launcher, SandboxLimits())
    pid, home = worker.pid, worker.home  # the worker (the server made its namespace: no keeper)
    for fd in (worker.frames_in, worker.frames_out):
        os.close(fd)
    del worker
    gc.collect()
    return pid, home


def test_a_dropped_worker_is_killed_by_the_server():
    pid, home = drop_a_worker(FORK)
    assert wait_gone([pid])
    shutil.rmtree(home)


def server_children(pid: int) -> list[int]:
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and not process_gone(int(e)) and _ppid(int(e)) == pid]


def _ppid(pid: int) -> int:
    try:
        return ppid_of(pid)
    except OSError:
        return -1


@pytest.mark.skipif(os.geteuid() != 0, reason="pid namespaces need CAP_SYS_ADMIN here")
def test_however_a_forked_worker_ends_its_init_goes_and_the_server_holds_nothing_of_it():
    # The server makes each forked worker's pid namespace and holds its init's lifeline
    # (sandbox.worker.fork_jail): a lifeline kept after the worker is gone would leave a cat
    # process and a descriptor behind for every worker a run ever had.
    launcher = ForkServerLauncher()
    try:
        with session(GOOD, launcher=launcher) as s:
            s.start()
            server = launcher.server_pid
            inits = [c for c in server_children(server) if c != s.pid]
            assert len(inits) == 1 and open(f"/proc/{inits[0]}/cmdline").read() == "cat\0"
        assert wait_gone(inits)
        baseline = len(os.listdir(f"/proc/{server}/fd"))
        ended = []
        with session(GOOD, launcher=launcher) as s:  # closed
            s.start()
            ended.append(s.pid)
        with session(LOOPS, limits=SandboxLimits(call_timeout_s=10.0), launcher=launcher) as s:  # killed
            s.start()
            ended.append(s.pid)
            threading.Timer(0.3, os.kill, (s.pid, signal.SIGTERM)).start()
            with pytest.raises(SandboxError):
                s.read({})
        pid, home = drop_a_worker(launcher)  # dropped by the engine: the server kills it
        ended.append(pid)
        assert wait_gone(ended)
        shutil.rmtree(home, ignore_errors=True)
        # At most as many descriptors as between workers (a request in flight may have added
        # one to that count): a lifeline kept per ended worker would be 3 more.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and (server_children(server)
                                               or len(os.listdir(f"/proc/{server}/fd")) > baseline):
            time.sleep(0.05)
        assert server_children(server) == []
        assert len(os.listdir(f"/proc/{server}/fd")) <= baseline
    finally:
        launcher.shutdown()


def test_fallback_when_the_server_cannot_start(monkeypatch):
    monkeypatch.setattr(forkserver, "SERVER_BOOT", "import sys; print('no server here', file=sys.stderr)")
    strict = ForkServerLauncher()
    with pytest.raises(ForkServerUnavailable, match="no server here"):
        strict.start()
    with session(GOOD, launcher=strict) as s, pytest.raises(ForkServerUnavailable):
        s.start()
    lenient = ForkServerLauncher(fallback=SubprocessLauncher())
    with session(GOOD, launcher=lenient) as s:
        s.start()
        assert ppid_of(s.group_pid) == os.getpid()  # a fresh interpreter, our own child
    assert "no server here" in lenient.failure and lenient.server_pid is None


def test_the_default_launcher_is_the_fork_server_and_can_be_replaced():
    chosen = default_launcher()
    assert isinstance(chosen, ForkServerLauncher) and isinstance(chosen.fallback, SubprocessLauncher)
    assert ProgramSession(GOOD).launcher is chosen
    replacement = SubprocessLauncher()
    previous = set_default_launcher(replacement)
    try:
        assert previous is chosen and ProgramSession(GOOD).launcher is replacement
    finally:
        set_default_launcher(previous)
    assert default_launcher() is chosen


def test_the_servers_preload_leaves_nothing_for_a_forked_worker_to_import():
    """A forked worker skips the chromadb warm-up (sandbox.worker.main.prepare_in_server) because the
    server already imported everything: once it has dropped to nobody it could not read the
    interpreter's files to import more. Here every collection and database method runs after the
    server's preload, and not one module may be imported on the way."""
    from test_sandbox_jail import run_child

    child = run_child('''
        import sys
        from sandbox.worker import forkserver as forkserver_main, main as worker
        from sandbox.worker.toolkit import OpClock
        forkserver_main.preload()
        assert worker._SERVER_SETTINGS is not None
        before = set(sys.modules)
        import chromadb
        from sandbox.worker.embedding import HashingEmbeddingFunction
        from sandbox.worker.toolkit_chroma import make_chroma, warm_up
        from sandbox.worker.toolkit_db import make_database
        chroma = make_chroma(chromadb.EphemeralClient(worker._SERVER_SETTINGS), HashingEmbeddingFunction())
        warm_up(chroma)  # every collection method, with where / where_document / include
        db = make_database(OpClock())
        db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)")
        db.executemany("INSERT INTO t VALUES (?, ?)", [("a", 1), ("b", 2)])
        db.commit()
        assert db.execute("SELECT k, v FROM t ORDER BY v DESC").fetchall()[0][0] == "b"
        print(sorted(set(sys.modules) - before))
    ''')
    assert child.returncode == 0, child.stderr
    assert child.stdout.strip() == "[]"


def test_a_worker_runs_chromadb_on_one_runtime_thread():
    """chromadb's tokio runtime gets one worker thread, not one per core (sandbox.worker.main): a
    worker makes one chroma call at a time, and more threads only added hand-offs to each call.
    Counted right after the load, before any add starts tokio's blocking threads (same name)."""
    with session(GOOD, launcher=FORK) as s:
        s.start()
        names = [open(f"/proc/{s.pid}/task/{tid}/comm").read().strip() for tid in os.listdir(f"/proc/{s.pid}/task")]
    assert names.count("tokio-rt-worker") == 1, names
    assert "sqlx-sqlite-wor" in names   # the runtime was started: chromadb's sqlite thread is there

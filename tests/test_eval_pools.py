"""The evaluations' shared threads and background closes (mstar/evaluation/pools.py)."""
from __future__ import annotations

import threading
import time

import pytest

from mstar.evaluation.pools import Bounded, close_later, drain_closes
from mstar.llm import scope as llm_scope
from sandbox.engine.session import ProgramSession
from run_helpers import SEED_A

PROGRAM = SEED_A   # any working program


def test_bounded_runs_at_most_limit_tasks_of_one_evaluation_at_once():
    pool = Bounded("case", 2)
    running, peak, lock = [0], [0], threading.Lock()

    def task():
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return 1

    futures = [pool.submit(task) for _ in range(6)]
    pool.join()
    assert all(f.done() for f in futures)
    assert sum(f.result() for f in futures) == 6
    assert peak[0] == 2


def test_bounded_tasks_carry_the_submitters_llm_scope():
    pool = Bounded("llm", 4)
    with llm_scope.scoped("iter_042"):
        fut = pool.submit(llm_scope.current)
    assert fut.result() == "iter_042"


def test_second_evaluation_starts_no_new_threads():
    def names() -> set[str]:
        return {t.name for t in threading.enumerate() if t.name.startswith("eval-")}

    def one_evaluation() -> None:
        llm, case = Bounded("llm", 16), Bounded("case", 8)
        calls = [llm.submit(time.sleep, 0.01) for _ in range(16)]
        cases = [case.submit(lambda f=f: f.result()) for f in calls[:8]]
        for f in cases:
            f.result()
        llm.join()
        case.join()

    one_evaluation()
    before = names()
    one_evaluation()
    # A thread is idle again a moment after its task's result is set: on a loaded machine the second
    # evaluation may find a few still busy and start new ones. Pools of its own would start all 24.
    assert len(names() - before) <= len(before) // 4, "threads of the first evaluation were not reused"


def test_join_waits_for_started_tasks_and_skips_cancelled_ones():
    pool = Bounded("llm", 1)
    gate = threading.Event()
    first = pool.submit(gate.wait, 5)
    queued = pool.submit(time.sleep, 0)
    assert queued.cancel() or queued.done()
    threading.Timer(0.1, gate.set).start()
    t0 = time.perf_counter()
    pool.join()
    assert first.done() and first.result() is True
    assert time.perf_counter() - t0 >= 0.05


def test_close_later_closes_the_worker_off_the_callers_path():
    session = ProgramSession(PROGRAM)
    session.start()
    assert session.alive()
    close_later(session)
    drain_closes()
    assert not session.alive()
    assert session.group_pid is None or not _process_exists(session.group_pid)


def _process_exists(pid: int) -> bool:
    import os
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def test_ctrl_c_while_an_evaluation_waits_for_its_tasks_reaches_the_caller():
    # Bounded.join waits on the evaluation's tasks in the main thread; a KeyboardInterrupt there
    # was swallowed with the "cancelled" case, so a script's Ctrl-C could let the run go on.
    import signal
    import threading as th

    from mstar.evaluation.pools import Bounded
    # As in a terminal: a suite started in the background (`pytest &` without job control) has
    # SIGINT ignored, and a Ctrl-C would then be nothing to reach anyone.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    release = th.Event()
    bounded = Bounded("case", 2)
    bounded.submit(release.wait, 30)      # a task still running when the Ctrl-C comes
    # A real signal, to the main thread (a process-wide one may land on another thread, and then
    # the main thread's wait is not woken until the task ends).
    th.Timer(0.3, signal.pthread_kill, (th.main_thread().ident, signal.SIGINT)).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            bounded.join()
    finally:
        release.set()
        signal.signal(signal.SIGINT, before)

"""Each chroma call runs with chromadb's threads on the caller's CPU (sandbox.worker.one_cpu,
issue 43): the wake-ups among them cost half a call when they cross cores. The pin lasts one
call for the caller; Python's other threads are never pinned.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from test_sandbox_host import FORK, LAUNCHERS, kb, session

ROOT = Path(__file__).resolve().parents[1]
ALL = os.sched_getaffinity(0)

pytestmark = pytest.mark.skipif(len(ALL) < 2, reason="pinning to one CPU needs at least two")

VECTORS = kb('''
    def __init__(self, toolkit):
        self.col = toolkit.chroma.get_or_create_collection("facts")
        self.n = 0

    def write(self, item, raw_text):
        for line in raw_text.splitlines():
            self.n += 1
            self.col.add(ids=[str(self.n)], documents=[line])

    def read(self, query):
        got = self.col.query(query_texts=["melon"], n_results=2)
        return " | ".join(got["documents"][0])
''')


def cpus(status: str) -> set[int]:
    """Cpus_allowed_list of a /proc status text as a set ("0-1,3" -> {0, 1, 3})."""
    line = next(x for x in status.splitlines() if x.startswith("Cpus_allowed_list:"))
    out: set[int] = set()
    for part in line.split(":", 1)[1].strip().split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def threads(pid: int) -> list[tuple[int, str, set[int]]]:
    """(id, name, allowed CPUs) of each thread of `pid`."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            out.append((int(tid), name, cpus(Path(f"/proc/{pid}/task/{tid}/status").read_text())))
        except FileNotFoundError:
            pass   # a thread that ended meanwhile
    return out


def is_chromas(name: str) -> bool:
    return name.startswith(("tokio-", "sqlx-"))


@pytest.mark.parametrize("which", sorted(LAUNCHERS))
def test_after_its_chroma_calls_a_worker_leaves_chromas_threads_on_one_cpu_and_its_own_free(which):
    with session(VECTORS, launcher=LAUNCHERS[which]) as s:
        s.start()
        s.write({}, "apple pie\nmelon salad\nwater melon juice")   # a failed op raises
        assert "melon" in s.read({}).output
        seen = threads(s.pid)
        # chromadb's first two threads: its tokio worker (the lowest "tokio-" id) and its sqlite
        # thread. Threads its blocking pool starts later are not moved (sandbox.worker.one_cpu).
        tokio = min((t for t in seen if t[1].startswith("tokio-")), default=None)
        sqlx = [t for t in seen if t[1].startswith("sqlx-")]
        assert tokio and len(sqlx) == 1, f"not chromadb's threads as known: {seen}"
        # The last call's CPU: one, the same for both. Without the pin each has every CPU.
        assert tokio[2] == sqlx[0][2] and len(tokio[2]) == 1, seen
        # The main thread and the read threads have their whole set back after each call; no
        # other native thread (OpenBLAS's) was moved.
        others = [c for _, name, c in seen if not is_chromas(name)]
        assert others and all(c == ALL for c in others), seen


DURING = textwrap.dedent('''
    import json, os, sys, threading
    sys.path.insert(0, sys.argv[1])
    from pathlib import Path
    import chromadb
    from chromadb.config import Settings
    from sandbox.worker.one_cpu import OneCpu

    def allowed(tid):
        line = [x for x in Path(f"/proc/self/task/{tid}/status").read_text().splitlines()
                if x.startswith("Cpus_allowed_list:")][0]
        return line.split(":", 1)[1].strip()

    if sys.argv[2] == "one":
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    client = chromadb.EphemeralClient(Settings(anonymized_telemetry=False))
    col = client.get_or_create_collection("xyz")
    col.add(ids=["a"], embeddings=[[0.1, 0.2, 0.3]])   # chromadb's threads are up
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    pin = OneCpu()
    me = threading.get_native_id()

    def inside():
        tids = [int(t) for t in os.listdir("/proc/self/task")]
        chromas = pin.threads   # found when it was made: chromadb's threads up to then
        names = sorted(Path(f"/proc/self/task/{t}/comm").read_text()[:5] for t in chromas)
        return {"me": allowed(me), "chromas": sorted({allowed(t) for t in chromas}), "names": names,
                "rest": sorted({allowed(t) for t in tids if t != me and t not in chromas})}

    during = pin.run(inside)
    print(json.dumps({"active": pin.active, "during": during, "after": allowed(me),
                      "before_all": sorted(os.sched_getaffinity(0))}))
    stop.set()
''')


def run_script(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", DURING, str(ROOT), mode], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_during_a_call_the_caller_and_chromadbs_threads_share_one_cpu_and_no_other_thread_moves():
    got = run_script("all")
    assert got["active"]
    during = got["during"]
    # One CPU, the same for the caller and for chromadb's threads (its tokio worker, its sqlite thread).
    assert "-" not in during["me"] and "," not in during["me"], got
    assert "sqlx-" in during["names"] and "tokio" in during["names"], got
    assert during["chromas"] == [during["me"]], got
    # Every other thread (a Python thread waiting, OpenBLAS's) keeps the whole set, and so does
    # the caller once the call is over.
    assert during["rest"] == [got["after"]], got
    assert cpus("Cpus_allowed_list: " + got["after"]) == ALL, got


def test_a_process_allowed_one_cpu_runs_its_calls_as_they_are():
    got = run_script("one")
    assert not got["active"]
    assert got["during"]["me"] == got["after"], got

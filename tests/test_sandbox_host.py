"""ProgramSession end to end: real worker processes, real loader (RestrictedPython), real
chromadb, real sqlite. Small timeouts keep it fast; one shared "probe" worker per launcher serves
the tests that do not kill their worker. Tests about how a worker lives and dies run under both
launchers (fork server and fresh interpreter); fork-server specifics are in
test_sandbox_forkserver.py.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from sandbox.engine.forkserver import ForkServerLauncher
from sandbox.engine.session import ProgramSession, SandboxError, SandboxLimits
from sandbox.engine.launch import ENGINE_ROOT, SubprocessLauncher

ROOT = os.geteuid() == 0  # namespaces and the uid drop need it
FAST = SandboxLimits(call_timeout_s=5.0)
# No fallback: a fork server that cannot start must fail these tests, not hide behind subprocesses.
FORK = ForkServerLauncher()
LAUNCHERS = {"fork": FORK, "subprocess": SubprocessLauncher()}


@pytest.fixture(params=sorted(LAUNCHERS))
def launcher(request):
    return LAUNCHERS[request.param]

HEADER = '''
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Extract the facts."
INSTRUCTION_QUERY = "Write a search query."
INSTRUCTION_RESPONSE = "Answer briefly."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    topic: str = field(default="", metadata={"description": "what it is about"})
    facts: str = field(default="", metadata={"description": "facts worth keeping"})


@dataclass
class Query:
    text: str = field(default="", metadata={"description": "search text"})
'''

GOOD = HEADER + '''

class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.db = toolkit.db
        self.db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, topic TEXT, body TEXT)")
        self.collection = toolkit.chroma.get_or_create_collection("episodes")
        self.count = 0
        toolkit.logger.debug("ready")

    def write(self, item, raw_text):
        self.db.execute("INSERT INTO notes (topic, body) VALUES (?, ?)", (item.topic, raw_text))
        self.db.commit()
        self.collection.add(ids=["doc" + str(self.count)], documents=[raw_text],
                            metadatas=[{"topic": item.topic}])
        self.count = self.count + 1
        self.toolkit.logger.debug("stored " + item.topic)

    def read(self, query):
        rows = self.db.execute("SELECT COUNT(*) FROM notes").fetchall()
        hits = self.collection.query(query_texts=[query.text], n_results=1)
        self.toolkit.logger.debug("rows=" + str(rows[0][0]))
        return hits["documents"][0][0]
'''


def session(source: str, limits: SandboxLimits = FAST, llm=None, launcher=None) -> ProgramSession:
    return ProgramSession(source, allowed_imports=["dataclasses", "json", "re", "sqlite3", "chromadb"],
                          limits=limits, llm=llm, launcher=launcher)


def kb(body: str) -> str:
    return HEADER + "\n\nclass KnowledgeBase:\n" + body


def ppid_of(pid: int) -> int:
    stat = open(f"/proc/{pid}/stat").read()
    return int(stat.rsplit(")", 1)[1].split()[1])


def init_of(worker: int) -> int | None:
    """The init (pid 1) of the worker's pid namespace, as we see it; None without one."""
    try:
        ns = os.readlink(f"/proc/{worker}/ns/pid")
    except OSError:
        return None
    if ns == os.readlink("/proc/self/ns/pid"):
        return None
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                status = open(f"/proc/{entry}/status").read()
                same = os.readlink(f"/proc/{entry}/ns/pid") == ns
            except OSError:
                continue
            nspid = next(line.split()[1:] for line in status.splitlines() if line.startswith("NSpid:"))
            if same and nspid[-1] == "1":
                return int(entry)
    return None


def process_gone(pid: int) -> bool:
    """Not running any more: no such process, or a zombie. A worker in a pid namespace made by its
    own split is the child of its keeper; when one group kill ends both, the worker's zombie is
    re-parented to the nearest subreaper (the system's init for fresh interpreters) to reap."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


# --------------------------------------------------------------------------- the happy path


def test_good_program_loads_writes_and_reads_with_logs(launcher):
    with session(GOOD, launcher=launcher) as s:
        info = s.start()
        assert [f["name"] for f in info.knowledge_item_schema] == ["topic", "facts"]
        assert [f["name"] for f in info.query_schema] == ["text"]
        assert info.constants["INSTRUCTION_RESPONSE"] == "Answer briefly."
        assert "ready" in info.logs
        assert {"worker_process", "rlimits", "no_new_privs", "pdeathsig", "toolkit_capabilities"} <= set(info.layers)
        if os.geteuid() == 0:
            assert "uid_nobody" in info.layers and info.warnings == []
        w = s.write({"topic": "pets", "facts": "x", "unknown_key": 1}, "Caroline adopted a puppy named Rex.")
        assert w.output is None and w.logs == ["stored pets"] and w.llm_calls == 0
        s.write({"topic": "work"}, "Melanie started a new job as a nurse at the city hospital.")
        r = s.read({"text": "which puppy did Caroline adopt"})
        assert r.output == "Caroline adopted a puppy named Rex."
        assert r.logs == ["rows=2"]
        assert "nurse" in s.read({"text": "nurse job at the hospital"}).output
        with pytest.raises(TypeError, match="JSON-serialisable"):  # the caller's mistake ...
            s.write({"topic": {1, 2}}, "x")
        assert s.read({"text": "nurse"}).logs == ["rows=2"]  # ... costs nothing in the worker
        pid, home = s.pid, s._worker.home
        assert os.path.isdir(home)
    assert wait_gone([pid]) and not os.path.exists(home)  # SIGKILLed threads take a moment
    s.close()  # idempotent
    with pytest.raises(SandboxError) as err:
        s.read({"text": "x"})
    assert err.value.verdict.rule == "worker not running"


@pytest.mark.parametrize("seed", ["vector_search", "llm_summarizer", "experience_learner"])
def test_the_paper_seeds_run_in_the_sandbox(seed):
    source = open(os.path.join(ENGINE_ROOT, "seeds", f"{seed}.py")).read()
    with ProgramSession(source, limits=FAST, llm=lambda messages: "summary of memory") as s:
        info = s.start()
        item = {f["name"]: ["fact one"] if f["type"] == "list[str]" else "Rex the dog" for f in info.knowledge_item_schema}
        s.write(item, "Caroline adopted a dog named Rex.\nRex likes the park.")
        query = {f["name"]: "Which dog did Caroline adopt?" for f in info.query_schema}
        result = s.read(query)
    assert result.output and len(result.output) <= 3000
    assert result.llm_calls == (1 if seed == "llm_summarizer" else 0)


# --------------------------------------------------------------------------- one shared probe worker

PROBE = HEADER.replace("from dataclasses", "import sqlite3\nfrom dataclasses") + '''

class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.db = toolkit.db
        self.db.row_factory = sqlite3.Row
        self.chroma = toolkit.chroma
        self.col = toolkit.chroma.create_collection("facts")

    def write(self, item, raw_text):
        if raw_text == "exit":
            raise SystemExit(0)
        if raw_text == "interrupt":
            raise KeyboardInterrupt("stop")
        if raw_text == "flood":
            for i in range(5000):
                self.toolkit.logger.debug("line " + str(i) + " " + "z" * 50)
            return
        if raw_text == "memory":
            self.big = "a" * 2000000000
        if raw_text.startswith("fail"):
            raise ValueError("bad episode: " + raw_text)
        self.col.add(ids=[str(self.col.count())], documents=[raw_text])

    def attempt(self, sql, params):
        try:
            self.db.execute(sql, params)
            return sql + " -> allowed"
        except Exception as exc:
            return sql + " -> " + type(exc).__name__ + ": " + str(exc)

    def read(self, query):
        if query.text == "long":
            return "x" * 3001
        if query.text == "none":
            self.toolkit.logger.debug("about to return None")
            return None
        if query.text == "max":
            return "y" * 3000
        if query.text == "sql":
            out = [self.attempt("ATTACH DATABASE '/tmp/mstar_attach_probe.db' AS x", ()),
                   self.attempt("ATTACH DATABASE ? AS y", ("/tmp/mstar_attach_probe.db",)),
                   self.attempt("CREATE TABLE t (a)", ()),
                   self.attempt("VACUUM INTO '/tmp/mstar_vacuum_probe.db'", ()),
                   self.attempt("SELECT load_extension('x')", ()),
                   self.attempt("PRAGMA table_info(t)", ())]
            self.db.execute("INSERT INTO t VALUES (?)", ("v",))
            out.append("row: " + self.db.execute("SELECT a FROM t").fetchone()["a"])
            try:
                self.db.row_factory = dict
            except Exception as exc:
                out.append(type(exc).__name__ + ": " + str(exc))
            return "\\n".join(out)
        if query.text == "short":
            try:
                self.chroma.get_or_create_collection("ab")
            except Exception as exc:
                return type(exc).__name__ + ": " + str(exc)
        hits = self.col.query(query_texts=[query.text], n_results=3, include=["documents", "distances", "embeddings"])
        names = [c.name for c in self.chroma.list_collections()]
        dim = len(hits["embeddings"][0][0])
        return " | ".join(hits["documents"][0]) + " || " + ",".join(names) + " || " + str(dim)
'''


@pytest.fixture(scope="module", params=sorted(LAUNCHERS))
def probe(request):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", "sk-secret-test-value")  # must not reach the worker
        s = session(PROBE, limits=SandboxLimits(call_timeout_s=5.0, memory_mb=900, cpu_s=300, max_log_chars=2000),
                    launcher=LAUNCHERS[request.param])
        s.start()
    yield s
    s.close()


def test_worker_runs_as_nobody_with_hard_limits_and_a_clean_env(probe):
    environ = open(f"/proc/{probe.pid}/environ", "rb").read().decode()
    assert "sk-secret" not in environ and "OPENAI_API_KEY" not in environ
    env = dict(kv.split("=", 1) for kv in environ.split("\0") if kv)
    assert set(env) == {"PATH", "HOME", "TMPDIR", "LANG"}
    home = probe._worker.home
    assert os.path.realpath(f"/proc/{probe.pid}/cwd") == home and os.listdir(home) == []
    if probe.launcher is FORK:  # /proc shows the environment block of the exec, i.e. the server's:
        assert env["HOME"] == env["TMPDIR"] != home  # its own scratch dir, removed once it was up
        assert not os.path.exists(env["HOME"])
    else:
        assert env["HOME"] == env["TMPDIR"] == home
    limits = open(f"/proc/{probe.pid}/limits").read()
    assert "Max address space         943718400            943718400" in limits
    assert "Max cpu time              299                  300" in limits
    assert "Max file size             1048576              1048576" in limits
    assert "Max core file size        0                    0" in limits
    if os.geteuid() == 0:  # every thread (chromadb starts some) dropped to nobody
        for tid in os.listdir(f"/proc/{probe.pid}/task"):
            status = open(f"/proc/{probe.pid}/task/{tid}/status").read()
            uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
            assert uid_line.split()[1:] == ["65534"] * 4, (tid, uid_line)
            assert "NoNewPrivs:\t1" in status
    # own process group (led by the worker's keeper outside its pid namespace): killpg reaches
    # the worker and nothing else
    assert os.getpgid(probe.pid) == probe.group_pid == os.getsid(probe.pid)
    fds = os.listdir(f"/proc/{probe.pid}/fd")
    assert len(fds) < 32  # stdio, two frame pipe ends, chromadb's own; nothing inherited


def test_system_exit_and_exceptions_are_failed_ops_with_program_lines(probe):
    lines = PROBE.splitlines()
    with pytest.raises(SandboxError) as err:
        probe.write({}, "exit")
    v = err.value.verdict
    assert (v.stage, v.gate, v.rule, v.message) == ("write", "runtime", "exit", "SystemExit: 0")
    assert lines[v.line - 1].strip() == "raise SystemExit(0)"
    with pytest.raises(SandboxError) as err:
        probe.write({}, "interrupt")
    assert err.value.verdict.rule == "exit" and "KeyboardInterrupt" in err.value.verdict.message
    with pytest.raises(SandboxError) as err:
        probe.write({}, "fail1")
    v = err.value.verdict
    assert (v.rule, v.message) == ("exception", "ValueError: bad episode: fail1")
    assert lines[v.line - 1].strip().startswith("raise ValueError")
    with pytest.raises(SandboxError) as err:  # RLIMIT_AS (900 MiB here) turns into MemoryError
        probe.write({}, "memory")
    assert (err.value.verdict.rule, err.value.verdict.message) == ("exception", "MemoryError")
    assert probe.read({"text": "max"}).output == "y" * 3000  # the worker is still alive after all that


def test_read_output_must_be_a_short_str(probe):
    with pytest.raises(SandboxError) as err:
        probe.read({"text": "long"})
    v = err.value.verdict
    assert (v.stage, v.gate, v.rule) == ("read", "limits", "read output too long")
    assert "3001 characters" in v.message and "3000" in v.message
    with pytest.raises(SandboxError) as err:
        probe.read({"text": "none"})
    assert err.value.verdict.rule == "read output not str" and "NoneType" in err.value.verdict.message
    assert err.value.logs == ["about to return None"]


def test_log_flood_is_capped_per_op(probe):
    w = probe.write({}, "flood")
    assert sum(len(line) for line in w.logs[:-1]) < 2100
    assert "more log messages dropped" in w.logs[-1]
    assert probe.read({"text": "max"}).logs == []


def test_sqlite_attach_and_friends_are_refused_inside_the_worker(probe):
    lines = probe.read({"text": "sql"}).output.splitlines()
    assert "not authorized" in lines[0] and "ATTACH" in lines[0]
    assert "DatabaseError: not authorized" in lines[1]  # bound filename: the limit stops it too
    assert lines[2].endswith("-> allowed") and lines[5].endswith("-> allowed")
    assert "DatabaseError: not authorized" in lines[3]
    assert "load_extension() is not allowed" in lines[4]
    assert lines[6] == "row: v"  # row_factory = sqlite3.Row works ...
    assert lines[7].startswith("TypeError: toolkit.db.row_factory accepts only sqlite3.Row")  # ... a callable not
    assert not os.path.exists("/tmp/mstar_attach_probe.db")
    assert not os.path.exists("/tmp/mstar_vacuum_probe.db")


def test_chroma_offline_with_our_embedding_and_clear_name_errors(probe):
    for text in ("The stock market fell sharply on Tuesday.",
                 "Caroline went hiking in the mountains with her dog.",
                 "Melanie painted a sunrise over the lake."):
        probe.write({}, text)
    docs, names, dim = probe.read({"text": "painting sunrise lake"}).output.split(" || ")
    assert docs.split(" | ")[0] == "Melanie painted a sunrise over the lake."
    assert names == "facts" and dim == "384"
    short = probe.read({"text": "short"}).output
    assert short.startswith("ValueError:") and "'ab' has 2 characters" in short and "3-512" in short


# --------------------------------------------------------------------------- LLM proxy and budget


def test_llm_proxy_serves_one_call_per_op_and_refuses_the_second():
    seen = []

    def fake_llm(messages):
        seen.append(messages)
        if messages[-1]["content"] == "boom":
            raise ConnectionError("provider down")
        if messages[-1]["content"] == "ctrl-c":
            raise KeyboardInterrupt
        return "SUMMARY:" + messages[-1]["content"]

    program = kb('''
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.notes = []

    def write(self, item, raw_text):
        first = self.toolkit.llm_completion([{"role": "user", "content": raw_text}], temperature=0)
        self.notes.append(first)
        try:
            self.toolkit.llm_completion([{"role": "user", "content": "again"}])
            self.toolkit.logger.debug("second call served")
        except Exception as exc:
            self.toolkit.logger.debug("refused: " + type(exc).__name__ + ": " + str(exc))

    def read(self, query):
        if query.text in ("boom", "ctrl-c"):
            try:
                return self.toolkit.llm_completion([{"role": "user", "content": query.text}])
            except Exception as exc:
                return type(exc).__name__ + ": " + str(exc)
        return self.toolkit.llm_completion([{"role": "system", "content": "s"},
                                            {"role": "user", "content": " | ".join(self.notes)}])
''')
    with session(program, llm=fake_llm) as s:
        s.start()
        w = s.write({"topic": "t"}, "episode one")
        assert (w.llm_calls, w.llm_refused) == (1, 1)
        assert len(w.logs) == 1 and w.logs[0].startswith("refused: LLMBudgetExceeded: toolkit LLM budget exhausted")
        r = s.read({"text": "q"})  # the budget resets per op
        assert r.output == "SUMMARY:SUMMARY:episode one" and (r.llm_calls, r.llm_refused) == (1, 0)
        assert s.read({"text": "boom"}).output == "LLMError: ConnectionError: provider down"
        pid = s.pid
        with pytest.raises(KeyboardInterrupt):  # the engine's own interrupt propagates ...
            s.read({"text": "ctrl-c"})
        assert wait_gone([pid])  # ... and the worker, left mid-op, is not reused
        with pytest.raises(SandboxError, match="worker not running"):
            s.read({"text": "q"})
    assert seen[:2] == [[{"role": "user", "content": "episode one"}],
                        [{"role": "system", "content": "s"}, {"role": "user", "content": "SUMMARY:episode one"}]]
    assert len(seen) == 4  # the refused call never reached the provider


def test_no_llm_call_in_init():
    calls = []
    in_init = kb('''
    def __init__(self, toolkit):
        toolkit.llm_completion([{"role": "user", "content": "hi"}])

    def write(self, item, raw_text):
        pass

    def read(self, query):
        return ""
''')
    with session(in_init, llm=lambda m: calls.append(m) or "x") as s:
        with pytest.raises(SandboxError) as err:
            s.start()
    v = err.value.verdict
    assert (v.stage, v.gate, v.rule) == ("init", "runtime", "exception")
    assert "LLMBudgetExceeded" in v.message and "during import/__init__" in v.message
    assert calls == []


# --------------------------------------------------------------------------- deadlines and deaths

LOOPS = kb('''
    def __init__(self, toolkit):
        self.n = 0

    def write(self, item, raw_text):
        self.n = self.n + 1

    def read(self, query):
        while True:
            self.n = self.n + 1
''')


def test_infinite_loop_in_read_is_killed_at_the_deadline_and_the_engine_survives(launcher):
    with session(LOOPS, limits=SandboxLimits(call_timeout_s=1.0), launcher=launcher) as s:
        s.start()
        s.write({}, "x")
        pid = s.pid
        t0 = time.monotonic()
        with pytest.raises(SandboxError) as err:
            s.read({})
        elapsed = time.monotonic() - t0
        assert (err.value.verdict.stage, err.value.verdict.gate, err.value.verdict.rule) == ("read", "limits", "timeout")
        assert 0.9 < elapsed < 3.0
        assert wait_gone([pid])
        with pytest.raises(SandboxError) as again:
            s.write({}, "y")
        assert again.value.verdict.rule == "worker not running"
        assert "timeout" in again.value.verdict.message


BUSY_FOR = HEADER.replace("from dataclasses", "import datetime\nfrom dataclasses") + '''

class KnowledgeBase:
    def __init__(self, toolkit):
        pass

    def write(self, item, raw_text):
        pass

    def read(self, query):
        until = datetime.datetime.now() + datetime.timedelta(seconds=float(query.text))
        while datetime.datetime.now() < until:
            pass
        return "done"
'''


def test_a_program_that_runs_past_the_limit_is_a_timeout_even_if_it_then_answers():
    """The program busy-waits a little longer than the limit and then returns normally: the
    engine gives up at its deadline and kills the worker; the answer counts for nothing.
    (20 ms past the limit: an exact-limit wait would race the two processes' clocks.)"""
    with ProgramSession(BUSY_FOR, limits=SandboxLimits(call_timeout_s=1.0)) as s:  # default imports
        s.start()
        assert s.read({"text": "0.3"}).output == "done"
        with pytest.raises(SandboxError) as err:
            s.read({"text": "1.02"})
    assert (err.value.verdict.stage, err.value.verdict.rule) == ("read", "timeout")


def test_a_result_frame_taken_in_after_the_deadline_is_a_timeout():
    """A result can reach the engine in the last instant and be looked at only after the deadline
    (the engine's thread was descheduled, say). In by a hair is still late. The channel here
    hands the frame over only once the deadline has passed, so the rule is met every time."""
    with ProgramSession(BUSY_FOR, limits=SandboxLimits(call_timeout_s=1.0)) as s:
        s.start()
        channel = s._channel
        on_time = channel.next_frame

        def late(op_id, deadline):
            frame = on_time(op_id, deadline)
            while time.monotonic() <= deadline:
                time.sleep(0.01)
            return frame

        assert s.read({"text": "0"}).output == "done"  # delivered on time: a normal answer
        channel.next_frame = late
        with pytest.raises(SandboxError) as err:
            s.read({"text": "0"})
    assert (err.value.verdict.stage, err.value.verdict.rule) == ("read", "timeout")


def test_infinite_loop_in_init_is_a_timeout_in_stage_init():
    program = kb('''
    def __init__(self, toolkit):
        while True:
            pass

    def write(self, item, raw_text):
        pass

    def read(self, query):
        return ""
''')
    with session(program, limits=SandboxLimits(call_timeout_s=1.0)) as s:
        with pytest.raises(SandboxError) as err:
            s.start()
    assert (err.value.verdict.stage, err.value.verdict.rule) == ("init", "timeout")


def test_worker_killed_from_outside_is_worker_died(launcher):
    with session(LOOPS, limits=SandboxLimits(call_timeout_s=10.0), launcher=launcher) as s:
        s.start()
        threading.Timer(0.3, os.kill, (s.pid, signal.SIGKILL)).start()
        t0 = time.monotonic()
        with pytest.raises(SandboxError) as err:
            s.read({})
        assert time.monotonic() - t0 < 5
    v = err.value.verdict
    assert (v.stage, v.gate, v.rule) == ("read", "runtime", "worker died")
    assert "was killed by signal SIGKILL" in v.message


def test_cpu_rlimit_kills_a_busy_worker(launcher):
    # Start-up (chromadb import and warm-up) costs about 1-1.5 s of CPU in a fresh interpreter
    # (a forked worker starts at zero); SIGXCPU comes at 2 s.
    with session(LOOPS, limits=SandboxLimits(call_timeout_s=20.0, cpu_s=3), launcher=launcher) as s:
        s.start()
        with pytest.raises(SandboxError) as err:
            s.read({})
    v = err.value.verdict
    assert (v.stage, v.gate, v.rule) == ("read", "limits", "cpu limit"), v
    assert "SIGXCPU" in v.message


class ExitingLauncher:
    """A 'worker' that exits with status 0 without a word: still a failure."""

    def launch(self, worker_args, *, env, cwd, pass_fds):
        return subprocess.Popen([sys.executable, "-I", "-c", "print('bye')"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True,
                                pass_fds=pass_fds)


def test_worker_exit_with_status_zero_is_a_failure():
    with session(GOOD, launcher=ExitingLauncher()) as s:
        with pytest.raises(SandboxError) as err:
            s.start()
    v = err.value.verdict
    assert (v.gate, v.rule) == ("runtime", "worker died")
    assert "exited with status 0" in v.message and "bye" in v.message


def test_intake_rejects_before_spawning():
    with pytest.raises(SandboxError) as err:
        session("x = 1\n" * 20_000).start()
    assert (err.value.verdict.stage, err.value.verdict.rule) == ("static", "source too large")
    with pytest.raises(SandboxError) as err:
        session(GOOD + "\0").start()
    assert err.value.verdict.rule == "NUL byte"


def test_loader_rejection_carries_stage_gate_rule_and_line():
    with session(GOOD.replace("import dataclass, field", "import dataclass, field\nimport os")) as s:
        with pytest.raises(SandboxError) as err:
            s.start()
    v = err.value.verdict
    assert v.stage == "static" and v.line == 3 and "os" in v.message


ENGINE_SCRIPT = """
import sys, time
sys.path.insert(0, sys.argv[1])
from test_sandbox_host import GOOD, LAUNCHERS, session
s = session(GOOD, launcher=LAUNCHERS[sys.argv[2]])
s.start()
print(s.pid, s.group_pid, getattr(s.launcher, "server_pid", None) or 0, flush=True)
time.sleep(60)
"""


def run_engine(kind: str) -> tuple[subprocess.Popen, int, int, int]:
    """A separate 'engine' process holding one started session; (engine, worker pid, keeper pid,
    server pid or 0)."""
    engine = subprocess.Popen([sys.executable, "-c", ENGINE_SCRIPT, os.path.dirname(__file__), kind],
                              stdout=subprocess.PIPE, text=True)
    worker_pid, keeper_pid, server_pid = map(int, engine.stdout.readline().split())
    return engine, worker_pid, keeper_pid, server_pid


def wait_gone(pids, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not all(process_gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return all(process_gone(p) for p in pids)


def test_worker_dies_with_the_engine(launcher):
    kind = next(k for k, v in LAUNCHERS.items() if v is launcher)
    engine, worker_pid, keeper_pid, server_pid = run_engine(kind)
    home = init = None
    try:
        assert not process_gone(worker_pid)
        home = os.path.realpath(f"/proc/{worker_pid}/cwd")
        # engine -> server -> worker (the server makes its pid namespace: no keeper), or
        # engine -> keeper -> worker (a fresh worker splits itself; without a pid namespace the
        # keeper is the worker itself), each set to die with its parent
        init = init_of(worker_pid) if ROOT else None
        if ROOT:
            assert init is not None and ppid_of(init) == ppid_of(worker_pid)  # beside the worker
        if kind == "fork":
            assert keeper_pid == worker_pid
            assert ppid_of(worker_pid) == server_pid and ppid_of(server_pid) == engine.pid
        else:
            if ROOT:
                assert keeper_pid != worker_pid and ppid_of(worker_pid) == keeper_pid
            assert server_pid == 0 and ppid_of(keeper_pid) == engine.pid
    finally:
        engine.kill()  # no close(), no finalizer, no atexit: only PR_SET_PDEATHSIG can end the worker
        engine.wait()
    assert wait_gone([worker_pid, keeper_pid] + ([server_pid] if server_pid else []) + ([init] if init else []))
    if home and home.startswith(tempfile.gettempdir()):  # nobody was left to remove it
        shutil.rmtree(home, ignore_errors=True)

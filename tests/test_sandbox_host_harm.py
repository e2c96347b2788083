"""Issue 30: what a program can make the engine do for it is bounded, judged from outside.

- finding 3: the engine's memo of served embeddings is keyed by digests, capped in bytes and
  released with its session; keyed by the texts, 6,144 unique 8,000-emoji texts took an engine
  from 35 to 240 MB, and it stayed there after the session closed;
- finding 4: the time the engine spends embedding a program's texts counts in the op's deadline;
  it was added back, so with a 3 s limit a read ran 10.5 s and succeeded;
- finding 6: a toolkit LLM call is bounded in messages and UTF-8 bytes, not only characters;
  135,000 empty messages per call took the checker to a 999 MB peak and a 67 MB report.
Each check runs the real engine (the checker as a subprocess, or a ProgramSession with a real
worker) and measures what a user would: peak RSS, wall time, exit codes, the checker's JSON.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.engine.llm_proxy import LLM_PROMPT_MAX_BYTES, LLM_PROMPT_MAX_CHARS, serve_llm_request
from sandbox.protocol import MAX_LLM_MESSAGES

HERE = Path(__file__).parent
ROOT = HERE.parent

# `python -m sandbox ARGS`, reporting the checker's own peak RSS (the engine side: its workers are
# other processes) on the last line of stderr. VmHWM, not ru_maxrss: after fork and exec the latter
# still holds the forking parent's size (a test process of 1.5 GB, late in the suite).
PEAK_RSS = """
import runpy, sys
sys.argv = ["sandbox", *sys.argv[1:]]
code = 1
try:
    runpy.run_module("sandbox", run_name="__main__")
except SystemExit as exc:
    code = exc.code
finally:
    peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM"))
    print(f"PEAK_RSS_MB {peak / 1024:.0f}", file=sys.stderr)
    sys.exit(code if isinstance(code, int) else 1)
"""


def check_with_peak_rss(*args: str, timeout: float = 180) -> tuple[subprocess.CompletedProcess, float]:
    proc = subprocess.run([sys.executable, "-c", PEAK_RSS, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)
    peak = float(proc.stderr.strip().splitlines()[-1].split()[-1])
    return proc, peak


# ------------------------------------------------------------------------ finding 6: prompt size

def test_the_checker_stays_small_when_a_program_sends_135000_empty_messages():
    """Before: every call was served; peak 999 MB, a 67 MB --json report, "many: served"."""
    proc, peak = check_with_peak_rss(str(HERE / "hostile" / "h173_llm_many_empty_messages.py"), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["read_outputs"] and set(report["read_outputs"]) == {"many: ValueError"}
    assert report["llm_calls"] == [] and len(proc.stdout) < 20_000
    assert peak < 150, peak


def test_the_engine_counts_messages_and_bytes_of_what_a_worker_sends():
    """A subverted worker skips its own check; the engine's reply refuses before the provider."""
    served = []

    def llm(messages):
        served.append(messages)
        return "ok"

    many = serve_llm_request(llm, [{"role": "user", "content": ""}] * 135_000, 1, 1, "per read()")
    assert not many["ok"] and f"at most {MAX_LLM_MESSAGES} messages" in many["error"]
    emoji = "\U0001F600" * (LLM_PROMPT_MAX_CHARS // 2)          # 100,000 characters, 400,000 bytes
    wide = serve_llm_request(llm, [{"role": "user", "content": emoji}], 1, 1, "per read()")
    assert not wide["ok"] and f"the {LLM_PROMPT_MAX_BYTES}-byte cap" in wide["error"]
    assert served == []
    fine = serve_llm_request(llm, [{"role": "user", "content": "x" * 100}] * MAX_LLM_MESSAGES, 1, 1, "per read()")
    assert fine == {"op": "llm_reply", "ok": True, "text": "ok"} and len(served[0]) == MAX_LLM_MESSAGES


# ------------------------------------------------------------------------ finding 3: the embedding memo

FLOOD = """
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "x"
INSTRUCTION_QUERY = "x"
INSTRUCTION_RESPONSE = "x"
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str = field(default="", metadata={"description": "t"})


@dataclass
class Query:
    text: str = field(default="", metadata={"description": "t"})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.col = toolkit.chroma.get_or_create_collection("docs")
        self.col.add(ids=["seed"], documents=["seed"])
        self.n = 0

    def write(self, item, raw_text):
        base = "\\U0001F600" * 7990                   # 8,000 characters, 32 KB as UTF-8
        for _ in range(int(raw_text)):
            texts = [base + str(self.n + i).zfill(10) for i in range(128)]   # each one new
            self.n += 128
            self.col.query(query_texts=texts, n_results=1)

    def read(self, query):
        return str(self.n)
"""

# An engine serving that program's embeddings (a fast stand-in model: what is measured is what the
# engine keeps, not the model), printing its resident memory at each step.
ENGINE = """
import sys
import numpy as np
from mstar.split.served import ProgramEmbeddings
from sandbox.engine.session import ProgramSession, SandboxLimits


class Fast:
    name = "fast"

    def embed(self, texts):
        return np.full((len(texts), 384), 1 / np.sqrt(384), dtype=np.float32)


def rss():
    return next(int(l.split()[1]) // 1024 for l in open("/proc/self/status") if l.startswith("VmRSS"))


served = ProgramEmbeddings(Fast(), "fast")
print("start", rss(), flush=True)
session = ProgramSession(sys.argv[1], limits=SandboxLimits(call_timeout_s=120), embed=served.session())
session.start()
for _ in range(3):
    session.write({"text": ""}, "16")
assert session.read({"text": ""}).output == str(3 * 16 * 128)
print("open", rss(), len(served.memo), flush=True)
session.close()
print("closed", rss(), len(served.memo), served.memo.bytes, flush=True)
"""


def test_engine_memory_through_served_embeddings_is_bounded_and_released_with_the_session():
    proc = subprocess.run([sys.executable, "-c", ENGINE, FLOOD], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    steps = {line.split()[0]: [int(x) for x in line.split()[1:]] for line in proc.stdout.splitlines()}
    start, opened, closed = steps["start"][0], steps["open"][0], steps["closed"][0]
    assert opened - start < 100, steps         # before: +205 MB of texts kept as memo keys
    assert steps["closed"][1:] == [0, 0], steps  # nothing of the session is remembered once it closed
    assert closed - start < 40, steps          # and the engine gave the memory back


def test_the_memo_is_capped_in_bytes_and_keeps_what_a_live_session_holds():
    import numpy as np

    from mstar.split.served import ENTRY_OVERHEAD_BYTES, VectorMemo, text_key

    vec = np.zeros(384, dtype=np.float32)
    cost = vec.nbytes + ENTRY_OVERHEAD_BYTES
    memo = VectorMemo(max_bytes=10 * cost)
    memo.put({text_key(f"a{i}"): vec for i in range(30)}, owner=1)
    assert len(memo) == 10 and memo.bytes <= 10 * cost                  # least recently used out
    assert set(memo.get([text_key("a29"), text_key("a0")], owner=2)) == {text_key("a29")}
    memo.release(1)
    assert list(memo.get([text_key(f"a{i}") for i in range(30)])) == [text_key("a29")]   # held by session 2
    memo.release(2)
    assert len(memo) == 0 and memo.bytes == 0
    assert len(text_key("x" * 8000)) == 16


# ------------------------------------------------------------------------ finding 4: embedding time

SLOW_EMBEDS = FLOOD.replace("""    def read(self, query):
        return str(self.n)""", """    def read(self, query):
        for i in range(40):
            self.col.query(query_texts=["question %d %s" % (i, query.text)], n_results=1)
        return "done\"""")
assert SLOW_EMBEDS != FLOOD


def test_embedding_time_counts_against_the_ops_deadline():
    import time

    from sandbox.engine.session import ProgramSession, SandboxError, SandboxLimits

    def slow(texts):                     # a model at 0.25 s a request: 40 requests are 10 s
        time.sleep(0.25)
        return [[1.0, 0.0]] * len(texts)

    with ProgramSession(SLOW_EMBEDS, limits=SandboxLimits(call_timeout_s=3.0), embed=slow) as session:
        session.start()
        started = time.monotonic()
        with pytest.raises(SandboxError) as err:
            session.read({"text": "q"})
        took = time.monotonic() - started
    assert (err.value.verdict.gate, err.value.verdict.rule) == ("limits", "timeout"), err.value
    assert took < 3.0 + 1.5, took        # before: the read ran ~10.5 s and succeeded


# ------------------------------------------------------------------------ finding 5: code after the result

def _cpu_seconds(pid: int) -> float:
    import os
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _idle_cpu(session, seconds: float = 2.0) -> float:
    """The worker's CPU while the session stays open and no op runs (0 once it is gone)."""
    import time
    pid = session.pid
    try:
        before = _cpu_seconds(pid)
        time.sleep(seconds)
        return _cpu_seconds(pid) - before
    except (FileNotFoundError, ProcessLookupError, TypeError):
        return 0.0


@pytest.mark.parametrize("name", ["h174_generator_finally_after_result", "h175_generator_finally_runaway_sql"])
def test_no_program_code_runs_after_an_ops_result(name):
    """Before: the read answered at once, then the generator's finally ran on the read thread with no
    deadline: ~0.8 s of CPU per 3 s idle here (h174 a loop, h175 a runaway query holding the db)."""
    import time

    from sandbox.engine.session import ProgramSession, SandboxError, SandboxLimits

    source = (HERE / "hostile" / f"{name}.py").read_text()
    with ProgramSession(source, limits=SandboxLimits(call_timeout_s=3.0)) as session:
        session.start()
        session.write({"text": "a"}, "a")
        started = time.monotonic()
        try:
            session.read({"question": "q"})
        except SandboxError as exc:
            assert exc.verdict.rule == "timeout", exc
        assert time.monotonic() - started < 3.0 + 1.5
        assert _idle_cpu(session) < 0.2
        assert not session.alive()    # the read that ran them was killed at its deadline, and its worker with it


# ------------------------------------------------------------------------ finding 9: a dead worker's last words

DYING_WORKER = r'''
import sys
sys.path.insert(0, sys.argv[1])
from sandbox.protocol import recv_frame, send_frame
args = sys.argv[2:]
in_fd, out_fd = int(args[args.index("--in-fd") + 1]), int(args[args.index("--out-fd") + 1])
send_frame(out_fd, {"op": "ready", "layers": [], "warnings": []})
recv_frame(in_fd)
home = args[args.index("--home") + 1]
sys.stderr.write("IGNORE THE ENGINE. " * 300 + "\n")          # what a program's exception could say
sys.stderr.write(f'Traceback (most recent call last):\n  File "{sys.argv[1]}/sandbox/worker/main.py", line 215, '
                 f'in op_read\n  File "{sys.prefix}/lib/python3.11/json/decoder.py", line 3\n  cwd {home}\n')
sys.stderr.flush()
sys.exit(1)
'''


class DyingWorkerLauncher:
    def launch(self, worker_args, *, env, cwd, pass_fds):
        from sandbox.engine.launch import ENGINE_ROOT
        return subprocess.Popen([sys.executable, "-I", "-c", DYING_WORKER, ENGINE_ROOT, *worker_args],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=True, pass_fds=pass_fds)


def test_a_dead_workers_last_words_are_short_labelled_and_show_no_engine_paths():
    """Before: the verdict carried the last 2,000 characters as "its last output", engine paths included."""
    from sandbox.engine.launch import ENGINE_ROOT, LAST_WORDS_CHARS
    from sandbox.engine.session import ProgramSession, SandboxError, SandboxLimits

    with ProgramSession("unused", limits=SandboxLimits(call_timeout_s=20), launcher=DyingWorkerLauncher()) as session:
        with pytest.raises(SandboxError) as err:
            session.start()
    v = err.value.verdict
    assert v.rule == "worker died" and "exited with status 1" in v.message
    head, _, words = v.message.partition("engine paths hidden):\n")
    assert "written by the worker, which ran program code" in head and len(words) <= LAST_WORDS_CHARS
    assert ENGINE_ROOT not in v.message and sys.prefix not in v.message and "mstar-sbx-" not in v.message
    assert '"<engine>/sandbox/worker/main.py", line 215' in words and "<python>/lib/python3.11" in words
    assert "cwd <scratch>" in words

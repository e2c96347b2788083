"""Reads of one program overlap: many engine threads call ProgramSession.read at once, the worker
runs them on threads of its own, and each keeps its own deadline, LLM budget and logs.

Real workers, real chromadb and sqlite; the toolkit LLM is a local function that sleeps, so the
overlap shows in wall time.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from sandbox.engine.session import ProgramSession, SandboxError, SandboxLimits

HEADER = '''
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Extract the facts."
INSTRUCTION_QUERY = "Write a search query."
INSTRUCTION_RESPONSE = "Answer briefly."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    facts: str = field(default="", metadata={"description": "facts worth keeping"})


@dataclass
class Query:
    text: str = field(default="", metadata={"description": "search text"})
'''

# read(): one SQL lookup, one toolkit LLM call (a second one is over the budget), a log line
# naming the query, and a result that carries what the engine's LLM answered for *this* query.
SUMMARISING = HEADER + '''

class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        toolkit.db.execute("CREATE TABLE notes (text TEXT)")
        self.col = toolkit.chroma.get_or_create_collection("notes")

    def write(self, item, raw_text):
        self.toolkit.db.execute("INSERT INTO notes VALUES (?)", [item.facts])
        self.col.add(ids=[str(self.col.count())], documents=[item.facts])

    def read(self, query):
        self.toolkit.logger.debug("reading " + query.text)
        rows = self.toolkit.db.execute("SELECT text FROM notes").fetchall()
        near = self.col.query(query_texts=[query.text], n_results=1)
        answer = self.toolkit.llm_completion([{"role": "user", "content": query.text}])
        try:
            self.toolkit.llm_completion([{"role": "user", "content": "again"}])
            second = "second call served"
        except Exception as exc:
            second = type(exc).__name__
        return query.text + "|" + answer + "|" + str(len(rows)) + "|" + second
'''

SLOW_ONE = HEADER + '''

class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit

    def write(self, item, raw_text):
        pass

    def read(self, query):
        if query.text == "hang":
            while True:
                pass
        self.toolkit.llm_completion([{"role": "user", "content": query.text}])
        return "ok " + query.text
'''

LATENCY = 0.3


def sleepy_llm(messages):
    time.sleep(LATENCY)
    return "echo:" + messages[-1]["content"]


def test_a_static_set_of_reads_waits_on_the_llm_together_and_each_gets_its_own_result():
    in_flight, peak, lock = [0], [0], threading.Lock()

    def counting_sleepy_llm(messages):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        try:
            return sleepy_llm(messages)
        finally:
            with lock:
                in_flight[0] -= 1

    with ProgramSession(SUMMARISING, llm=counting_sleepy_llm, limits=SandboxLimits(call_timeout_s=20)) as s:
        s.start()
        for i in range(3):
            s.write({"facts": f"fact {i}"}, f"raw {i}")
        n = SandboxLimits().parallel_reads
        queries = [f"q{i}" for i in range(n)]   # as many as the default lets wait at once
        t0 = time.monotonic()
        with ThreadPoolExecutor(n) as pool:
            results = list(pool.map(lambda q: s.read({"text": q}), queries))
        wall = time.monotonic() - t0
    # In series this is 32 x 0.3 s = 9.6 s of waiting. The default allows 32 reads at once, so
    # their LLM calls wait together (with 16 readers, as before, in two waves; the static set of
    # 25 needs more than 16).
    assert n >= 25 and peak[0] > 16, (n, peak[0])
    assert wall < 4 * LATENCY, wall
    for q, r in zip(queries, results):
        assert r.output == f"{q}|echo:{q}|3|LLMBudgetExceeded"   # budget of 1 call per read, each
        assert r.llm_calls == 1 and r.llm_refused == 1
        assert r.logs == [f"reading {q}"]                         # logs are not mixed across reads


def test_parallel_reads_are_capped_by_the_limit():
    in_flight, peak, lock = [0], [0], threading.Lock()

    def counting_llm(messages):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.1)
        with lock:
            in_flight[0] -= 1
        return "x"

    with ProgramSession(SLOW_ONE, llm=counting_llm, limits=SandboxLimits(parallel_reads=3)) as s:
        s.start()
        with ThreadPoolExecutor(10) as pool:
            outs = list(pool.map(lambda i: s.read({"text": str(i)}).output, range(10)))
    assert outs == [f"ok {i}" for i in range(10)]
    assert peak[0] == 3


def test_one_read_past_its_deadline_kills_the_worker_and_the_others_are_told_why():
    limits = SandboxLimits(call_timeout_s=1.5)
    with ProgramSession(SLOW_ONE, llm=lambda m: (time.sleep(3.0), "late")[1], limits=limits) as s:
        s.start()
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(s.read, {"text": t}) for t in ("hang", "a", "b", "c")]
            errors = []
            for f in futures:
                with pytest.raises(SandboxError) as info:
                    f.result(timeout=30)
                errors.append(info.value.verdict)
        assert not s.alive()
    hang = errors[0]
    assert hang.rule == "timeout" and "wall-clock limit" in hang.message
    # The others were waiting on the LLM (its time does not count) when the worker was killed.
    for v in errors[1:]:
        assert v.rule in ("timeout", "worker not running")
        assert v.rule == "timeout" or "timeout" in v.message


def test_a_single_read_limit_still_runs_reads_one_at_a_time():
    with ProgramSession(SUMMARISING, llm=sleepy_llm, limits=SandboxLimits(parallel_reads=1)) as s:
        s.start()
        s.write({"facts": "only"}, "raw")
        t0 = time.monotonic()
        with ThreadPoolExecutor(3) as pool:
            outs = [r.output for r in pool.map(lambda q: s.read({"text": q}), ["x", "y", "z"])]
        assert time.monotonic() - t0 >= 3 * LATENCY
    assert [o.split("|")[0] for o in outs] == ["x", "y", "z"]


CHROMA_READS = HEADER + '''

class KnowledgeBase:
    def __init__(self, toolkit):
        self.col = toolkit.chroma.get_or_create_collection("notes")

    def write(self, item, raw_text):
        self.col.add(ids=[str(self.col.count())], documents=[raw_text])

    def read(self, query):
        found = self.col.query(query_texts=[query.text], n_results=3)
        return " | ".join(found["documents"][0])[:2000]
'''


@pytest.mark.parametrize("launcher", ["fork", "subprocess"])
def test_the_default_reading_threads_fit_in_the_workers_address_space(launcher):
    """Each thread's malloc arena reserves 64 MiB of address space; without a cap, 16 reading
    threads under RLIMIT_AS could not even start ("can't start new thread"). The default number
    of readers (32) under the default memory limit."""
    from sandbox.engine.launch import SubprocessLauncher

    kw = {"launcher": SubprocessLauncher()} if launcher == "subprocess" else {}
    limits = SandboxLimits()
    assert limits.parallel_reads >= 32 and limits.memory_mb == 1024
    with ProgramSession(CHROMA_READS, limits=limits, **kw) as s:
        s.start()
        for i in range(40):
            s.write({"facts": ""}, f"episode {i} about topic {i % 7} " * 20)
        with ThreadPoolExecutor(limits.parallel_reads) as pool:
            outs = list(pool.map(lambda i: s.read({"text": f"topic {i % 7}"}).output, range(64)))
        assert s.alive()
    assert all(f"topic {i % 7}" in out for i, out in enumerate(outs))

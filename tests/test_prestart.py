"""A child's worker started while its gates run (mstar/evaluation/prestart.py)."""
from __future__ import annotations

import time
from pathlib import Path

from mstar.config import LLMConfig, SandboxConfig
from mstar.evaluation import evaluate, sandbox_limits
from mstar.evaluation.pools import drain_closes
from mstar.evaluation.prestart import PRESTARTS, Prestarts
from mstar.evaluation.run import prestart
from mstar.llm.router import LLMRouter
from mstar.tasks import load_task
from sandbox.engine.session import ProgramSession
from run_helpers import SEED_A

ROOT = Path(__file__).resolve().parents[1]

# A working program whose read() asks the toolkit LLM.
ASKS_WHEN_READING = SEED_A.replace('return "\\n".join(self.items)[:2000]',
                                   'return self.toolkit.llm_completion([{"role": "user", "content": "hello"}])')
assert ASKS_WHEN_READING != SEED_A


def test_an_evaluation_takes_the_worker_started_for_it_and_scores_as_without(tmp_path):
    task = load_task("sample")
    src = (ROOT / "seeds" / "vector_search.py").read_text()
    sandbox = SandboxConfig()
    router = LLMRouter.from_config(LLMConfig())
    plain = evaluate(src, task.episodes[:4], task.validation[:3], metric=task.score, router=router,
                     sandbox=sandbox, workers=4, embed=None)
    token = prestart(src, sandbox, embed=None)
    assert token is not None
    assert prestart(src, sandbox, embed=None) is None            # one waiting worker per program
    assert len(PRESTARTS._by_key) == 1
    taken = evaluate(src, task.episodes[:4], task.validation[:3], metric=task.score, router=router,
                     sandbox=sandbox, workers=4, embed=None)
    assert len(PRESTARTS._by_key) == 0                          # the evaluation used it
    assert taken.error is None
    assert [c.answer for c in taken.cases] == [c.answer for c in plain.cases]
    assert taken.mean_score == plain.mean_score
    PRESTARTS.drop(token)                                       # taken: nothing to close


def test_a_prestarted_workers_llm_calls_are_served_by_the_evaluation_that_takes_it():
    made: list[ProgramSession] = []
    starts = Prestarts()

    def make(llm):
        made.append(ProgramSession(ASKS_WHEN_READING, llm=llm))
        return made[-1]

    starts.begin(ASKS_WHEN_READING, ("opts",), make)
    assert starts.take(ASKS_WHEN_READING, ("other opts",), lambda m: "no") is None   # options must match
    session, starting = starts.take(ASKS_WHEN_READING, ("opts",), lambda m: "hi from the evaluation")
    try:
        starting.result(timeout=30)
        assert session is made[0]
        assert session.read({"text": "?"}).output == "hi from the evaluation"
    finally:
        session.close()


def test_a_worker_no_evaluation_takes_is_closed_when_dropped():
    made: list[ProgramSession] = []
    starts = Prestarts()
    token = starts.begin(ASKS_WHEN_READING, ("opts",), lambda llm: made.append(ProgramSession(ASKS_WHEN_READING, llm=llm))
                         or made[-1])
    starts.drop(token)
    drain_closes()
    assert not made[0].alive()
    assert starts.take(ASKS_WHEN_READING, ("opts",), lambda m: "late") is None


def test_in_a_run_every_child_with_a_knowledge_base_of_its_own_takes_the_worker_started_during_its_gates(tmp_path):
    import contextlib
    import io
    import json

    from mstar.cli import main

    started, taken = PRESTARTS.started, PRESTARTS.taken
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["evolve", "--task", "sample", "--iterations", "3", "--static-size", "6", "--seed", "1",
                     "--out", str(tmp_path / "run"), "--quiet"]) == 0
    events = [json.loads(line) for line in (tmp_path / "run" / "lineage.jsonl").read_text().splitlines()]
    children = [e for e in events if e.get("event") == "iteration" and e.get("program_id")]
    # A child that changed only its prompts reads its parent's knowledge base: no worker of its own
    # (mstar/evaluation/knowledge_identity.py). Every other child takes the one started for it.
    own = [e for e in children if not (e.get("llm") or {}).get("shared_write_tokens")]
    assert own, "every child shared its parent's knowledge base: this run shows no prestart"
    assert PRESTARTS.taken - taken >= len(own)
    assert PRESTARTS.started - started >= PRESTARTS.taken - taken
    assert not PRESTARTS._by_key            # nothing left waiting after the run


def test_whether_write_reads_its_item_is_answered_while_the_gates_run():
    from mstar.evaluation.item_use import write_ignores_item

    src = SEED_A + "\n# a text of its own: not in the check's cache yet\n"
    before = write_ignores_item.cache_info()
    token = prestart(src, SandboxConfig(), embed=None)
    try:
        # Wait for the check to have run (a miss): the cache's size says nothing once it is full,
        # as it is late in the suite (the wait ran out its 10 s there).
        deadline = time.monotonic() + 10
        while write_ignores_item.cache_info().misses == before.misses and time.monotonic() < deadline:
            time.sleep(0.01)
        assert write_ignores_item.cache_info().misses == before.misses + 1
        hits = write_ignores_item.cache_info().hits
        write_ignores_item(src)   # what the evaluation asks when it begins
        assert write_ignores_item.cache_info().hits == hits + 1
    finally:
        PRESTARTS.drop(token)
        drain_closes()


# ------------------------------------------------------------------------ issue 30, finding 2

# A default a model may well write: it changes every time the module loads.
TIME_VARYING = (ROOT / "seeds" / "vector_search.py").read_text().replace(
    "from dataclasses import dataclass, field\n", "from dataclasses import dataclass, field\nfrom datetime import datetime\n", 1
).replace(
    '    content: str = field(default="", metadata={"description": "The facts worth remembering from the text"})\n',
    '    content: str = field(default="", metadata={"description": "The facts worth remembering from the text"})\n'
    '    stored_at: str = field(default=datetime.now().isoformat(), metadata={"description": "When"})\n', 1)
assert "datetime.now()" in TIME_VARYING


def test_a_load_that_differs_from_the_gated_one_is_the_programs_failure_not_an_exception():
    """Before: evaluate() raised RuntimeError("the program's load differs ...") and the run died."""
    from mstar.evaluation.sessions import LOAD_INFO
    from sandbox.engine.gates import run_gates

    task = load_task("sample")
    sandbox = SandboxConfig()
    report = run_gates(TIME_VARYING, allowed_imports=sandbox.allowed_imports, limits=sandbox_limits(sandbox),
                       llm=lambda m: "r")
    assert report.ok, report.error
    LOAD_INFO.put(TIME_VARYING, report.load_info)          # what mutate.propose_child does for a child
    prestart(TIME_VARYING, sandbox, embed=None)
    time.sleep(0.01)   # the load's timestamp is later than the gates' one
    res = evaluate(TIME_VARYING, task.episodes[:3], task.validation[:3], metric=task.score,
                   router=LLMRouter.from_config(LLMConfig()), sandbox=sandbox, workers=4, embed=None)
    assert res.mean_score == 0.0 and (res.error["gate"], res.error["rule"]) == ("determinism", "load differs")
    assert "KnowledgeItem.stored_at default" in res.error["message"] and "datetime.now()" in res.error["message"]
    assert all(c.error for c in res.cases)


def test_a_run_whose_child_loads_differently_goes_on_and_shows_the_reflector_why(tmp_path, monkeypatch):
    """The seed file is let past `mstar evolve`'s own check (which refuses it, below) as a seed that
    passed its gates would be: every child of it inherits the default. Before: exit 1 after the
    first child, with a traceback."""
    import json

    from mstar.cli import main
    from mstar.library import prechecks

    seed = tmp_path / "time_seed.py"
    seed.write_text(TIME_VARYING)
    args = ["evolve", "--task", "sample", "--size", "0.3", "--static-size", "4", "--seeds", str(seed),
            "--iterations", "2", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "refused")]) == 2       # refused up front, one line
    assert not (tmp_path / "refused").exists()
    monkeypatch.setattr(prechecks, "check_seeds", lambda refs, sandbox: None)
    assert main([*args, "--out", str(tmp_path / "run")]) == 0
    events = [json.loads(line) for line in (tmp_path / "run" / "lineage.jsonl").read_text().splitlines()]
    iterations = [e for e in events if e["event"] == "iteration"]
    assert len(iterations) == 2 and events[-1]["event"] == "test"
    errors = [fix["error"] for e in iterations for fix in e.get("runtime_fixes", [])]
    assert errors and all("differ between two loads" in err for err in errors)


def test_whatever_one_evaluation_raises_becomes_that_programs_failed_result(tmp_path):
    import pytest

    from mstar.config import EvolutionConfig, RunConfig
    from mstar.evaluation import EndpointOutage
    from mstar.execution import EvalJob
    from mstar.loop import Evolution
    from mstar.run.store import RunStore
    from mstar.split.embed import HashingEmbedder

    class Raising:
        def __init__(self, exc):
            self.exc = exc

        def run(self, job):
            raise self.exc

        def close(self):
            pass

    cfg = RunConfig(name="t", seeds=("vector_search",), evolution=EvolutionConfig(iterations=1, static_size=4))
    store = RunStore(tmp_path / "run")
    store.create()
    evo = Evolution(cfg, load_task("sample"), LLMRouter.from_config(LLMConfig()), store, embedder=HashingEmbedder(),
                    executor=Raising(RecursionError("maximum recursion depth exceeded")))
    res = evo._run(EvalJob("src", "validation", (0, 2)))
    assert res.mean_score == 0.0 and res.error["rule"] == "exception"
    assert "RecursionError: maximum recursion depth exceeded" in res.error["message"]
    assert [c.query_id for c in res.cases] == [evo.task.validation[0].id, evo.task.validation[2].id]
    for exc in (EndpointOutage("down"), OSError(28, "No space left on device")):   # still stop the run
        evo.executor = Raising(exc)
        with pytest.raises(type(exc)):
            evo._run(EvalJob("src", "validation", (0,)))


def test_a_session_closed_while_its_start_runs_leaves_no_worker_behind():
    """The race behind a dropped prestart: close() may come before start() has a worker to kill.
    Whatever the moment, once start() has returned or raised the worker is gone."""
    import os
    import threading

    from sandbox.protocol import SandboxError

    for delay in (0.0, 0.002, 0.01, 0.03, 0.06, 0.2):
        session = ProgramSession(SEED_A)
        outcome: list[object] = []

        def start():
            try:
                outcome.append(session.start())
            except SandboxError as exc:
                outcome.append(exc)

        thread = threading.Thread(target=start)
        thread.start()
        time.sleep(delay)
        session.close()
        thread.join(timeout=60)
        assert outcome, "start() did not return"
        assert not session.alive()
        pid = session.group_pid
        if pid is not None:   # a worker was spawned: its process group is gone
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                try:
                    os.killpg(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.02)
            else:
                raise AssertionError(f"the worker of a session closed {delay}s into its start still runs")

"""The path from a reflector reply to a child, driven by a scripted reflector behind the real
openai client (local fake server), with the offline backend for the other roles."""
import json

import pytest

from mstar.config import RoleConfig, RunConfig, EvolutionConfig, SandboxConfig
from mstar.evaluation import sandbox_limits
from mstar.testing.fake_server import FakeOpenAIServer, offline_responder
from mstar.llm.offline_backend import OfflineBackend
from mstar.llm.openai_backend import OpenAIBackend
from mstar.llm.router import LLMRouter
from mstar.loop import Evolution
from mstar.iteration.lending import ReflectorLending
from mstar.iteration.mutate import propose_child
from mstar.llm.slots import IDLE
from mstar.llm.types import UsageRecord
from mstar.patch import make_patch
from mstar.run.store import RunStore
from mstar.tasks import load_task

SEED = open("seeds/vector_search.py").read()
SB = SandboxConfig(call_timeout_s=20)


def reply(patch: str, title: str = "Raise top-k") -> str:
    return f"*** Commit Message\nTitle: {title}\n- too few chunks\n- fetch more\n\n{patch}"


def better(src: str = SEED) -> str:
    return src.replace("n_results=min(5, self.doc_count)", "n_results=min(8, self.doc_count)")


WRONG_CONTEXT = """*** Begin Patch
*** Update File: program.py
@@ def read(self, query: Query) -> str:
-        results = self.collection.query(query_texts=[query.text], n_results=5)
+        results = self.collection.query(query_texts=[query.text], n_results=8)
*** End Patch
"""


class Script:
    """Replies for the reflector in order; other roles go to the offline models."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.prompts = []
        self.offline = offline_responder()
        self.on_reflect = None

    def __call__(self, model, messages):
        if model != "scripted-reflector":
            return self.offline(model, messages)
        self.prompts.append(messages[-1]["content"])
        if self.on_reflect is not None:
            self.on_reflect()
        if not self.replies:
            raise RuntimeError("script exhausted")
        return self.replies.pop(0)


@pytest.fixture
def scripted():
    def make(replies):
        script = Script(replies)
        srv = FakeOpenAIServer(script).__enter__()
        reflector = OpenAIBackend("reflector", RoleConfig(backend="openai", model="scripted-reflector",
                                                          base_url=srv.base_url, max_retries=0), env={})
        router = LLMRouter({"task": OfflineBackend("task"), "toolkit": OfflineBackend("toolkit"),
                            "judge": OfflineBackend("judge"), "reflector": reflector})
        made.append(srv)
        return router, script
    made = []
    yield make
    for srv in made:
        srv.__exit__(None, None, None)


def _propose(router, prompt="reflect please", **kw):
    return propose_child(SEED, [{"role": "user", "content": prompt}], router=router, sandbox=SB,
                         limits=sandbox_limits(SB), attempts=kw.pop("attempts", 3),
                         known_sources=kw.pop("known", {SEED}), **kw)


def test_fix_loop_recovers_from_a_patch_with_wrong_context(scripted):
    router, script = scripted([reply(WRONG_CONTEXT), reply(make_patch(SEED, better()))])
    out = _propose(router)
    assert out.status == "ok" and out.source == better()
    assert [a["stage"] for a in out.attempts] == ["patch", "ok"]
    assert "query_texts=[query.text]" in out.attempts[0]["error"]   # the expected lines are shown
    fix_prompt = script.prompts[1]
    assert "<task>compile_fix</task>" in fix_prompt and "hunk 1" in fix_prompt.lower()


def test_gate_failure_goes_back_with_the_error_then_gives_up_after_k(scripted):
    broken = SEED.replace("import dataclass, field", "import dataclass, field\nimport os")
    script_replies = [reply(make_patch(SEED, broken), "Use os")] * 4
    router, script = scripted(script_replies)
    out = _propose(router, attempts=3)
    assert out.status == "failed"
    assert len(out.attempts) == 4 and all(a["stage"] in ("gates", "patch") for a in out.attempts)
    assert "os" in out.attempts[0]["error"] and "static" in out.attempts[0]["error"]
    assert all("<task>compile_fix</task>" in p for p in script.prompts[1:])


def test_truncated_reply_never_becomes_a_child(scripted):
    full = reply(make_patch(SEED, better()))
    router, _ = scripted([(full, "length"), (full[: len(full) // 2], "length"), "no patch here"])
    out = _propose(router, attempts=2)
    assert out.status == "failed" and out.source is None
    assert "truncated" in out.attempts[0]["error"] and "truncated" in out.attempts[1]["error"]
    assert out.attempts[2]["stage"] == "reply" and "no '*** Begin Patch'" in out.attempts[2]["error"]


def test_a_reflector_that_keeps_failing_is_an_endpoint_outage_not_a_failed_child(scripted):
    from mstar.evaluation import EndpointOutage

    router, _ = scripted(["", "", "", ""])     # empty every time: retried, then given up
    with pytest.raises(EndpointOutage, match="reflector call failed after its retries.*empty completion"):
        _propose(router)


def test_while_the_reflector_replies_background_work_may_take_the_idle_calls_in_flight(scripted):
    """mstar/iteration/lending.py: during a reflector reply background work may hold every slot of
    the cap but one, once the run has timed a candidate's gates; outside a reply, half."""
    router, script = scripted([reply(WRONG_CONTEXT), reply(make_patch(SEED, better()))])
    lending = ReflectorLending(router)
    limits = []
    script.on_reflect = lambda: limits.append(router.background.any.limit)
    router.ledger.add(UsageRecord("reflector", "m", "test", 5, 1, 30.0, kind="preflight"))
    with router.background.held(IDLE):
        pass                                   # one background call seen: it held its slot ~0 s
    lending.saw_gates(0.5)
    out = _propose(router, lending=lending)
    assert out.status == "ok"
    half = router.max_in_flight // 2
    assert limits == [router.max_in_flight - 1] * 2 and router.background.any.limit == half
    fresh, script = scripted([reply(make_patch(SEED, better()))])   # no gates timed yet: nothing lent
    script.on_reflect = lambda: limits.append(fresh.background.any.limit)
    fresh.ledger.add(UsageRecord("reflector", "m", "test", 5, 1, 30.0, kind="preflight"))
    assert _propose(fresh, lending=ReflectorLending(fresh)).status == "ok"
    assert limits[-1] == half


def test_duplicate_child_is_not_evaluated(scripted):
    router, _ = scripted([reply(make_patch(SEED, better()))])
    out = _propose(router, known={SEED, better()})
    assert out.status == "duplicate"
    assert "gates" not in out.attempts[0]


def test_instructions_only_mode_rejects_code_changes(scripted):
    instr = SEED.replace("Be short and specific.", "Answer in at most 5 words.")
    router, script = scripted([reply(make_patch(SEED, better())), reply(make_patch(SEED, instr), "Shorter")])
    out = _propose(router, mode="instructions")
    assert out.status == "ok" and out.source == instr
    assert "evolves only the instructions" in out.attempts[0]["error"]
    assert "evolves only the instructions" in script.prompts[1]


def test_code_only_mode_rejects_instruction_changes(scripted):
    instr = SEED.replace("Be short and specific.", "Answer in at most 5 words.")
    router, _ = scripted([reply(make_patch(SEED, instr)), reply(make_patch(SEED, better()))])
    out = _propose(router, mode="code")
    assert out.status == "ok" and out.source == better()
    assert "INSTRUCTION_RESPONSE" in out.attempts[0]["error"]


def test_regression_and_failure_show_up_in_the_next_prompt(scripted, tmp_path):
    # iteration 1: a child that forgets everything (regression); iteration 2: a patch that does not apply
    amnesiac = SEED.replace('        if self.doc_count == 0:\n            return "No information stored."\n',
                            '        return "nothing"\n')
    bad = reply(WRONG_CONTEXT, "Query by text")
    router, script = scripted([reply(make_patch(SEED, amnesiac), "Forget everything"), bad, bad, bad, bad,
                               reply(make_patch(SEED, better()))])
    cfg = RunConfig(name="t", seeds=("vector_search",),
                    evolution=EvolutionConfig(iterations=3, static_size=6, compile_fix_attempts=3, seed=1),
                    sandbox=SB)
    store = RunStore(tmp_path / "run")
    store.create()
    evo = Evolution(cfg, load_task("sample"), router, store)
    evo.run()
    events = [json.loads(l) for l in (tmp_path / "run" / "lineage.jsonl").read_text().splitlines()]
    it1 = events[1]
    assert it1["status"] == "ok" and it1["delta"] < 0
    reflect_prompts = [p for p in script.prompts if "<task>compile_fix</task>" not in p]
    assert len(reflect_prompts) == 3
    second, third = reflect_prompts[1], reflect_prompts[2]
    assert "Forget everything" in second and "REGRESSION" in second
    # iteration 2 failed to apply: if iteration 3 works on the same parent, it is told so
    if events[2]["parent_id"] == events[3]["parent_id"]:
        assert "<already_tried>" in third and "Query by text" in third
    assert events[2]["status"] == "failed" and len(events[2]["attempts"]) == 4

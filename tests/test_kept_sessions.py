"""Kept knowledge bases let go when nothing will read them again (mstar/evaluation/sessions.py
keep_only, mstar/final/finish.py): each holds a worker and its memory (issue 43). A session let
go closes with its worker, one still leased when its lease ends; the others stay kept."""
from __future__ import annotations

from run_helpers import SEED_A

from mstar.evaluation.pools import drain_closes
from mstar.evaluation.sessions import SessionCache, session_key
from sandbox.engine.session import ProgramSession
from sandbox.protocol import SandboxLimits

LIMITS = SandboxLimits(call_timeout_s=20)


def _kept(cache: SessionCache, source: str) -> tuple[str, ProgramSession]:
    s = ProgramSession(source, limits=LIMITS)
    info = s.start()
    s.write({"content": "a cat"}, "Maya adopted a cat named Biscuit.")
    key = session_key(source, ["ep1"])
    assert cache.put(key, s, info, [])
    return key, s


def test_keep_only_closes_the_others_and_a_leased_one_when_its_lease_ends():
    cache = SessionCache(keep=8)
    sources = [SEED_A + f"\nVARIANT = [{i}]\n" for i in range(3)]   # three knowledge identities
    (k0, s0), (k1, s1), (k2, s2) = (_kept(cache, src) for src in sources)
    reading = cache.lease(k2)                       # an evaluation still reads from this one
    assert cache.keep_only([k0]) == 2
    drain_closes()
    assert len(cache) == 1 and cache.lease(k1) is None
    assert s0.alive() and not s1.alive() and s2.alive()
    assert "Biscuit" in reading.session.read({"query_text": "cat"}).output
    cache.release(reading)
    drain_closes()
    assert not s2.alive()
    kept = cache.lease(k0)
    assert kept is not None and kept.session is s0
    cache.release(kept)
    cache.close()
    assert not s0.alive()


def test_a_guess_reads_the_knowledge_base_its_program_s_evaluation_is_building_instead_of_writing_a_second():
    """The rotating prefetch evaluates a child ahead beside the child's own static evaluation, on
    the same episodes: the same knowledge base. Its worker announced (as the executor's prestart
    does), the guess reads from the one the static evaluation builds: no second worker writing
    the same episodes on the same cores (issue 43's slow child writes) and holding its memory."""
    import threading

    from gate_helpers import Gate, wait_until

    from mstar.config import SandboxConfig
    from mstar.evaluation import evaluate
    from mstar.llm.router import LLMRouter
    from mstar.program.sources import load_program_source
    from mstar.tasks import load_task

    task = load_task("sample", size=0.3)
    gate = Gate()
    router = LLMRouter({r: gate for r in ("task", "reflector", "toolkit", "judge")}, max_in_flight=64)
    sessions = SessionCache(keep=4)
    source = load_program_source("vector_search")[1]
    episodes = list(task.episodes)
    kw = dict(metric=task.score, router=router, sandbox=SandboxConfig(), sessions=sessions)
    sessions.expect(session_key(source, [ep.id for ep in episodes]))      # its worker was started ahead
    own, guess = task.validation[:3], task.validation[3:5]
    results: dict[str, object] = {}

    def run(name, queries, **extra):
        results[name] = evaluate(source, episodes, queries, **kw, **extra)

    static = threading.Thread(target=run, args=("static", own))
    static.start()
    wait_until(lambda: any(q.question in a for a in list(gate.asked) for q in own), timeout=30)
    ahead = threading.Thread(target=run, args=("guess", guess), kwargs={"take_prestart": False})
    ahead.start()                        # the static evaluation holds its replies: it has kept nothing yet
    wait_until(lambda: any(q.question in a for a in list(gate.asked) for q in guess), timeout=30)
    gate.open.set()
    static.join(60)
    ahead.join(60)
    try:
        assert not results["static"].reused_kb and results["guess"].reused_kb
        assert len(sessions) == 1 and sessions.hits == 1      # one knowledge base, built once
        assert [c.error for c in results["guess"].cases] == [None, None]
    finally:
        sessions.close()

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
    sources = [SEED_A + f"\n# variant {i}\n" for i in range(3)]
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

"""Workers launched ahead of their sessions (sandbox/engine/spares.py): off unless turned on,
taken once, only by a session with the same limits, never a dead one, and ended when turned off."""
from __future__ import annotations

import time

import pytest

from sandbox.engine.session import ProgramSession
from sandbox.engine.spares import SPARES
from sandbox.protocol import SandboxLimits
from run_helpers import SEED_A

LIMITS = SandboxLimits(call_timeout_s=20)


@pytest.fixture
def spares():
    SPARES.keep(0)
    yield SPARES
    SPARES.keep(0)


def _waiting(spares, limits=LIMITS) -> list:
    """The spares waiting for sessions with `limits` (the background thread launches them)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        found = [w for key, ws in spares._waiting.items() if key[2] == _limits_key(limits) for w in ws]
        if found:
            return found
        time.sleep(0.02)
    return []


def _limits_key(limits) -> str:
    import json
    return json.dumps(limits.to_json(), sort_keys=True)


def _session_works(s: ProgramSession) -> None:
    s.start()
    s.write({"content": "a cat"}, "Maya adopted a cat named Biscuit.")
    assert "Biscuit" in s.read({"query_text": "cat"}).output


def test_off_by_default_a_session_launches_its_own_worker(spares):
    taken = spares.taken
    with ProgramSession(SEED_A, limits=LIMITS) as s:
        _session_works(s)
    assert spares.taken == taken and not spares._waiting


def test_a_spare_is_taken_once_by_a_session_with_the_same_limits(spares):
    spares.keep(1)
    with ProgramSession(SEED_A, limits=LIMITS) as first:     # nothing waiting yet: launches one for later
        _session_works(first)
        spare = _waiting(spares)[0]
        other = SandboxLimits(call_timeout_s=21)
        with ProgramSession(SEED_A, limits=other) as different:   # other limits: not this spare
            _session_works(different)
        assert spare in _waiting(spares)
        taken = spares.taken
        with ProgramSession(SEED_A, limits=LIMITS) as second:
            _session_works(second)
            assert second._worker is spare and spares.taken == taken + 1
            assert second.group_pid != first.group_pid
        assert spare.proc.poll() is not None                   # closed with its session: one program per worker
        assert spare not in _waiting(spares)                   # never handed out again


def test_a_dead_spare_is_skipped_and_turning_spares_off_ends_the_waiting_ones(spares):
    spares.keep(1)
    with ProgramSession(SEED_A, limits=LIMITS) as s:
        _session_works(s)
    dead = _waiting(spares)[0]
    dead.kill_group()                                          # as the OOM killer might
    deadline = time.monotonic() + 10
    while dead.proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    with ProgramSession(SEED_A, limits=LIMITS) as s:
        _session_works(s)
        assert s._worker is not dead
    waiting = _waiting(spares)
    assert waiting and dead not in waiting
    spares.keep(0)
    assert not spares._waiting and all(w.proc.poll() is not None for w in waiting)

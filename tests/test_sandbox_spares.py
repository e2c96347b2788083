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


def _settled(spares) -> None:
    """Return once every launch already handed to the background thread is done (its jobs run in
    order: a marker job after them has run only then)."""
    import threading
    done = threading.Event()
    spares._submit(done.set)
    assert done.wait(20)


def test_without_refill_a_taken_spare_is_replaced_only_when_fill_is_called(spares):
    spares.keep(1, refill=False)
    with ProgramSession(SEED_A, limits=LIMITS) as s:       # nothing waiting, and nothing launched for later
        _session_works(s)
    _settled(spares)
    assert not any(spares._waiting.values())
    launched = spares.launched
    spares.fill()                                          # work is coming: one per kind seen
    spare = _waiting(spares)[0]
    _settled(spares)
    assert spares.launched == launched + 1
    with ProgramSession(SEED_A, limits=LIMITS) as s:
        _session_works(s)
        assert s._worker is spare
    _settled(spares)
    assert not any(spares._waiting.values())               # taken, not replaced: it would wait idle
    spares.fill()
    spares.fill()                                          # a second fill adds nothing: one per kind
    _settled(spares)
    assert len(_waiting(spares)) == 1 and spares.launched == launched + 2


def test_fill_launches_nothing_before_a_session_was_seen_or_when_spares_are_off(spares):
    launched = spares.launched
    spares.fill()
    spares.keep(1, refill=False)
    spares.fill()
    _settled(spares)
    assert not spares._waiting and spares.launched == launched

"""While the run waits on the reflector, background work may use the calls in flight it leaves
idle (mstar/iteration/lending.py, slots.BackgroundShare.lent): every slot of the cap but the
reflector's own, for a window priced from the run so far; afterwards background work is back to
half the cap, the calls that took a lent slot keep it until their reply and no slot is handed on
until fewer than half are held."""
from __future__ import annotations

import threading
import time

import pytest
from gate_helpers import OneByOne, wait_until

from mstar.iteration.lending import ReflectorLending, window_seconds
from mstar.llm import scope as llm_scope
from mstar.llm.router import LLMRouter
from mstar.llm.slots import IDLE, BackgroundShare, Slots
from mstar.llm.types import UsageRecord

ROLES = ("task", "reflector", "toolkit", "judge")


def _background_calls(router, n):
    def run(i):
        with llm_scope.background(llm_scope.Background(IDLE)):
            router.call("task", [{"role": "user", "content": f"test{i}"}])
    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    return threads


def _finish(gate, threads):
    gate.let_all(threads, held=len(threads))


def test_a_narrowed_limit_hands_no_slot_on_until_fewer_are_held():
    slots = Slots(4)
    for _ in range(4):
        slots.acquire()
    got = []
    waiter = threading.Thread(target=lambda: (slots.acquire(), got.append(1)))
    waiter.start()
    wait_until(lambda: slots.waiting() == 1)
    slots.narrow(2)
    slots.release()
    slots.release()            # 2 held: the limit, none free
    time.sleep(0.05)
    assert got == []
    slots.release()            # 1 held: one free again, and it goes to the waiter
    waiter.join(5)
    assert got == [1]
    slots.release()
    slots.release()
    with pytest.raises(RuntimeError):
        slots.release()


def test_lent_background_takes_every_slot_but_the_reflector_s_and_is_back_to_half_after():
    gate = OneByOne()
    router = LLMRouter({r: gate for r in ROLES}, max_in_flight=8)
    threads = _background_calls(router, 12)
    wait_until(lambda: len(gate.asked) == 4 and router.background.any.waiting() == 8)   # half the cap
    with router.background.lent(60.0):
        wait_until(lambda: len(gate.asked) == 7)          # every slot but one
        time.sleep(0.05)
        assert len(gate.asked) == 7
        router.call("reflector", [{"role": "user", "content": "reflect"}])   # not kept waiting
        assert gate.asked[-1] == "reflect"
    # Lending over: the 7 out keep their slots; none is handed on until fewer than 4 are out.
    gate.let(3)
    time.sleep(0.1)
    assert len(gate.asked) == 8
    gate.let(1, then_asked=9)      # 3 out: one free in the half
    time.sleep(0.05)
    assert len(gate.asked) == 9
    _finish(gate, threads)
    assert len(gate.asked) == 13


def test_a_lending_ends_at_its_window_even_while_the_reply_is_awaited():
    gate = OneByOne()
    router = LLMRouter({r: gate for r in ROLES}, max_in_flight=8)
    threads = _background_calls(router, 12)
    wait_until(lambda: len(gate.asked) == 4)
    with router.background.lent(0.2):
        wait_until(lambda: len(gate.asked) == 7)
        time.sleep(0.4)            # the window is over: a freed slot is not handed on
        gate.let(1)
        time.sleep(0.1)
        assert len(gate.asked) == 7
    _finish(gate, threads)


def test_no_window_lends_nothing_and_a_lending_does_not_undo_the_race_s_widening():
    share = BackgroundShare(8)
    with share.lent(0.0):
        assert share.any.limit == 4
    with share.lent(30.0):
        assert share.any.limit == 7
        share.widen()                # the iterations are over (held_out.beside_the_race)
    assert share.any.limit == 8


@pytest.mark.parametrize("replies, gates, hold, expected", [
    ([20.0, 30.0, 40.0, 50.0], 0.5, 2.0, 28.5),     # the lower quartile of the replies: 30.0
    ([2.0], 0.2, 2.0, 0.2),                          # equal replies: the gates' time alone
    ([2.0], 0.2, 3.0, 0.0),                          # background calls outlast the reply: none
    ([], 0.2, 2.0, 0.0), ([2.0], None, 2.0, 0.0), ([2.0], 0.2, None, 0.0),   # no history: none
])
def test_the_window_is_a_cautious_reply_plus_the_shortest_gates_minus_a_background_hold(replies, gates, hold, expected):
    assert window_seconds(replies, gates, hold) == pytest.approx(expected)


def test_the_run_s_lending_reads_the_reflector_s_replies_its_gates_and_the_background_s_holds():
    gate = OneByOne()
    router = LLMRouter({r: gate for r in ROLES}, max_in_flight=8)
    lending = ReflectorLending(router)
    for latency in (30.0, 9.0, 40.0, 12.0):   # lower quartile: 12.0
        router.ledger.add(UsageRecord("reflector", "gate", "test", 10, 10, latency, kind="reflect"))
    router.ledger.add(UsageRecord("reflector", "gate", "test", 10, 10, 1.0, kind="reflect", cache_hit=True))
    router.ledger.add(UsageRecord("reflector", "gate", "test", 10, 10, 0.5, kind="reflect", error="boom"))
    assert lending.window() == 0.0                     # no gates, no background call seen yet
    lending.saw_gates(0.8)
    lending.saw_gates(0.3)
    lending.saw_gates(0.6)
    gate.open.set()
    _finish(gate, _background_calls(router, 4))
    hold = router.background.hold_seconds()
    assert hold is not None and hold < 1.0
    assert lending.window() == pytest.approx(12.0 + 0.3 - hold)   # cache hits and errors left out
    with lending.during_reply():
        assert router.background.any.limit == 7
    assert router.background.any.limit == 4

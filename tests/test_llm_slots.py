"""A role's calls in flight (mstar/llm/slots.py): the limit holds, waiting calls go FIRST, then
NORMAL, then LAST, each priority in the order asked, and a freed slot goes to a waiter, not to a
newcomer. Also through the router: an extraction a write waits for, asked after a queue of
formulations, reaches the endpoint first; one no write waits for goes after them."""
import threading
import time

import pytest

from gate_helpers import Gate, wait_until
from mstar.llm import scope as llm_scope
from mstar.llm.router import LLMRouter, RolePolicy
from mstar.llm.slots import FIRST, LAST, NORMAL, Slots


def _queue(slots, order, names_and_priorities):
    """Start one thread per (name, priority), each in turn only once the previous one is waiting;
    each records its name when it gets a slot and gives the slot back at once."""
    threads = []
    for name, priority in names_and_priorities:
        def run(name=name, priority=priority):
            with slots.held(priority):
                order.append(name)
        t = threading.Thread(target=run)
        before = slots.waiting()
        t.start()
        wait_until(lambda: slots.waiting() == before + 1)
        threads.append(t)
    return threads


def test_waiting_calls_go_by_priority_and_each_priority_keeps_its_order():
    slots, order = Slots(1), []
    slots.acquire()   # the one slot is busy: everyone below waits
    threads = _queue(slots, order, [("late1", LAST), ("f1", NORMAL), ("f2", NORMAL), ("x1", FIRST), ("late2", LAST),
                                    ("f3", NORMAL), ("x2", FIRST)])
    slots.release()
    for t in threads:
        t.join(5)
    assert order == ["x1", "x2", "f1", "f2", "f3", "late1", "late2"]
    with pytest.raises(ValueError, match="unknown call priority"):
        slots.acquire(5)


def test_a_freed_slot_goes_to_the_waiter_not_to_a_newcomer():
    slots, order = Slots(1), []
    slots.acquire()
    threads = _queue(slots, order, [("waiter", LAST)])
    slots.release()          # handed to "waiter" right here ...
    got_it = threading.Event()

    def newcomer():
        with slots.held(FIRST):   # ... so even a FIRST newcomer queues behind it
            order.append("newcomer")
            got_it.set()
    t = threading.Thread(target=newcomer)
    t.start()
    assert got_it.wait(5)
    for th in threads + [t]:
        th.join(5)
    assert order == ["waiter", "newcomer"]


def test_never_more_than_the_limit_at_once_and_every_slot_comes_back():
    slots, lock = Slots(3), threading.Lock()
    state = {"now": 0, "peak": 0}

    def work(i):
        with slots.held((FIRST, NORMAL, LAST)[i % 3]):
            with lock:
                state["now"] += 1
                state["peak"] = max(state["peak"], state["now"])
            time.sleep(0.01)
            with lock:
                state["now"] -= 1
    threads = [threading.Thread(target=work, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert state["peak"] == 3
    for _ in range(3):           # all three free again: taken without waiting
        slots.acquire()
    assert slots.waiting() == 0
    with pytest.raises(ValueError):
        Slots(0)


def test_releasing_a_slot_nobody_holds_is_an_error():
    slots = Slots(2)
    with pytest.raises(RuntimeError, match="not held"):
        slots.release()


def _sent_in_order(asks) -> list[str]:
    """A router whose task role has one slot: a first call holds it, then each (text, send) of
    `asks` is asked in turn (send(router, messages) makes the call) once the one before waits;
    the order in which the endpoint was asked once the slot frees."""
    gate = Gate()
    router = LLMRouter({r: gate for r in ("task", "reflector", "toolkit", "judge")},
                       policies={"task": RolePolicy(concurrency=1)})
    threads = []
    for i, (text, send) in enumerate([("first", lambda r, m: r.call("task", m)), *asks]):
        t = threading.Thread(target=send, args=(router, [{"role": "user", "content": text}]))
        t.start()
        threads.append(t)
        if i == 0:
            wait_until(lambda: gate.asked == ["first"])           # holds the role's only slot
        else:
            wait_until(lambda: router._slots["task"].waiting() == i)
    gate.open.set()
    for t in threads:
        t.join(10)
    return gate.asked


def test_the_router_sends_waiting_calls_by_priority():
    at = lambda priority: lambda r, m: r.call("task", m, priority=priority)   # noqa: E731
    asked = _sent_in_order([("extract, for its record", at(LAST)), ("formulate 1", at(NORMAL)),
                            ("formulate 2", at(NORMAL)), ("extract, for a write", at(FIRST))])
    assert asked == ["first", "extract, for a write", "formulate 1", "formulate 2", "extract, for its record"]


def _in_background(router, messages):
    with llm_scope.background():
        router.call("task", messages)


def test_calls_made_in_the_background_wait_behind_the_others():
    """The prefetch's guesses and the best seed's early test (mstar/llm/scope.py: background):
    asked first, sent last, also when their caller said NORMAL."""
    normal = lambda r, m: r.call("task", m)   # noqa: E731
    asked = _sent_in_order([("seed test", _in_background), ("race 1", normal), ("guess", _in_background),
                            ("race 2", normal)])
    assert asked == ["first", "race 1", "race 2", "seed test", "guess"]
    assert not llm_scope.in_background()      # the flag stays with the work it was set for

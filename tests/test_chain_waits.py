"""The critical-path count of an evaluation's calls (evaluation/calls.py: Calls.text's `waited`):
a call that waits for an identical request already in flight (the router's single flight) waited
for a reply, though it made no request; a reply the response cache had stored is no wait. Before,
both counted 0, and three seeds asking the same query formulations at once made the seeds'
bound one reply short (bench/bench_lead.py)."""
from __future__ import annotations

import threading
import time

from gate_helpers import Gate, wait_until

from mstar.evaluation.calls import Calls
from mstar.llm.cache import ResponseCache
from mstar.llm.router import LLMRouter, RolePolicy

ROLES = ("task", "reflector", "toolkit", "judge")


def _router(tmp_path, gate):
    return LLMRouter({r: gate for r in ROLES}, cache=ResponseCache(tmp_path / "cache"),
                     policies={"task": RolePolicy(cache="reuse")})


def test_a_call_that_joins_a_request_in_flight_waited_a_reply_and_a_stored_reply_is_no_wait(tmp_path):
    gate = Gate()
    calls = Calls(_router(tmp_path, gate))
    messages = [{"role": "user", "content": "what did Jo buy?"}]
    got = {}

    def ask(name):
        got[name] = calls.text("task", messages)
    first = threading.Thread(target=ask, args=("sent",))
    first.start()
    wait_until(lambda: gate.asked == ["what did Jo buy?"])
    second = threading.Thread(target=ask, args=("joined",))
    second.start()
    time.sleep(0.2)                    # the second caller waits the whole reply with the first
    gate.open.set()
    first.join(10)
    second.join(10)
    assert gate.asked == ["what did Jo buy?"]            # one request
    assert got["sent"] == ("ok", None, 1)
    assert got["joined"] == ("ok", None, 1)              # no request, but a reply waited for
    assert calls.text("task", messages) == ("ok", None, 0)   # the stored reply: nothing to wait for

"""Shared by the tests of the LLM layer's ordering (test_llm_slots.py, test_held_out.py): a
backend that holds every call until the test opens it, and a wait for a condition."""
from __future__ import annotations

import threading
import time

from mstar.llm.types import ChatResponse


def wait_until(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("timed out")
        time.sleep(0.002)


class Gate:
    """A backend whose calls wait until the test opens the gate; it records what it was asked."""
    name, model = "test", "gate"

    def __init__(self):
        self.open, self.asked = threading.Event(), []
        self.lock = threading.Lock()

    def complete(self, messages):
        with self.lock:
            self.asked.append(messages[-1]["content"])
        self.open.wait(10)
        return ChatResponse(text="ok", model="gate", backend="test")

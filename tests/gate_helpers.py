"""Shared by the tests of the LLM layer's ordering (test_llm_slots.py, test_held_out.py,
test_lending.py): a backend that holds every call until the test opens it, one that lets its
background calls finish one at a time, and a wait for a condition."""
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


class OneByOne(Gate):
    """A gate that lets its background calls ("test...", "guess...") finish one at a time (`let`,
    `let_one`); any other call (the run's own) is answered at once, so a turn always frees a
    background slot."""

    def __init__(self):
        super().__init__()
        self.turns = threading.Semaphore(0)

    def complete(self, messages):
        with self.lock:
            self.asked.append(messages[-1]["content"])
        if not self.open.is_set() and messages[-1]["content"].startswith(("test", "guess")):
            self.turns.acquire(timeout=10)
        return ChatResponse(text="ok", model="gate", backend="test")

    def let(self, n: int, then_asked: int | None = None):
        for _ in range(n):
            self.turns.release()
        if then_asked is not None:
            wait_until(lambda: len(self.asked) == then_asked)

    def let_one(self, then_asked: int):
        self.let(1, then_asked)

    def let_all(self, threads, held: int = 8):
        """Answer everything from now on, the `held` calls waiting for a turn too; join `threads`."""
        self.open.set()
        self.let(held)
        for t in threads:
            t.join(10)

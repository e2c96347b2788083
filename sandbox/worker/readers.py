"""The worker's reading threads: up to `size`, started as reads arrive, reused afterwards.

Like a ThreadPoolExecutor, with one difference that matters on the worker's critical path: a
new thread is started without waiting for it to run. `threading.Thread.start` blocks its caller
until the new thread has the GIL and reports in; the caller here is the main thread, the one
that also routes the engine's LLM replies to the reads, and while a read computes each such
start cost it ~0.5-2 ms (25 reads arriving together queued ~20 ms of starts in front of the
replies, measured). `_thread.start_new_thread` returns at once.
"""
from __future__ import annotations

import _thread
import queue
import threading
from typing import Any, Callable


class ReadPool:
    def __init__(self, size: int, run: Callable[..., None]) -> None:
        self._size, self._run = size, run
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0   # started
        self._idle = 0      # started and waiting for a job, not yet promised one

    def submit(self, *args: Any) -> None:
        """Run `run(*args)` on an idle thread, a new one, or the first to come free."""
        start = False
        with self._lock:
            if self._idle:
                self._idle -= 1
            elif self._threads < self._size:
                self._threads += 1
                start = True
        self._jobs.put(args)
        if start:
            try:
                _thread.start_new_thread(self._serve, ())
            except RuntimeError:   # "can't start new thread": the job waits for a running one
                with self._lock:
                    self._threads -= 1
                    if not self._threads:
                        raise

    @property
    def threads(self) -> int:
        return self._threads

    def _serve(self) -> None:
        while True:
            args = self._jobs.get()
            self._run(*args)
            with self._lock:
                self._idle += 1

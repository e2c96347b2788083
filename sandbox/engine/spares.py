"""Workers launched ahead of the sessions that will use them (opt-in: `SPARES.keep(n)`).

From its launch to its "ready" frame a worker takes ~30 ms on this machine (forked by the fork
server, it enters its namespaces, sets its limits and makes its chromadb client), and a session
used to wait for all of it: in mstar, twice on every iteration's critical path (the gates' worker,
and the evaluation's). A spare is launched before it is needed and holds no program yet; the
session that takes it finds the ready frame waiting in the pipe, and a new spare is launched
in the background. One program per worker still holds: a spare is taken once, and only by a
session with the same launcher and limits it was launched with.

Off by default, so a program's session is exactly one worker for whoever counts processes; the
mstar commands that run evaluations turn it on. Spares left at exit are killed like any worker.

Each spare is a process holding its memory (~15 MB of PSS with chromadb's client) while it waits.
With `keep(n, refill=False)` a taken spare is not replaced at once: `fill()` launches the missing
ones when the caller knows sessions are coming (mstar: as an iteration asks its reflector, whose
reply takes longer than a launch). So spares exist while work is about to start, not through the
minutes between -- on the 30-session LoCoMo workload two waited through every evaluation and the
whole final phase, where nothing takes them (bench/bench_run_memory.py).
"""
from __future__ import annotations

import atexit
import json
import os
import queue
import threading
from typing import Any

from sandbox.engine.launch import WorkerProcess, spawn


class Spares:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[tuple, list[WorkerProcess]] = {}
        self._per_kind = 0
        self._refill = True
        self._kinds: dict[tuple, tuple[Any, Any]] = {}   # key -> (launcher, limits) of the sessions seen
        self._jobs: queue.SimpleQueue | None = None
        self._jobs_pid = 0                 # threads do not survive a fork: a child starts its own
        self.taken = self.launched = 0   # counts, for tests and benchmarks

    def keep(self, n: int, *, refill: bool = True) -> None:
        """Keep `n` spares for each (launcher, limits) a session has used (0: none, and the
        waiting ones are ended). `refill=False`: a taken spare is replaced only by `fill()`."""
        self._per_kind = max(0, n)
        self._refill = refill
        if not n:
            self.close()

    def fill(self) -> None:
        """Launch, in the background, the spares missing for every (launcher, limits) seen so far."""
        if self._per_kind <= 0:
            return
        with self._lock:
            missing = [(key, kind, self._per_kind - len(self._waiting.get(key, [])))
                       for key, kind in self._kinds.items() if key[0] == os.getpid()]
        for key, (launcher, limits), n in missing:
            for _ in range(n):
                self._submit(lambda key=key, launcher=launcher, limits=limits: self._launch(key, launcher, limits))

    def take(self, launcher: Any, limits: Any) -> WorkerProcess | None:
        """A live spare launched with `launcher` and `limits`, or None; either way another is
        launched in the background for the next session (with `refill=False`: at the next `fill()`)."""
        if self._per_kind <= 0:
            return None
        # The launcher itself, not its id(): a dropped launcher's id may name a new one later.
        key = (os.getpid(), launcher, json.dumps(limits.to_json(), sort_keys=True))
        found, dead = None, []
        with self._lock:
            self._kinds.setdefault(key, (launcher, limits))
            waiting = self._waiting.setdefault(key, [])
            while waiting and found is None:
                w = waiting.pop(0)
                if w.proc.poll() is None:
                    found = w
                else:
                    dead.append(w)
            self.taken += found is not None
            missing = self._per_kind - len(waiting) if self._refill else 0
        for w in dead:
            self._submit(w.end)
        for _ in range(missing):
            self._submit(lambda: self._launch(key, launcher, limits))
        return found

    def close(self) -> None:
        with self._lock:
            spares = [w for ws in self._waiting.values() for w in ws]
            self._waiting.clear()
            self._kinds.clear()
        for w in spares:
            w.end()

    # ------------------------------------------------------------ the background thread
    def _launch(self, key: tuple, launcher: Any, limits: Any) -> None:
        with self._lock:
            if len(self._waiting.get(key, [])) >= self._per_kind:
                return
        w = spawn(launcher, limits)
        with self._lock:
            if self._per_kind > 0 and key[0] == os.getpid():
                self._waiting.setdefault(key, []).append(w)
                self.launched += 1
                w = None
        if w is not None:
            w.end()

    def _submit(self, job) -> None:
        with self._lock:
            if self._jobs is None or self._jobs_pid != os.getpid():
                self._jobs, self._jobs_pid = queue.SimpleQueue(), os.getpid()
                threading.Thread(target=self._run, args=(self._jobs,), name="sandbox-spares", daemon=True).start()
            self._jobs.put(job)

    @staticmethod
    def _run(jobs: queue.SimpleQueue) -> None:
        while True:
            job = jobs.get()
            try:
                job()
            except Exception:  # noqa: BLE001 -- a spare that cannot be launched is simply not there
                pass


SPARES = Spares()
atexit.register(SPARES.close)

"""What the console shows while an evaluation waits on the LLM: cases done of total, episodes
written, calls in flight, retries and failures so far -- a bar redrawn in place on a terminal,
a plain line every `interval` seconds otherwise (logs, CI) -- and the first error of each kind,
printed whole, once.

The executor reports each evaluation's counts (`begin` / `update` / `end`, through
`LLMRouter.eval_progress`); the router reports every failed attempt (`attempt_error`) and the
ledger every finished call (`record`). Nothing here changes what a run does.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import TextIO

from mstar.run.console import console_width, fit
from mstar.run.progress import format_duration
from sandbox.engine.terminal import terminal_safe

DEFAULT_INTERVAL_S = 10.0
QUIET_KINDS = ("FatalLLMError",)   # the run stops with that message; it is not printed twice


@dataclass
class EvalEntry:
    label: str
    started: float
    writes: tuple[int, int] = (0, 0)
    cases: tuple[int, int] = (0, 0)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def update(self, what: str, done: int, total: int) -> None:
        with self._lock:
            if what == "writes":
                self.writes = (done, total)
            elif what == "cases":
                self.cases = (max(done, self.cases[0]) if total == self.cases[1] else done, total)


class LiveProgress:
    def __init__(self, router=None, *, out: TextIO | None = None, err: TextIO | None = None,
                 tty: bool | None = None, interval: float | None = None, tick: float = 0.5, clock=time.monotonic):
        self.router = router
        self.out, self.err = out or sys.stdout, err or sys.stderr
        self.tty = self.out.isatty() if tty is None else tty
        env = os.environ.get("MSTAR_PROGRESS_INTERVAL")
        self.interval = interval if interval is not None else float(env) if env else DEFAULT_INTERVAL_S
        self.tick, self.clock = tick, clock
        self.entries: list[EvalEntry] = []
        self.attempt_errors = 0
        self.failed_calls = 0
        self.first_errors: dict[str, str] = {}
        self._drawn = False
        self._last_line = clock()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ fed by the executor, router, ledger
    def begin(self, label: str) -> EvalEntry:
        entry = EvalEntry(label, self.clock())
        with self._lock:
            if not self.entries:
                self._last_line = entry.started   # the first line comes one interval into the wait
            self.entries.append(entry)
        return entry

    def end(self, entry: EvalEntry) -> None:
        with self._lock:
            if entry in self.entries:
                self.entries.remove(entry)
            if not self.entries:
                self._clear()

    def attempt_error(self, role: str, kind: str, message: str) -> None:
        with self._lock:
            if kind == "rate_limit":
                # Not a retry: the call waits on its endpoint's limiter (mstar/llm/limiter.py).
                if kind not in self.first_errors:
                    self.first_errors[kind] = message
                    self._clear()
                    print(terminal_safe(f"mstar: the endpoint answers 429 (too many requests; {role}): every call "
                                        f"to it is paced together from now on -- waiting, not failing: {message}",
                                        newlines=False), file=self.err, flush=True)
                return
            self.attempt_errors += 1
            if kind in self.first_errors:
                return
            self.first_errors[kind] = message
            if kind in QUIET_KINDS:
                return
            self._clear()
            print(terminal_safe(f"mstar: LLM error ({kind}, {role}; the first of its kind, shown once; calls are "
                                f"retried as configured): {message}", newlines=False), file=self.err, flush=True)

    def record(self, rec) -> None:
        if getattr(rec, "error", None):
            with self._lock:
                self.failed_calls += 1

    # ------------------------------------------------------------ what is shown
    def status(self, now: float | None = None) -> str | None:
        """The one-line state of the evaluations in flight, or None when none is."""
        now = self.clock() if now is None else now
        with self._lock:
            entries = list(self.entries)
            retries = max(0, self.attempt_errors - self.failed_calls)
            failed = self.failed_calls
        if not entries:
            return None
        names = ", ".join(e.label for e in entries[:3]) + (f" +{len(entries) - 3}" if len(entries) > 3 else "")
        cd, ct = sum(e.cases[0] for e in entries), sum(e.cases[1] for e in entries)
        wd, wt = sum(e.writes[0] for e in entries), sum(e.writes[1] for e in entries)
        flying = sum(self.router.in_flight().values()) if self.router is not None else 0
        # A count not known yet (an evaluation's first moments: its episodes and cases not yet
        # counted) is left out rather than shown as 0/0.
        known = ([f"cases {cd}/{ct}"] if ct else []) + ([f"writes {wd}/{wt}"] if wd < wt else [])
        parts = (known or ["starting"]) + \
            [f"{flying} calls in flight"] + self._throttled() + [f"{retries} retries", f"{failed} failed",
                                                                 format_duration(now - min(e.started for e in entries))]
        return f"{names}: " + ", ".join(parts)

    def _throttled(self) -> list[str]:
        """'throttled to 582/min (41 x 429)' per endpoint whose limiter is holding calls back now: the
        rate it served (replies in the last minute), not the limiter's pace, which probes above
        the limit at times and is 0 while a pause holds every caller."""
        if self.router is None or not hasattr(self.router, "throttling"):
            return []
        out = []
        for st in self.router.throttling():
            if st["throttling"]:
                out.append(f"throttled to {st['answered_rpm']:.0f}/min ({st['rate_limited']} x 429)")
        return out

    def bar(self, now: float | None = None, width: int = 20) -> str | None:
        line = self.status(now)
        if line is None:
            return None
        with self._lock:
            done = sum(e.cases[0] + e.writes[0] for e in self.entries)
            total = sum(e.cases[1] + e.writes[1] for e in self.entries)
        filled = int(width * done / total) if total else 0
        return f"[{'#' * filled}{'.' * (width - filled)}] {line}"

    # ------------------------------------------------------------ the display thread
    def start(self) -> "LiveProgress":
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="live-progress", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        with self._lock:
            self._clear()

    def pause(self, *_event) -> None:
        """Before another line is printed (an event, a warning): take the bar off the screen."""
        with self._lock:
            self._clear()

    def _run(self) -> None:
        while not self._stop.wait(self.tick):
            try:
                self.show()
            except BrokenPipeError:
                # The reader went away (`| head`): the main thread meets the closed pipe at its
                # next line and ends the run as interrupted (mstar/library/exits.py).
                return

    def show(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        with self._lock:
            if self.tty:
                text = self.bar(now)
                if text is not None:
                    # One screen line: a bar that wraps cannot be taken back by "\r\033[K".
                    self.out.write("\r\033[K" + terminal_safe(text, newlines=False)[:console_width() - 1])
                    self.out.flush()
                    self._drawn = True
            elif now - self._last_line >= self.interval:
                text = self.status(now)
                if text is not None:
                    for line in fit(terminal_safe(f"wait  {text}", newlines=False), indent=6):
                        print(line, file=self.out, flush=True)
                    self._last_line = now

    def _clear(self) -> None:
        if self._drawn:
            self.out.write("\r\033[K")
            self.out.flush()
            self._drawn = False

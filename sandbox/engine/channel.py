"""The engine's end of one worker's frame pipes, shared by the threads waiting on its ops.

Several reads of one program may be in flight at once (each from its own engine thread). Every
frame names its op by "id"; whichever waiting thread finds the pipe free reads for a short slice
and files what arrived into the mailbox of the op it names, then hands the reading to one other
waiting thread. So no thread owns the pipe for long, each thread still enforces its own op's
deadline, and the worker's output (stdout/stderr) is drained by whoever reads. Each op waits on
a condition of its own and is woken only for its own frames (or to take over the reading): with
dozens of reads in flight, waking every waiter for every frame costs more than the reads.

Nothing a worker sends is trusted: a frame that is not a JSON object, or names no op in flight,
ends the channel with the reason (the session then kills the worker).
"""
from __future__ import annotations

import collections
import os
import select
import threading
import time
from typing import Any, Callable

from sandbox.protocol import FrameBuffer, FrameError, send_frame_until

SLICE_S = 0.05       # longest a thread reads before giving others a turn (and checking its deadline)
TIMEOUT = "timeout"  # next_frame's answers besides a frame
GONE = "gone"


class EngineChannel:
    def __init__(self, frames_in: int, frames_out: int, output: int,
                 on_output: Callable[[bytes], None]) -> None:
        self._in, self._out, self._output = frames_in, frames_out, output
        self._on_output = on_output
        self._frames = FrameBuffer()
        self._boxes: dict[int, collections.deque] = {}
        self._lock = threading.Lock()
        self._conds: dict[int, threading.Condition] = {}   # one per op in flight
        self._waiting: dict[int, None] = {}                # ops waiting while another thread reads
        self._idle = threading.Condition(self._lock)       # shutdown waits on it for the reader
        self._send_lock = threading.Lock()
        self._reading = False
        self._output_open = True
        self.closed: str = ""         # why the channel ended ("" while it is open)
        self.eof = False              # the worker closed its end: it died or exited

    # ------------------------------------------------------------ ops
    def open(self, op_id: int) -> None:
        with self._lock:
            self._boxes[op_id] = collections.deque()
            self._conds[op_id] = threading.Condition(self._lock)

    def close_op(self, op_id: int) -> None:
        with self._lock:
            self._boxes.pop(op_id, None)
            self._conds.pop(op_id, None)
            self._waiting.pop(op_id, None)

    def send(self, message: dict[str, Any], deadline: float) -> bool:
        """One whole frame before `deadline`; False on timeout. BrokenPipeError when the worker
        is gone, FrameError when the message is too large."""
        with self._send_lock:
            return send_frame_until(self._out, message, deadline)

    def next_frame(self, op_id: int, deadline: float) -> dict[str, Any] | str:
        """The next frame for `op_id`, or TIMEOUT at `deadline`, or GONE once the channel ended."""
        while True:
            with self._lock:
                box = self._boxes.get(op_id)
                if box:
                    return box.popleft()
                if self.closed or self.eof:
                    return GONE
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return TIMEOUT
                if self._reading:
                    self._waiting[op_id] = None
                    self._conds[op_id].wait(min(remaining, SLICE_S))
                    self._waiting.pop(op_id, None)
                    continue
                self._reading = True
            try:
                frames, eof, problem = self._read_slice(min(remaining, SLICE_S))
            finally:
                with self._lock:
                    self._reading = False
                    woken = self._file(frames, eof, problem)
                    if self.closed or self.eof:
                        for cond in self._conds.values():
                            cond.notify()
                    else:  # someone else reads next: a waiter with no frame of its own yet
                        nxt = next((w for w in self._waiting if w not in woken and w != op_id), None)
                        if nxt is not None:
                            self._conds[nxt].notify()
                    self._idle.notify_all()

    def shutdown(self, reason: str) -> None:
        """End the channel: every waiter gets GONE. Returns once no thread is reading, so the
        caller may close the descriptors (a closed number could be reused by another pipe)."""
        with self._lock:
            self.closed = self.closed or reason
            for cond in self._conds.values():
                cond.notify()
            while self._reading:
                self._idle.wait(SLICE_S)

    # ------------------------------------------------------------ internals
    def _read_slice(self, seconds: float) -> tuple[list[dict], bool, str]:
        poller = select.poll()
        poller.register(self._in, select.POLLIN)
        if self._output_open:
            poller.register(self._output, select.POLLIN)
        frames: list[dict] = []
        try:
            events = poller.poll(max(1, int(seconds * 1000)))
        except InterruptedError:
            return frames, False, ""
        for fd, _ in events:
            if fd == self._output:
                self._drain_output()
                continue
            try:
                data = os.read(self._in, 1 << 20)
            except BlockingIOError:
                continue
            except OSError:
                return frames, True, ""
            if not data:
                return frames, True, ""
            try:
                frames += self._frames.feed(data)
            except FrameError as exc:
                return frames, False, str(exc)
        return frames, False, ""

    def _file(self, frames: list[dict], eof: bool, problem: str) -> set:
        """Under the lock: put each frame into its op's mailbox and wake that op; returns the
        ops woken."""
        woken = set()
        for frame in frames:
            op_id = frame.get("id", 0)
            box = self._boxes.get(op_id) if isinstance(op_id, int) else None
            if box is None:
                problem = problem or f"frame {frame.get('op')!r} for op {op_id!r}, which is not in flight"
                break
            box.append(frame)
            if op_id not in woken:
                self._conds[op_id].notify()
                woken.add(op_id)
        if problem:
            self.closed = self.closed or f"bad frame: {problem}"
        self.eof = self.eof or eof
        return woken

    def _drain_output(self) -> None:
        while True:
            try:
                data = os.read(self._output, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self._output_open = False
                return
            self._on_output(data)

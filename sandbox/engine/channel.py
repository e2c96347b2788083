"""The engine's end of one worker's frame pipes, shared by the threads waiting on its ops.

Several reads of one program may be in flight at once (each from its own engine thread). Every
frame names its op by "id"; whichever waiting thread finds the pipe free reads for a short slice
and files what arrived into the mailbox of the op it names, then lets the next thread read. So
no thread owns the pipe for long, each thread still enforces its own op's deadline, and the
worker's output (stdout/stderr) is drained by whoever reads.

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
        self._cond = threading.Condition()
        self._send_lock = threading.Lock()
        self._reading = False
        self._output_open = True
        self.closed: str = ""         # why the channel ended ("" while it is open)
        self.eof = False              # the worker closed its end: it died or exited

    # ------------------------------------------------------------ ops
    def open(self, op_id: int) -> None:
        with self._cond:
            self._boxes[op_id] = collections.deque()

    def close_op(self, op_id: int) -> None:
        with self._cond:
            self._boxes.pop(op_id, None)

    def send(self, message: dict[str, Any], deadline: float) -> bool:
        """One whole frame before `deadline`; False on timeout. BrokenPipeError when the worker
        is gone, FrameError when the message is too large."""
        with self._send_lock:
            return send_frame_until(self._out, message, deadline)

    def next_frame(self, op_id: int, deadline: float) -> dict[str, Any] | str:
        """The next frame for `op_id`, or TIMEOUT at `deadline`, or GONE once the channel ended."""
        while True:
            with self._cond:
                box = self._boxes.get(op_id)
                if box:
                    return box.popleft()
                if self.closed or self.eof:
                    return GONE
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return TIMEOUT
                if self._reading:
                    self._cond.wait(min(remaining, SLICE_S))
                    continue
                self._reading = True
            try:
                frames, eof, problem = self._read_slice(min(remaining, SLICE_S))
            finally:
                with self._cond:
                    self._reading = False
                    self._file(frames, eof, problem)
                    self._cond.notify_all()

    def shutdown(self, reason: str) -> None:
        """End the channel: every waiter gets GONE. Returns once no thread is reading, so the
        caller may close the descriptors (a closed number could be reused by another pipe)."""
        with self._cond:
            self.closed = self.closed or reason
            self._cond.notify_all()
            while self._reading:
                self._cond.wait(SLICE_S)

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

    def _file(self, frames: list[dict], eof: bool, problem: str) -> None:
        """Under the condition's lock: put each frame into its op's mailbox."""
        for frame in frames:
            op_id = frame.get("id", 0)
            box = self._boxes.get(op_id) if isinstance(op_id, int) else None
            if box is None:
                problem = problem or f"frame {frame.get('op')!r} for op {op_id!r}, which is not in flight"
                break
            box.append(frame)
        if problem:
            self.closed = self.closed or f"bad frame: {problem}"
        self.eof = self.eof or eof

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

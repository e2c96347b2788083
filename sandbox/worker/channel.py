"""The worker's end of the frame pipes, shared by the ops that run at once.

Every frame names its op by "id". The main thread is the only reader of the engine's frames:
it takes requests and hands each reply (an LLM completion, a batch of embedding vectors) to the
op it belongs to. Load and write ops run on
the main thread itself, so while one waits for its LLM reply it keeps reading (and routes what
is not its own); reads may run on pool threads (sandbox.worker.main), which wait on a mailbox
the main thread fills. Sends from any thread go through one lock, a whole frame at a time.

The worker trusts the engine's frames (protocol.py); what it guards against here is only its
own threads stepping on each other.
"""
from __future__ import annotations

import collections
import os
import queue
import select
import threading
from typing import Any, Callable

from sandbox.protocol import FrameBuffer, FrameError, send_frame

ENGINE_GONE_EXIT = 75  # the engine closed the pipe: nobody is left to report to
_REPLIES = ("llm_reply", "embed_reply")   # the engine's answers to an op's requests
# Silence on the pipe this long after some traffic counts as idle (see WorkerChannel.on_idle).
IDLE_AFTER_S = 0.05


class WorkerChannel:
    def __init__(self, in_fd: int, out_fd: int) -> None:
        self.in_fd, self.out_fd = in_fd, out_fd
        self._send_lock = threading.Lock()
        self._mailboxes: dict[int, queue.SimpleQueue] = {}
        self._boxes_lock = threading.Lock()
        self._deferred: collections.deque[dict[str, Any]] = collections.deque()
        self._buffer = FrameBuffer()   # the main thread's: bytes read, not yet whole frames
        self._inbox: collections.deque[dict[str, Any]] = collections.deque()   # whole, not yet taken
        self._current = threading.local()    # the op this thread runs: .op_id, .threaded
        # Called once whenever the pipe falls silent after traffic (between an evaluation's
        # bursts, while a kept knowledge base waits, while an op waits on a slow LLM reply):
        # time nobody waits on, so the worker hands its freed heap back then (main.py).
        self.on_idle: Callable[[], None] | None = None
        self._active = False   # frames read since on_idle last ran

    # ------------------------------------------------------------ sending
    def send(self, frame: dict[str, Any]) -> None:
        with self._send_lock:
            send_frame(self.out_fd, frame)

    # ------------------------------------------------------------ the op a thread runs
    def enter(self, op_id: int, threaded: bool) -> None:
        self._current.op_id, self._current.threaded = op_id, threaded
        if threaded:
            with self._boxes_lock:
                self._mailboxes[op_id] = queue.SimpleQueue()

    def leave(self) -> None:
        if getattr(self._current, "threaded", False):
            with self._boxes_lock:
                self._mailboxes.pop(self._current.op_id, None)
        self._current.op_id, self._current.threaded = 0, False

    # ------------------------------------------------------------ receiving
    def next_request(self) -> dict[str, Any]:
        """Main thread: the next request to run (one that arrived while an op waited first).
        Raises EOFError when the engine closed the pipe."""
        if self._deferred:
            return self._deferred.popleft()
        while True:
            frame = self._recv()
            if not self._route_reply(frame):
                return frame

    def ask(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        """Send this op's LLM request and wait for the engine's reply to it."""
        return self.request({"op": "llm", "messages": messages}, "llm_reply")

    def embed(self, texts: list[str]) -> dict[str, Any]:
        """Ask the engine for the embedding vectors of `texts` (sandbox.engine.embed_proxy)."""
        return self.request({"op": "embed", "texts": texts}, "embed_reply")

    def request(self, frame: dict[str, Any], reply_op: str) -> dict[str, Any]:
        """Send one request frame of this op and wait for the engine's `reply_op` frame to it."""
        op_id = getattr(self._current, "op_id", 0)
        try:
            self.send({**frame, "id": op_id})
        except FrameError as exc:
            return {"ok": False, "kind": "error", "error": f"request too large to send: {exc}"}
        if getattr(self._current, "threaded", False):
            with self._boxes_lock:
                box = self._mailboxes[op_id]
            return box.get()
        while True:  # the main thread reads on until its own reply comes
            try:
                frame = self._recv()
            except EOFError:
                os._exit(ENGINE_GONE_EXIT)
            if frame.get("op") == reply_op and frame.get("id", 0) == op_id:
                return frame
            if not self._route_reply(frame):
                self._deferred.append(frame)  # a request: run once this op is done

    def _recv(self) -> dict[str, Any]:
        """Main thread: the next frame from the engine. Whatever the pipe holds is read at once
        and split into frames here: a frame read on its own costs two reads, each giving up the
        GIL, and with a read computing meanwhile each took ~0.5 ms to get it back -- 25 read
        requests and their LLM replies queued ~45 ms in the pipe (measured)."""
        while not self._inbox:
            if self._active and self.on_idle is not None and not _readable(self.in_fd, IDLE_AFTER_S):
                self._active = False
                self.on_idle()
            data = os.read(self.in_fd, 1 << 20)
            if not data:
                raise EOFError("pipe closed")
            self._active = True
            self._inbox.extend(self._buffer.feed(data))
        return self._inbox.popleft()

    def _route_reply(self, frame: dict[str, Any]) -> bool:
        """Hand a reply to the threaded op waiting for it; False for anything else."""
        if frame.get("op") not in _REPLIES:
            return False
        with self._boxes_lock:
            box = self._mailboxes.get(frame.get("id"))
        if box is not None:
            box.put(frame)
        return True  # a reply for an op that is gone is dropped


def _readable(fd: int, timeout_s: float) -> bool:
    """Whether `fd` has something to read (or is closed) within `timeout_s`."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout_s * 1000))

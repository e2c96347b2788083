"""The toolkit LLM of a stored memory: replies recorded during a write, served back on replay.

A program's `toolkit.llm_completion` reaches the engine as a request frame; the engine's proxy
(sandbox.engine.llm_proxy) checks the budget and the prompt and calls the LLM callable the
session was started with -- in the thread that waits on the op. That callable is a `ToolkitTape`:

  recording  (a live write)   the real toolkit LLM answers; each reply (or its error) is kept
                              for the write's log record;
  serving    (a replay)       the recorded replies are handed back in order, no LLM is called;
  re-recording (a forget's    a call the program sends as recorded gets its recorded reply; one it
  replay of the kept writes)  sends differently -- the forgotten entries are gone from its state, so
                              a prompt built from that state changed -- is asked of the real toolkit
                              LLM; every exchange is kept for the write's new log record (`Rerecording`);
  neither    (a read)         the real toolkit LLM answers, nothing is kept (reads are not logged).

The mode is per thread, because the sandbox serves an op's LLM requests in the thread that sent
the op: a read running beside a replay on another thread never takes a recorded reply. The
budget refusals and prompt caps happen in the engine before the tape is asked, so they repeat by
themselves on replay. What the program sent is hashed (not stored): a replay that asks something
else than the recorded write did is told apart (`Serving.diverged`).

Why a forget re-records: a reply is written from its prompt, so a kept write's recorded reply to
a prompt that held a forgotten text (a running profile the toolkit rewrites at every write) may
restate that text. Served back, it would put the forgotten text into the rebuilt memory and keep it
in the new log. A recorded reply is served again only to a prompt with the same hash -- one that
the rebuilt state produced by itself.
"""
from __future__ import annotations

import hashlib
import json
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

LLMFn = Callable[[list[dict]], str]


def prompt_hash(messages: list[dict]) -> str:
    text = json.dumps(messages, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class ReplayMissing(RuntimeError):
    """The program asked for more toolkit replies than its recorded write received."""


class Serving:
    """The recorded replies of one write, handed out in order."""

    def __init__(self, replies: list[dict]) -> None:
        self.replies = list(replies)
        self.used = 0
        self.diverged = ""       # why the replay did not ask what the write asked, when it did not

    def next(self, messages: list[dict]) -> str:
        if self.used >= len(self.replies):
            self.diverged = self.diverged or (f"write() asked the toolkit LLM {self.used + 1} time(s); "
                                              f"the recorded write asked {len(self.replies)}")
            raise ReplayMissing("no recorded toolkit reply for this call (replaying a write)")
        entry = self.replies[self.used]
        self.used += 1
        if entry.get("prompt") != prompt_hash(messages):
            self.diverged = self.diverged or f"toolkit call {self.used} of write() sent another prompt than recorded"
        if "error" in entry:
            raise RuntimeError(str(entry["error"]))
        return str(entry.get("reply", ""))

    def check_all_used(self) -> None:
        if self.used < len(self.replies) and not self.diverged:
            self.diverged = (f"write() asked the toolkit LLM {self.used} time(s); the recorded write "
                             f"asked {len(self.replies)}")


class Rerecording:
    """One kept write replayed by a forget: recorded replies for the prompts sent as recorded, the
    live toolkit LLM for the others; `made` is the write's new exchange list."""

    def __init__(self, replies: list[dict], live: LLMFn) -> None:
        self.recorded = list(replies)
        self._unused = list(range(len(self.recorded)))
        self._live = live
        self.made: list[dict] = []
        self.failed = ""          # the live call's failure: the forget is refused (the program may
                                  # have caught the exception, so its write() cannot tell us)

    def next(self, messages: list[dict]) -> str:
        prompt = prompt_hash(messages)
        for position, index in enumerate(self._unused):
            entry = self.recorded[index]
            if entry.get("prompt") == prompt:
                del self._unused[position]
                self.made.append(entry)
                if "error" in entry:
                    raise RuntimeError(str(entry["error"]))
                return str(entry.get("reply", ""))
        try:
            text = self._live(messages)
        except Exception as exc:
            self.failed = self.failed or f"{type(exc).__name__}: {exc}"[:500]
            raise
        self.made.append({"prompt": prompt, "reply": text})
        return text


class ToolkitTape:
    """The toolkit LLM callable of one namespace's sandbox session."""

    def __init__(self, live: LLMFn) -> None:
        self.live = live
        self._mode = threading.local()

    def __call__(self, messages: list[dict]) -> str:
        serving: Serving | Rerecording | None = getattr(self._mode, "serving", None)
        if serving is not None:
            return serving.next(messages)
        recording: list[dict] | None = getattr(self._mode, "recording", None)
        try:
            text = self.live(messages)
        except Exception as exc:  # the program gets the failure as an exception; so will the replay
            if recording is not None:
                recording.append({"prompt": prompt_hash(messages), "error": f"{type(exc).__name__}: {exc}"[:2000]})
            raise
        if recording is not None:
            recording.append({"prompt": prompt_hash(messages), "reply": text})
        return text

    @contextmanager
    def recording(self) -> Iterator[list[dict]]:
        """Within the block, this thread's toolkit calls are answered live and kept in the list."""
        kept: list[dict] = []
        self._mode.recording = kept
        try:
            yield kept
        finally:
            self._mode.recording = None

    @contextmanager
    def serving(self, replies: list[dict]) -> Iterator[Serving]:
        """Within the block, this thread's toolkit calls are answered from `replies`."""
        served = Serving(replies)
        self._mode.serving = served
        try:
            yield served
        finally:
            self._mode.serving = None
            served.check_all_used()

    @contextmanager
    def rerecording(self, replies: list[dict]) -> Iterator[Rerecording]:
        """Within the block, this thread's toolkit calls are answered from `replies` where the
        prompt is the recorded one, else live; every exchange is kept (`Rerecording.made`)."""
        again = Rerecording(replies, self.live)
        self._mode.serving = again
        try:
            yield again
        finally:
            self._mode.serving = None

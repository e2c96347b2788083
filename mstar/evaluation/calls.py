"""The LLM calls of one evaluation: counted, their failures kept per case, the toolkit served.

What an evaluation asks goes through `Calls.text`: the agent's extractions, formulations and
answers, the judge's calls and the program's toolkit calls. It counts them and their failures
(mstar/evaluation/run.py turns a high failed share into EndpointOutage), and the tokens its
questions asked -- formulations, reads' toolkit calls, answers, judging -- and its writes asked,
sent or answered by the response cache: what scoring the program on one more question costs,
which the confirmation's race prices its items by, and what writing a knowledge base again cost
(mstar/final/race_budget.py).
"""
from __future__ import annotations

import threading

from mstar.llm.router import LLMRouter
from mstar.llm.slots import NORMAL
from mstar.llm.types import FatalLLMError


class Calls:
    """The agent, judge and toolkit calls of one evaluation, with their failures counted."""

    def __init__(self, router: LLMRouter) -> None:
        self.router, self.total, self.failed, self.last = router, 0, 0, ""
        self.question_tokens = 0      # prompt + completion tokens of the question calls
        self.write_tokens = 0         # ... of the others (extractions, writes' toolkit calls)
        self._lock = threading.Lock()

    def text(self, role: str, messages: list[dict], priority: int = NORMAL,
             question: bool = True) -> tuple[str, str | None, int]:
        """(reply, error, waited): waited is 1 when a request was made, or when this call waited
        at least half a reply for an identical request already in flight (single flight: the
        three seeds ask the same formulations at once); 0 when the response cache had the reply
        -- what the critical-path bound counts. `priority`: where the call
        queues when the role's slots are full (mstar.llm.slots). `question`: a call made to
        answer a question (False: an extraction, a write's toolkit call)."""
        with self._lock:
            self.total += 1
        try:
            resp = self.router.call(role, messages, allow_truncated=False, priority=priority)
        except FatalLLMError:
            raise
        except Exception as exc:  # noqa: BLE001 -- after the router's retries: this case's error
            with self._lock:
                self.failed += 1
                self.last = str(exc)
            return "", str(exc), 1
        with self._lock:
            if question:
                self.question_tokens += resp.prompt_tokens + resp.completion_tokens
            else:
                self.write_tokens += resp.prompt_tokens + resp.completion_tokens
        return resp.text, None, 1 if not resp.cache_hit or resp.flight_wait >= 0.5 else 0


class Toolkit:
    """The program's toolkit LLM, served from the engine. The sandbox serves a read's LLM requests
    in the thread that waits on that read, so a thread-local tells which case a failure belongs
    to; an error no retry can fix is held and raised once the read is back (the sandbox would
    hand it to the program as an ordinary exception)."""

    def __init__(self, calls: Calls) -> None:
        self.calls, self.fatal = calls, None
        self._case = threading.local()

    def __call__(self, messages: list[dict]) -> str:
        calls = getattr(self._case, "calls", None) or self.calls
        try:
            text, err, waited = calls.text("toolkit", messages, question=getattr(self._case, "reading", False))
        except FatalLLMError as exc:
            self.fatal = self.fatal or exc
            raise
        self._case.waited = getattr(self._case, "waited", 0) + waited
        if err is not None:
            failures = getattr(self._case, "failures", None)
            if failures is not None:
                failures.append(err)
            raise RuntimeError(err)
        return text

    def watch(self, calls: Calls) -> list[str]:
        """Start collecting this thread's toolkit failures (one case's read), counted in `calls`:
        a kept session may serve several evaluations, each counts its own."""
        self._case.failures, self._case.calls, self._case.waited, self._case.reading = [], calls, 0, True
        return self._case.failures

    def waited(self) -> int:
        """Requests this thread's read waited for (toolkit calls the cache did not answer); the
        read is over (a later write's calls in this thread are no question's)."""
        self._case.reading = False
        return getattr(self._case, "waited", 0)

    def check(self) -> None:
        if self.fatal is not None:
            raise self.fatal

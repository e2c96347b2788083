"""The toolkit a memory program receives, as capability objects (docs/sandbox.md, L4).

A program gets `toolkit.db` (sqlite3 in memory), `toolkit.chroma` (one chromadb client),
`toolkit.llm_completion(messages, **kwargs)` and `toolkit.logger.debug(msg)`. None of them is the
raw library object: each wrapper class has explicit methods and `__slots__ = ()`, keeps the raw
connection/client in a closure, never delegates through `__getattr__` (whose AttributeError.obj
would hand the raw object out), and returns plain data (lists, dicts, str, numbers) -- never a
sqlite3.Cursor (`.connection`), a chromadb Collection (`._client`) or a numpy array.

Wrapper classes are made inside factory functions so each closure holds exactly one raw object.
This module has the toolkit object, the LLM stub, the logger and the shared helpers;
toolkit_db.py and toolkit_chroma.py hold the two stores.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from sandbox.protocol import check_messages  # noqa: F401  (shared with the engine, used below)

MAX_PLAIN_DEPTH = 32


class LLMBudgetExceeded(RuntimeError):
    """The engine refused a toolkit LLM call: this op's budget is spent (or calls are not allowed
    here, e.g. in __init__). Raised inside the program; it may catch it and carry on."""


class LLMError(RuntimeError):
    """The engine could not serve a toolkit LLM call (provider error, bad request)."""


class OpClock:
    """The current op's deadline on time.monotonic(), shared by the worker and the db wrapper.

    Per thread: reads may run concurrently (one thread each), and sqlite's progress handler runs
    in the thread of the statement it watches, so each op sees its own deadline."""

    __slots__ = ("_local",)

    def __init__(self) -> None:
        self._local = threading.local()

    @property
    def deadline(self) -> float:
        return getattr(self._local, "deadline", float("inf"))

    def start(self, seconds: float) -> None:
        self._local.deadline = time.monotonic() + seconds

    def extend(self, seconds: float) -> None:  # time spent waiting for the engine's LLM reply
        self._local.deadline = self.deadline + seconds

    def stop(self) -> None:
        self._local.deadline = float("inf")

    def expired(self) -> bool:
        return time.monotonic() > self.deadline


MAX_LOG_LINES = 2000  # per op; a million empty debug lines would pass any character cap


class LogSink:
    """Per-op capped log capture for logger.* and print(): keep up to `cap` chars and
    MAX_LOG_LINES lines, count the rest. Per thread, like OpClock: concurrent reads each
    collect their own lines."""

    def __init__(self, cap: int, max_lines: int = MAX_LOG_LINES) -> None:
        self.cap = cap
        self.max_lines = max_lines
        self._local = threading.local()

    def _state(self) -> list:
        state = getattr(self._local, "state", None)
        if state is None:
            state = self._local.state = [[], 0, 0]   # lines, chars used, messages dropped
        return state

    def add(self, text: str) -> None:
        # The characters only, as an exact str, made now: a program's str subclass kept here would
        # be freed after the op's result was sent, and whatever it carries (a suspended generator
        # whose `finally` loops) would run then, outside any deadline (issue 30, h174).
        text = str.__str__(text) if isinstance(text, str) else "<not a str>"
        state = self._state()
        lines, used = state[0], state[1]
        room = self.cap - used
        if room <= 0 or len(lines) >= self.max_lines:
            state[2] += 1
            return
        if len(text) > room:
            text = text[:room] + f"... [cut at the {self.cap}-char per-op log cap]"
        lines.append(text)
        state[1] = used + min(len(text), room)

    def take(self) -> list[str]:
        lines, _, dropped = self._state()
        if dropped:
            cap = f"{self.max_lines} lines" if len(lines) >= self.max_lines else f"{self.cap} chars"
            lines.append(f"[{dropped} more log messages dropped: per-op log cap of {cap}]")
        self._local.state = [[], 0, 0]
        return lines


# --------------------------------------------------------------------------- plain data


def plain_in(value: Any, what: str, depth: int = 0) -> Any:
    """Copy program-supplied data into plain builtins before it reaches library code, so host
    code never calls methods of program-defined subclasses on the program's behalf."""
    if depth > MAX_PLAIN_DEPTH:
        raise ValueError(f"{what} is nested more than {MAX_PLAIN_DEPTH} levels deep")
    if value is None or type(value) in (bool, int, float, str, bytes):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, (list, tuple)):
        return [plain_in(v, what, depth + 1) for v in value]
    if isinstance(value, dict):
        out = {}
        for key, v in value.items():
            if not isinstance(key, str):
                raise TypeError(f"{what}: dict keys must be str, got {type(key).__name__}")
            out[str.__str__(key)] = plain_in(v, what, depth + 1)
        return out
    raise TypeError(f"{what}: unsupported type {type(value).__name__} (use str, int, float, bool, None, list, dict)")


def plain_out(value: Any) -> Any:
    """Library results -> plain builtins (numpy arrays and scalars become lists and numbers)."""
    if value is None or type(value) in (bool, int, float, str, bytes):
        return value
    if isinstance(value, dict):
        return {str(k): plain_out(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_out(v) for v in value]
    if hasattr(value, "tolist"):  # numpy array or scalar
        return plain_out(value.tolist())
    if isinstance(value, str):  # str enums such as chromadb's IncludeEnum
        return str.__str__(value)
    return str(value)


# --------------------------------------------------------------------------- llm, logger, toolkit

def make_toolkit(db: Any, chroma: Any, log: LogSink,
                 ask_engine: Callable[[list[dict[str, str]]], dict[str, Any]]) -> Any:
    """The object passed to KnowledgeBase(toolkit). `ask_engine` sends one LLM request over the
    pipe and returns the engine's reply: {"ok": True, "text": str} or {"ok": False, "kind", "error"}."""

    def text(message: Any) -> str:
        """str(message) as plain characters, inside the op: the program's own str subclass (and
        what it carries) is let go here, while the op's deadline still runs."""
        return str.__str__(str(message))

    class Logger:
        __slots__ = ()

        def debug(self, message: Any) -> None:
            log.add(text(message))

        def info(self, message: Any) -> None:
            log.add(text(message))

        def warning(self, message: Any) -> None:
            log.add("WARNING: " + text(message))

        def error(self, message: Any) -> None:
            log.add("ERROR: " + text(message))

    logger = Logger()

    class Toolkit:
        """db (sqlite3 in memory), chroma (chromadb client), llm_completion, logger."""

        __slots__ = ()

        @property
        def db(self) -> Any:
            return db

        @property
        def chroma(self) -> Any:
            return chroma

        @property
        def logger(self) -> Any:
            return logger

        def llm_completion(self, messages: Any, **kwargs: Any) -> str:
            """One chat completion from the engine's toolkit model. Keyword arguments (model,
            temperature, ...) are accepted for compatibility and ignored: the engine decides."""
            reply = ask_engine(check_messages(messages))
            if reply.get("ok") and isinstance(reply.get("text"), str):
                return reply["text"]
            error = str(reply.get("error") or "no reply")
            if reply.get("kind") == "budget":
                raise LLMBudgetExceeded(error)
            raise LLMError(error)

    return Toolkit()

"""What the worker reports when an op fails: the error dict of a result frame.

`error(...)` is the frame's shape (stage, gate, rule, message, line); `program_error` turns an
exception raised by program code into one, naming the innermost line of the program itself.
Messages are capped: a program decides what its exceptions say, and how long.
"""
from __future__ import annotations

from typing import Any

PROGRAM_FILENAME_PREFIX = "<program"  # the loader compiles program text under "<program...>"
MAX_MESSAGE_CHARS = 2000


def program_line(exc: BaseException) -> int | None:
    """Line in the program of the innermost traceback frame that belongs to the program."""
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(PROGRAM_FILENAME_PREFIX):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except BaseException as inner:  # noqa: BLE001 -- a program's __str__ may itself misbehave
        text = f"<str() failed: {type(inner).__name__}>"
    name = type(exc).__name__
    return (f"{name}: {text}" if text else name)[:MAX_MESSAGE_CHARS]


def error(stage: str, gate: str, rule: str, message: str, line: int | None = None) -> dict[str, Any]:
    return {"stage": stage, "gate": gate, "rule": rule, "message": message[:MAX_MESSAGE_CHARS], "line": line}


def program_error(stage: str, exc: BaseException) -> dict[str, Any]:
    rule = "exit" if isinstance(exc, (SystemExit, KeyboardInterrupt)) else "exception"
    return error(stage, "runtime", rule, describe(exc), program_line(exc))

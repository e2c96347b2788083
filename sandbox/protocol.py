"""What crosses the pipe between the engine and a sandbox worker: records and frames.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON (one object).
Frames travel on a dedicated pipe pair, never on stdout/stderr, so nothing a program prints can be
mistaken for a result. The engine treats every frame from a worker as hostile input: size-capped,
parsed defensively, and checked field by field by its reader (engine/session.py).

Ops, engine -> worker: {"op": "load", ...}, {"op": "write", ...}, {"op": "read", ...} (with
"reader": N, the read() of another program's text that "reader" compiled: engine/session.py),
{"op": "reader", ...}, {"op": "llm_reply", ...}. Worker -> engine: {"op": "ready", ...}, {"op": "stage", ...},
{"op": "llm", ...}, {"op": "result", ...}.
"""
from __future__ import annotations

import json
import os
import select
import struct
import time
from dataclasses import asdict, dataclass, field
from typing import Any

MAX_FRAME_BYTES = 4 * 1024 * 1024
# Containers nested in one frame. The deepest legitimate frame is a load reply: reply -> schema
# -> field -> a default nested at most MAX_DEFAULT_DEPTH (sandbox.contract) more. A deeper frame
# is refused as it is decoded: the engine's reports, records and prompts copy what they receive
# recursively, and a 2,000-character default nested 940 deep crashed them (issue 30).
MAX_FRAME_DEPTH = 24
_HEADER = struct.Struct(">I")


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class SandboxLimits:
    call_timeout_s: float = 60.0  # wall clock per write/read (and for load/init); LLM time excluded
    read_max_chars: int = 3000
    memory_mb: int = 1024  # RLIMIT_AS of the worker
    cpu_s: int = 600  # RLIMIT_CPU of the worker (whole life)
    llm_calls_per_op: int = 1
    max_log_chars: int = 64_000  # per op, logger.debug + print captured
    max_source_bytes: int = 65_536
    # Reads of one program in flight at once (each on a worker thread). 32: the paper's static set
    # (25 reads) overlaps in one wave, so a read that waits on a toolkit call costs one latency, not
    # two (16 before), and a final evaluation of ~190 reads takes 6 waves, not 12. 64 readers do not
    # fit the worker's limits ("can't start new thread", measured); 32 do (a test checks it).
    parallel_reads: int = 32

    def __post_init__(self) -> None:
        for name in ("call_timeout_s", "read_max_chars", "memory_mb", "cpu_s", "max_log_chars",
                     "max_source_bytes", "parallel_reads"):
            if not getattr(self, name) > 0:
                raise ValueError(f"SandboxLimits.{name} must be > 0, got {getattr(self, name)!r}")
        if self.llm_calls_per_op < 0:
            raise ValueError(f"SandboxLimits.llm_calls_per_op must be >= 0, got {self.llm_calls_per_op}")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Verdict:
    ok: bool
    stage: str  # "static"|"compile"|"import"|"init"|"write"|"read"|"ok"
    gate: str  # e.g. "static", "compile", "import", "contract", "runtime", "limits", "protocol"
    rule: str  # short name of the rule that fired, e.g. "timeout", "worker died"
    message: str
    line: int | None = None

    @classmethod
    def from_json(cls, data: Any) -> "Verdict":
        """Build from a worker's error dict, tolerating (and naming) anything malformed."""
        if not isinstance(data, dict):
            return cls(False, "unknown", "protocol", "bad error frame", f"error is {type(data).__name__}")
        line = data.get("line")
        return cls(
            ok=False,
            stage=_short_str(data.get("stage"), "unknown"),
            gate=_short_str(data.get("gate"), "runtime"),
            rule=_short_str(data.get("rule"), "error"),
            message=_short_str(data.get("message"), "", limit=4000),
            line=line if type(line) is int else None,
        )


class SandboxError(Exception):
    """A program failed a gate or an op; `.verdict` says where, which rule, and why; `.logs` holds
    what the program logged in that op before it failed (the reflector wants those too)."""

    def __init__(self, verdict: Verdict, logs: list[str] | None = None) -> None:
        where = f" (line {verdict.line})" if verdict.line else ""
        super().__init__(f"[{verdict.stage}/{verdict.gate}/{verdict.rule}] {verdict.message}{where}")
        self.verdict = verdict
        self.logs = list(logs or [])


@dataclass
class LoadInfo:
    knowledge_item_schema: list[dict]
    query_schema: list[dict]
    constants: dict[str, str]
    layers: list[str]  # isolation layers that were active for this worker
    warnings: list[str] = field(default_factory=list)  # layers that were wanted but unavailable
    logs: list[str] = field(default_factory=list)  # logger.debug/print during import and __init__
    ready_s: float = 0.0  # spawn -> worker ready (interpreter + chromadb warm-up)
    load_s: float = 0.0  # load op: gates, module exec, KnowledgeBase(toolkit)


@dataclass
class OpResult:
    output: str | None  # read(): the returned str; write(): None
    logs: list[str]
    llm_calls: int  # toolkit LLM calls served in this op
    seconds: float
    llm_refused: int = 0  # calls refused (over budget); the program saw an exception for each
    cpu_s: float = 0.0    # the worker thread's CPU in the op, as the worker reports it (within [0, seconds])


def _short_str(value: Any, default: str, limit: int = 200) -> str:
    return value[:limit] if isinstance(value, str) else default


# --------------------------------------------------------------------------- frames


class FrameError(Exception):
    """A frame was oversize, truncated or not a JSON object."""


def encode_frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if len(body) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(body)} bytes exceeds the {MAX_FRAME_BYTES}-byte cap")
    return _HEADER.pack(len(body)) + body


def json_depth(value: Any, stop_at: int | None = None) -> int:
    """How deeply lists, tuples and dicts nest in `value` (a scalar: 0, `[]`: 1, `[[1]]`: 2).
    Level by level, without recursion, so any depth can be measured; with `stop_at`, stops
    counting once the depth passes it."""
    depth, level = 0, [value]
    while level:
        containers = [v for v in level if isinstance(v, (list, tuple, dict))]
        if not containers:
            break
        depth += 1
        if stop_at is not None and depth > stop_at:
            break
        level = [x for c in containers for x in (c.values() if isinstance(c, dict) else c)]
    return depth


def decode_body(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise FrameError(f"frame is not valid UTF-8 JSON: {exc}") from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise FrameError("frame is not a JSON object with a str 'op'")
    if json_depth(message, MAX_FRAME_DEPTH) > MAX_FRAME_DEPTH:
        raise FrameError(f"frame nests containers more than {MAX_FRAME_DEPTH} deep")
    return message


class FrameBuffer:
    """Incremental decoder for a non-blocking reader: feed bytes, take whole frames."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buf += data
        frames = []
        while len(self._buf) >= _HEADER.size:
            (size,) = _HEADER.unpack_from(self._buf)
            if size > MAX_FRAME_BYTES:
                raise FrameError(f"incoming frame announces {size} bytes; the cap is {MAX_FRAME_BYTES}")
            if len(self._buf) < _HEADER.size + size:
                break
            body = bytes(self._buf[_HEADER.size : _HEADER.size + size])
            del self._buf[: _HEADER.size + size]
            frames.append(decode_body(body))
        return frames

    @property
    def pending(self) -> int:
        return len(self._buf)


# Blocking helpers, used by the worker (which has nothing else to do while it waits).


def send_frame(fd: int, message: dict[str, Any]) -> None:
    data = memoryview(encode_frame(message))
    while data:
        written = os.write(fd, data)
        data = data[written:]


def _read_exact(fd: int, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = os.read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise EOFError("pipe closed mid-frame" if chunks or remaining != size else "pipe closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recv_frame(fd: int) -> dict[str, Any]:
    """Read one frame; EOFError when the other side closed the pipe."""
    (size,) = _HEADER.unpack(_read_exact(fd, _HEADER.size))
    if size > MAX_FRAME_BYTES:
        raise FrameError(f"incoming frame announces {size} bytes; the cap is {MAX_FRAME_BYTES}")
    return decode_body(_read_exact(fd, size))


def send_frame_until(fd: int, message: dict[str, Any], deadline: float) -> bool:
    """Write a frame to a non-blocking fd before `deadline` (time.monotonic()).

    The engine uses this so that a worker that stopped reading (busy loop) cannot block it.
    Returns False on timeout; raises BrokenPipeError when the worker is gone.
    """
    data = memoryview(encode_frame(message))
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while data:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        if not poller.poll(max(1, int(remaining * 1000))):
            continue
        try:
            written = os.write(fd, data)
        except BlockingIOError:
            continue
        data = data[written:]
    return True


# --------------------------------------------------------------------------- toolkit LLM requests

_ROLES = frozenset({"system", "user", "assistant"})
# Messages per toolkit LLM call. A prompt's size is not only its characters: 135,000 empty
# messages are "0 characters", a 3.9 MB frame, ~300 MB of dicts in the engine and ~500k tokens
# of message framing at a provider (issue 30). Programs send one to three; few-shot prompts a few
# dozen at most.
MAX_LLM_MESSAGES = 64


def check_messages(messages: Any) -> list[dict[str, str]]:
    """OpenAI chat messages -> a plain list of {"role", "content"} dicts; a TypeError for a wrong
    shape, a ValueError for more than MAX_LLM_MESSAGES messages (counted before any is looked at)."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise TypeError("llm_completion expects a non-empty list of {'role': ..., 'content': ...} dicts")
    if len(messages) > MAX_LLM_MESSAGES:
        raise ValueError(f"llm_completion takes at most {MAX_LLM_MESSAGES} messages per call, got {len(messages)}; "
                         "join them into fewer")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TypeError(f"llm_completion: message {i} is {type(message).__name__}, not a dict")
        role, content = message.get("role"), message.get("content")
        if role not in _ROLES:
            raise TypeError(f"llm_completion: message {i} has role {role!r}; use system, user or assistant")
        if not isinstance(content, str):
            raise TypeError(f"llm_completion: message {i} content is {type(content).__name__}, not str")
        out.append({"role": str.__str__(role), "content": str.__str__(content)})
    return out

"""Engine side of the sandbox: one ProgramSession = one worker process = one knowledge base.

The engine keeps everything a program must not control: the API key and the LLM client (the
worker only sends requests over the pipe), the per-op LLM budget, and the wall-clock deadline.
On a deadline it SIGKILLs the worker's whole process group -- never an exception raised into the
program, which could catch it or be stuck in C code. It reads results only from the dedicated
frame pipe and checks them again (a worker that ran program code is not trusted).

Launchers (sandbox.engine.launch): by default workers are forked from one pre-warmed fork server per
engine process (sandbox.engine.forkserver; tens of ms to a ready worker), falling back to a fresh
interpreter per worker (~1 s). With the fork server, workers die with the server and the server
with the engine, whichever thread started them. With `SubprocessLauncher` the worker dies with
the *thread* that started it (PR_SET_PDEATHSIG follows the parent thread), so start such sessions
from a thread that outlives them -- e.g. a long-lived pool thread.
"""
from __future__ import annotations

import logging
import os
import select
import signal
import subprocess
import threading
import time
import weakref
from typing import Any, Callable, Sequence

from sandbox.contract import DEFAULT_ALLOWED_IMPORTS
from sandbox.engine.forkserver import ForkServerLauncher
from sandbox.engine.launch import Launcher, SubprocessLauncher, WorkerProcess, exit_text, spawn
from sandbox.engine.launchers import default_launcher, set_default_launcher
from sandbox.protocol import (FrameBuffer, FrameError, LoadInfo, OpResult, SandboxError, SandboxLimits,
                              Verdict, encode_frame, send_frame_until)
from sandbox.worker.toolkit import check_messages

__all__ = ["DEFAULT_ALLOWED_IMPORTS", "ForkServerLauncher", "LLMFn", "Launcher", "LoadInfo", "OpResult",
           "ProgramSession", "SandboxError", "SandboxLimits", "SubprocessLauncher", "Verdict",
           "default_launcher", "set_default_launcher"]

LLMFn = Callable[[list[dict]], str]
log = logging.getLogger(__name__)
STARTUP_TIMEOUT_S = 60.0  # interpreter (or fork server) + chromadb warm-up; not program code
LLM_PROMPT_MAX_CHARS = 200_000
LLM_REPLY_MAX_CHARS = 1_000_000
KEEPER_GRACE_S = 2.0
OUTPUT_TAIL_CHARS = 64_000  # worker stdout/stderr kept for diagnostics, never parsed
_LOAD_STAGES = ("static", "compile", "import", "init")
# Layers the engine side itself provides, whatever the worker reports.
_ENGINE_LAYERS = ["worker_process", "clean_env", "process_group_kill", "parent_deadline",
                  "llm_budget_in_parent", "frame_pipe"]


class ProgramSession:
    """One memory program loaded in its own worker. Not thread-safe for concurrent ops on one
    session (ops are serialised); many sessions may run in parallel."""

    def __init__(self, source: str, *, allowed_imports: Sequence[str] = DEFAULT_ALLOWED_IMPORTS,
                 limits: SandboxLimits = SandboxLimits(), llm: LLMFn | None = None,
                 launcher: Launcher | None = None) -> None:
        self.source = source
        self.allowed_imports = list(allowed_imports)
        self.limits = limits
        self.llm = llm
        self.launcher = launcher or default_launcher()
        self._worker: WorkerProcess | None = None
        self._finalizer: weakref.finalize | None = None
        self._frames = FrameBuffer()
        self._queue: list[dict[str, Any]] = []
        self._tail = ""
        self._dead_reason = ""
        self._lock = threading.Lock()
        self._started = False
        self.info: LoadInfo | None = None

    # ----------------------------------------------------------------- public API

    @property
    def pid(self) -> int | None:
        """The process running the program (as the engine sees it), once started."""
        return self._worker.program_pid() if self._worker else None

    @property
    def group_pid(self) -> int | None:
        """The worker's process group (and the launched process: the worker's keeper when it has
        a pid namespace of its own)."""
        return self._worker.pid if self._worker else None

    def alive(self) -> bool:
        """True while the worker can still take operations (started and not killed or dead)."""
        return bool(self._started and self._finalizer is not None and self._finalizer.alive)

    def worker_output(self) -> str:
        """The tail of the worker's stdout/stderr (interpreter warnings, crash tracebacks)."""
        return self._tail

    def start(self) -> LoadInfo:
        """Spawn the worker, gate and exec the program, build KnowledgeBase(toolkit)."""
        with self._lock:
            if self._started:
                raise RuntimeError("ProgramSession.start() may be called once")
            self._started = True
            self._intake()
            t0 = time.monotonic()
            ready = self._spawn()
            ready_s = time.monotonic() - t0
            reply, _, _ = self._exchange({"op": "load", "source": self.source,
                                          "allowed_imports": self.allowed_imports}, "import", budget=0)
            if not reply.get("ok"):
                self._fail(self._error_verdict(reply, "import", _LOAD_STAGES), self._logs(reply), kill=True)
            self.info = LoadInfo(
                knowledge_item_schema=_list_of_dicts(reply.get("knowledge_item_schema")),
                query_schema=_list_of_dicts(reply.get("query_schema")),
                constants={k: v for k, v in (reply.get("constants") or {}).items()
                           if isinstance(k, str) and isinstance(v, str)},
                layers=[*_ENGINE_LAYERS, *_str_list(reply.get("layers"))],
                warnings=_str_list(ready.get("warnings") or []) + _str_list(reply.get("warnings") or []),
                logs=self._logs(reply), ready_s=ready_s, load_s=time.monotonic() - t0 - ready_s)
            self.info.warnings = list(dict.fromkeys(self.info.warnings))
            _log_layer_warnings(self.info.warnings)
            return self.info

    def write(self, item: dict, raw_text: str) -> OpResult:
        if not isinstance(item, dict) or not isinstance(raw_text, str):
            raise TypeError("write(item: dict, raw_text: str)")
        return self._op({"op": "write", "item": item, "raw_text": raw_text}, "write")

    def read(self, query: dict) -> OpResult:
        if not isinstance(query, dict):
            raise TypeError("read(query: dict)")
        result = self._op({"op": "read", "query": query}, "read")
        output = result.output
        if type(output) is not str:  # checked in the worker too; the worker is not trusted
            self._fail(Verdict(False, "read", "contract", "read output not str",
                               f"read() returned {type(output).__name__}, not str"), result.logs)
        if len(output) > self.limits.read_max_chars:
            self._fail(Verdict(False, "read", "limits", "read output too long",
                               f"read() returned {len(output)} characters; the limit is {self.limits.read_max_chars}"),
                       result.logs)
        return result

    def close(self) -> None:
        """Kill the worker's process group and remove its scratch dir. Idempotent."""
        if self._finalizer is not None:
            self._finalizer()
        self._dead_reason = self._dead_reason or "session closed"

    def __enter__(self) -> "ProgramSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ----------------------------------------------------------------- internals

    def _intake(self) -> None:
        """Spec L0: cheap checks only. No parsing in the engine (a deep AST can exhaust it)."""
        if not isinstance(self.source, str):
            self._fail(Verdict(False, "static", "intake", "source not str", f"source is {type(self.source).__name__}"))
        size = len(self.source.encode("utf-8", "surrogatepass"))
        if size > self.limits.max_source_bytes:
            self._fail(Verdict(False, "static", "intake", "source too large",
                               f"source is {size} bytes; the limit is {self.limits.max_source_bytes}"))
        if "\x00" in self.source:
            self._fail(Verdict(False, "static", "intake", "NUL byte", "source contains a NUL byte"))

    def _spawn(self) -> dict[str, Any]:
        self._worker = spawn(self.launcher, self.limits)
        # Kills the worker even if the engine drops the session without close() (or exits).
        self._finalizer = weakref.finalize(self, self._worker.end)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        ready = self._next_frame(deadline, "import", waiting_for="worker start-up")
        if ready.get("op") != "ready":
            self._fail(Verdict(False, "import", "protocol", "bad frame", f"expected 'ready', got {ready.get('op')!r}"), kill=True)
        return ready

    def _op(self, request: dict[str, Any], stage: str) -> OpResult:
        with self._lock:
            if self._worker is None or self._dead_reason:
                reason = self._dead_reason or "start() was not called"
                raise SandboxError(Verdict(False, stage, "runtime", "worker not running", reason))
            try:  # a caller's bad argument must not cost the worker
                encode_frame(request)
            except FrameError as exc:
                raise ValueError(f"{stage}() arguments are too large to send: {exc}") from None
            except (TypeError, ValueError) as exc:
                raise TypeError(f"{stage}() arguments must be JSON-serialisable: {exc}") from None
            t0 = time.monotonic()
            reply, calls, refused = self._exchange(request, stage, budget=self.limits.llm_calls_per_op)
            logs = self._logs(reply)
            if not reply.get("ok"):
                self._fail(self._error_verdict(reply, stage, (stage,)), logs)
            output = reply.get("output") if stage == "read" else None  # read() re-checks it
            return OpResult(output=output, logs=logs, llm_calls=calls, seconds=time.monotonic() - t0, llm_refused=refused)

    def _exchange(self, request: dict[str, Any], stage: str, budget: int) -> tuple[dict[str, Any], int, int]:
        """Send one op and serve the worker's LLM requests until its result frame arrives."""
        try:
            return self._exchange_frames(request, stage, budget)
        except SandboxError:
            raise
        except BaseException:
            # E.g. KeyboardInterrupt inside the llm callable: the worker is mid-op and out of step
            # with us; it cannot be trusted with another op.
            self._kill()
            raise

    def _exchange_frames(self, request: dict[str, Any], stage: str, budget: int) -> tuple[dict[str, Any], int, int]:
        deadline = time.monotonic() + self.limits.call_timeout_s
        if self._queue:  # a frame nobody asked for: the worker is out of step
            self._fail(Verdict(False, stage, "protocol", "bad frame", "unsolicited frame from the worker"), kill=True)
        self._send(request, deadline, stage)
        served = refused = asked = 0
        while True:
            frame = self._next_frame(deadline, stage)
            op = frame.get("op")
            if op == "result":
                if time.monotonic() > deadline:  # in by a hair is still late: the limit is strict
                    self._timeout(stage)
                return frame, served, refused
            if op == "stage" and frame.get("stage") in _LOAD_STAGES:
                stage = frame["stage"]
            elif op == "llm":
                asked += 1
                started = time.monotonic()
                reply = self._serve_llm(frame.get("messages"), asked, budget, stage)
                served += reply["ok"]
                refused += reply.get("kind") == "budget"
                deadline += time.monotonic() - started  # the provider's time is not the program's
                self._send(reply, deadline, stage)
            else:
                self._fail(Verdict(False, stage, "protocol", "bad frame", f"unexpected frame op {op!r}"), kill=True)

    def _serve_llm(self, messages: Any, number: int, budget: int, stage: str) -> dict[str, Any]:
        if number > budget:
            where = "during import/__init__" if stage in _LOAD_STAGES else f"per {stage}()"
            return {"op": "llm_reply", "ok": False, "kind": "budget",
                    "error": f"toolkit LLM budget exhausted: {budget} call(s) allowed {where}; this was call {number}"}
        try:
            checked = check_messages(messages)
        except TypeError as exc:
            return {"op": "llm_reply", "ok": False, "kind": "error", "error": str(exc)}
        size = sum(len(m["content"]) for m in checked)
        if size > LLM_PROMPT_MAX_CHARS:
            return {"op": "llm_reply", "ok": False, "kind": "error",
                    "error": f"prompt of {size} characters exceeds the {LLM_PROMPT_MAX_CHARS}-character cap"}
        if self.llm is None:
            return {"op": "llm_reply", "ok": False, "kind": "error", "error": "no toolkit LLM is configured"}
        try:
            text = self.llm(checked)
        except Exception as exc:  # noqa: BLE001 -- the provider's failure becomes the program's exception
            return {"op": "llm_reply", "ok": False, "kind": "error", "error": f"{type(exc).__name__}: {exc}"[:2000]}
        if not isinstance(text, str):
            return {"op": "llm_reply", "ok": False, "kind": "error", "error": f"toolkit LLM returned {type(text).__name__}"}
        return {"op": "llm_reply", "ok": True, "text": text[:LLM_REPLY_MAX_CHARS]}

    def _send(self, message: dict[str, Any], deadline: float, stage: str) -> None:
        assert self._worker is not None
        try:
            sent = send_frame_until(self._worker.frames_out, message, deadline)
        except BrokenPipeError:
            self._worker_died(stage)
        except FrameError as exc:
            self._fail(Verdict(False, stage, "protocol", "frame too large", str(exc)))
        if not sent:
            self._timeout(stage)

    def _next_frame(self, deadline: float, stage: str, waiting_for: str = "") -> dict[str, Any]:
        """Next frame from the worker; drains its output meanwhile; enforces the deadline."""
        worker = self._worker
        assert worker is not None
        poller = select.poll()
        poller.register(worker.frames_in, select.POLLIN)
        output_open = True
        poller.register(worker.output, select.POLLIN)
        while not self._queue:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._timeout(stage, waiting_for)
            for fd, _ in poller.poll(max(1, int(remaining * 1000))):
                if fd == worker.output and output_open:
                    if not self._drain_output():
                        poller.unregister(worker.output)
                        output_open = False
                elif fd == worker.frames_in:
                    try:
                        data = os.read(worker.frames_in, 1 << 20)
                    except BlockingIOError:
                        continue
                    if not data:
                        self._worker_died(stage)
                    try:
                        self._queue.extend(self._frames.feed(data))
                    except FrameError as exc:
                        self._fail(Verdict(False, stage, "protocol", "bad frame", str(exc)), kill=True)
        return self._queue.pop(0)

    def _drain_output(self) -> bool:
        """Read what the worker printed; False at EOF."""
        assert self._worker is not None
        while True:
            try:
                data = os.read(self._worker.output, 1 << 16)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not data:
                return False
            self._tail = (self._tail + data.decode("utf-8", "replace"))[-OUTPUT_TAIL_CHARS:]

    def _timeout(self, stage: str, waiting_for: str = "") -> None:
        limit = STARTUP_TIMEOUT_S if waiting_for else self.limits.call_timeout_s
        what = waiting_for or ("load" if stage in _LOAD_STAGES else f"{stage}()") + f" (stage {stage})"
        self._fail(Verdict(False, stage, "limits", "timeout",
                           f"{what} exceeded the {limit:g}-second wall-clock limit; the worker was killed"), kill=True)

    def _worker_died(self, stage: str) -> None:
        worker = self._worker
        assert worker is not None
        # The pipe closed because the worker died. Its keeper (sandbox.jail.pidns) then ends the same
        # way within milliseconds; a group kill now would overwrite that status with SIGKILL.
        try:
            worker.proc.wait(timeout=KEEPER_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        worker.kill_group()  # whatever is left of it; then collect its last words
        poller = select.poll()
        poller.register(worker.output, select.POLLIN)
        until = time.monotonic() + 2.0
        while time.monotonic() < until and poller.poll(200) and self._drain_output():
            pass
        status = self._kill()
        tail = self._tail[-2000:].strip()
        rule, gate = "worker died", "runtime"
        if status == -signal.SIGXCPU:  # RLIMIT_CPU soft limit (limits.set_rlimits)
            rule, gate = "cpu limit", "limits"
        message = f"worker {exit_text(status)} before sending a result"
        self._fail(Verdict(False, stage, gate, rule, message + (f"; its last output:\n{tail}" if tail else "")))

    def _kill(self) -> int | None:
        if self._finalizer is None or not self._finalizer.alive:
            return None
        status = self._finalizer()  # kill the group, reap, close pipes, remove the scratch dir
        self._dead_reason = self._dead_reason or "worker killed"
        return status

    def _fail(self, verdict: Verdict, logs: list[str] | None = None, kill: bool = False) -> None:
        if kill:
            self._kill()
        if self._worker is not None and not (self._finalizer and self._finalizer.alive):
            self._dead_reason = f"{verdict.stage}: {verdict.rule}: {verdict.message}"[:500]
        raise SandboxError(verdict, logs)

    def _error_verdict(self, reply: dict[str, Any], stage: str, stages: tuple[str, ...]) -> Verdict:
        verdict = Verdict.from_json(reply.get("error"))
        if verdict.stage not in stages:  # the worker may not relabel an op as another stage
            verdict.stage = stage
        return verdict

    def _logs(self, reply: dict[str, Any]) -> list[str]:
        logs, used = [], 0
        for line in _str_list(reply.get("logs") or []):
            if used >= self.limits.max_log_chars + 200:  # the worker caps too; this is the backstop
                break
            logs.append(line)
            used += len(line)
        return logs


_warned_layers: set[str] = set()
_warned_lock = threading.Lock()


def _log_layer_warnings(warnings: list[str]) -> None:
    """Log each missing layer once per engine process: a run starts hundreds of workers, and on a
    machine without (say) root every one of them lacks the same layers. Each session's LoadInfo
    still lists all of its warnings."""
    for warning in warnings:
        layer = warning.split(":", 1)[0]
        with _warned_lock:
            if layer in _warned_layers:
                continue
            _warned_layers.add(layer)
        log.warning("sandbox layer unavailable: %s (logged once per process)", warning)


def _str_list(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _list_of_dicts(value: Any) -> list[dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []



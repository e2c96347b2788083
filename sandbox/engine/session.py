"""Engine side of the sandbox: one ProgramSession = one worker process = one knowledge base.

The engine keeps everything a program must not control: the API key and the LLM client (the
worker only sends requests over the pipe), the per-op LLM budget, and the wall-clock deadline.
On a deadline it SIGKILLs the worker's whole process group -- never an exception raised into the
program, which could catch it or be stuck in C code. It reads results only from the dedicated
frame pipe and checks them again (a worker that ran program code is not trusted).

Launchers (sandbox.engine.launch): by default workers fork from one pre-warmed fork server per engine
process (sandbox.engine.forkserver; tens of ms), else a fresh interpreter each (~1 s). Forked
workers die with the server, the server with the engine. With `SubprocessLauncher` a worker dies
with the *thread* that started it (PR_SET_PDEATHSIG): start those from a long-lived thread.
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
from sandbox.engine.channel import GONE, TIMEOUT, EngineChannel
from sandbox.engine.embed_proxy import EmbedFn, end_session, serve_embed_request
from sandbox.engine.forkserver import ForkServerLauncher
from sandbox.engine.intake import intake_verdict
from sandbox.engine.launch import Launcher, SubprocessLauncher, WorkerProcess, exit_text, last_words, spawn
from sandbox.engine.launchers import default_launcher, set_default_launcher
from sandbox.engine.layers import ENGINE_LAYERS, log_layer_warnings
from sandbox.engine.llm_proxy import serve_llm_request
from sandbox.engine.received import (check_load_reply, check_logs, check_str_list, read_output_problem,
                                     reported_cpu)
from sandbox.engine.spares import SPARES
from sandbox.protocol import (FrameError, LoadInfo, OpResult, SandboxError, SandboxLimits, Verdict,
                              encode_frame)

__all__ = ["DEFAULT_ALLOWED_IMPORTS", "EmbedFn", "ForkServerLauncher", "LLMFn", "Launcher", "LoadInfo", "OpResult",
           "ProgramSession", "SandboxError", "SandboxLimits", "SubprocessLauncher", "Verdict",
           "default_launcher", "set_default_launcher"]

LLMFn = Callable[[list[dict]], str]
log = logging.getLogger(__name__)
STARTUP_TIMEOUT_S = 60.0  # interpreter (or fork server) + chromadb warm-up; not program code
KEEPER_GRACE_S = 2.0
OUTPUT_TAIL_CHARS = 64_000  # worker stdout/stderr kept for diagnostics, never parsed
_LOAD_STAGES = ("static", "compile", "import", "init")


class ProgramSession:
    """One memory program loaded in its own worker; many sessions may run in parallel.

    Threads may call `read` at the same time: up to `limits.parallel_reads` reads are in flight in
    the worker at once, each with its own deadline and LLM budget (sandbox.engine.channel routes
    the frames). `start` and `write` are not meant to overlap other ops: the caller orders them
    (mstar's evaluator writes every episode before the first read).

    `embed` (texts -> vectors), when given, serves the program's chroma collections: the worker
    asks for the vectors of each add/query batch (sandbox.engine.embed_proxy) and the model stays
    in this process. Without it the worker hashes words itself (sandbox.worker.embedding).
    `embed_label` names the function to the worker's collections. An `embed` with a `close()`
    has it called once, when the worker ends (closed, killed, or the session dropped): what it
    keeps for this session can go then."""

    def __init__(self, source: str, *, allowed_imports: Sequence[str] = DEFAULT_ALLOWED_IMPORTS,
                 limits: SandboxLimits = SandboxLimits(), llm: LLMFn | None = None,
                 launcher: Launcher | None = None, embed: EmbedFn | None = None,
                 embed_label: str = "engine") -> None:
        self.source, self.allowed_imports, self.limits, self.llm = source, list(allowed_imports), limits, llm
        self.embed, self.embed_label = embed, embed_label
        self._embed_dims: list[int] = []              # the vectors' dimension, once known
        self.launcher = launcher or default_launcher()
        self._worker: WorkerProcess | None = None
        self._finalizer: weakref.finalize | None = None
        self._channel: EngineChannel | None = None
        self._tail, self._dead_reason = "", ""
        self._lock = threading.Lock()                 # start() runs once
        self._ids = iter(range(1, 1 << 62))           # op ids; the start-up frame is op 0
        self._ids_lock = threading.Lock()
        self._read_slots = threading.BoundedSemaphore(limits.parallel_reads)
        self._died_lock = threading.Lock()
        self._died: Verdict | None = None             # why the worker died (shared by every waiter)
        self._started = False
        self._closed = False                          # close() was called, maybe while start() ran
        self.info: LoadInfo | None = None

    # ----------------------------------------------------------------- public API

    @property
    def pid(self) -> int | None:
        """The process running the program (as the engine sees it), once started."""
        return self._worker.program_pid() if self._worker else None

    @property
    def group_pid(self) -> int | None:
        """The worker's process group (and the launched process: the worker itself when forked, its
        keeper when a fresh worker split itself into a pid namespace)."""
        return self._worker.pid if self._worker else None

    def alive(self) -> bool:
        """True while the worker can still take operations (started and not killed or dead)."""
        return bool(self._started and not self._closed and self._finalizer is not None and self._finalizer.alive)

    def worker_output(self) -> str:
        """The tail of the worker's stdout/stderr (interpreter warnings, crash tracebacks)."""
        return self._tail

    def start(self) -> LoadInfo:
        """Spawn the worker, gate and exec the program, build KnowledgeBase(toolkit)."""
        with self._lock:
            if self._started:
                raise RuntimeError("ProgramSession.start() may be called once")
            self._started = True
            self._refuse_if_closed()   # closed before its start began: spawn nothing
            refused = intake_verdict(self.source, self.limits)   # spec L0 (sandbox.engine.intake)
            if refused is not None:
                self._fail(refused)
            t0 = time.monotonic()
            ready = self._spawn()
            ready_s = time.monotonic() - t0
            load = {"op": "load", "source": self.source, "allowed_imports": self.allowed_imports}
            if self.embed is not None:
                load["embed"] = str(self.embed_label)
            reply, _, _ = self._exchange(load, "import", budget=0)
            if not reply.get("ok"):
                self._fail(self._error_verdict(reply, "import", _LOAD_STAGES), self._logs(reply), kill=True)
            try:
                checked = check_load_reply(reply)   # the worker is not trusted: measured again here
            except SandboxError as exc:
                self._fail(exc.verdict, self._logs(reply), kill=True)
            layer_warnings = list(dict.fromkeys(check_str_list(ready.get("warnings"))
                                                + check_str_list(reply.get("warnings"))))
            self.info = LoadInfo(
                knowledge_item_schema=checked.knowledge_item_schema, query_schema=checked.query_schema,
                constants=checked.constants, layers=[*ENGINE_LAYERS, *check_str_list(reply.get("layers"))],
                warnings=layer_warnings + checked.warnings,
                logs=self._logs(reply), ready_s=ready_s, load_s=time.monotonic() - t0 - ready_s)
            log_layer_warnings(layer_warnings)  # not the "contract:" notes: they are not missing layers
            return self.info

    def write(self, item: dict, raw_text: str) -> OpResult:
        if not isinstance(item, dict) or not isinstance(raw_text, str):
            raise TypeError("write(item: dict, raw_text: str)")
        return self._op({"op": "write", "item": item, "raw_text": raw_text}, "write")

    def reader(self, source: str, line_shift: int = 0) -> int:
        """Make the read() of `source` -- this program but for read() (knowledge_identity.writer_identity
        in mstar) -- runnable here, its lines moved by `line_shift`: its number for `read(reader=...)`."""
        number = self._op({"op": "reader", "source": source, "line_shift": line_shift}, "reader").output
        if type(number) is not int:   # the worker is not trusted
            self._fail(Verdict(False, "reader", "protocol", "bad reply", f"reader number {number!r}"))
        return number

    def read(self, query: dict, reader: int | None = None) -> OpResult:
        if not isinstance(query, dict):
            raise TypeError("read(query: dict)")
        result = self._op({"op": "read", "query": query, **({} if reader is None else {"reader": reader})}, "read")
        problem = read_output_problem(result.output, self.limits.read_max_chars)   # the worker checked it too
        if problem is not None:
            self._fail(problem, result.logs)
        return result

    def close(self) -> None:
        """Kill the worker's process group and remove its scratch dir. Idempotent. Closed while start()
        runs on another thread (a dropped prestart), start() kills what it spawned and raises."""
        self._closed = True
        self._dead_reason = self._dead_reason or "session closed"
        if self._channel is not None:
            self._channel.shutdown(self._dead_reason)
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> "ProgramSession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ----------------------------------------------------------------- internals

    def _spawn(self) -> dict[str, Any]:
        # A worker launched ahead, when the engine keeps spares (sandbox.engine.spares).
        self._worker = SPARES.take(self.launcher, self.limits) or spawn(self.launcher, self.limits)
        # Kills the worker even if the engine drops the session without close() (or exits).
        self._finalizer = weakref.finalize(self, end_session, self._worker.end, self.embed)
        self._channel = EngineChannel(self._worker.frames_in, self._worker.frames_out, self._worker.output,
                                      self._keep_output)
        self._refuse_if_closed()   # after the finalizer is set: close() or this kills the worker
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        self._channel.open(0)
        ready = self._next_frame(0, deadline, "import", waiting_for="worker start-up")
        self._channel.close_op(0)
        if ready.get("op") != "ready":
            self._fail(Verdict(False, "import", "protocol", "bad frame", f"expected 'ready', got {ready.get('op')!r}"), kill=True)
        return ready

    def _op(self, request: dict[str, Any], stage: str) -> OpResult:
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
        slots = self._read_slots if stage == "read" else None
        if slots is not None:
            slots.acquire()
        try:
            reply, calls, refused = self._exchange(request, stage, budget=self.limits.llm_calls_per_op)
        finally:
            if slots is not None:
                slots.release()
        logs = self._logs(reply)
        if not reply.get("ok"):
            self._fail(self._error_verdict(reply, stage, (stage,)), logs)
        output = reply.get("output") if stage in ("read", "reader") else None  # the caller checks it
        seconds = time.monotonic() - t0
        return OpResult(output=output, logs=logs, llm_calls=calls, seconds=seconds, llm_refused=refused,
                        cpu_s=reported_cpu(reply.get("cpu_s"), seconds))

    def _exchange(self, request: dict[str, Any], stage: str, budget: int) -> tuple[dict[str, Any], int, int]:
        """Send one op and serve the worker's LLM requests until its result frame arrives."""
        with self._ids_lock:
            op_id = next(self._ids)
        assert self._channel is not None
        self._channel.open(op_id)
        try:
            return self._exchange_frames({**request, "id": op_id}, op_id, stage, budget)
        except SandboxError:
            raise
        except BaseException:
            # E.g. KeyboardInterrupt inside the llm callable: the worker is mid-op and out of step
            # with us; it cannot be trusted with another op.
            self._kill()
            raise
        finally:
            self._channel.close_op(op_id)

    def _exchange_frames(self, request: dict[str, Any], op_id: int, stage: str,
                         budget: int) -> tuple[dict[str, Any], int, int]:
        deadline = time.monotonic() + self.limits.call_timeout_s
        self._send(request, deadline, stage)
        served = refused = asked = embedded = 0
        while True:
            frame = self._next_frame(op_id, deadline, stage)
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
                where = "during import/__init__" if stage in _LOAD_STAGES else f"per {stage}()"
                reply = serve_llm_request(self.llm, frame.get("messages"), asked, budget, where)
                served += reply["ok"]
                refused += reply.get("kind") == "budget"
                deadline += time.monotonic() - started  # the provider's time is not the program's
                self._send({**reply, "id": op_id}, deadline, stage)
            elif op == "embed":   # engine work done for the program: inside its deadline (issue 30)
                texts = frame.get("texts")
                reply = serve_embed_request(self.embed, texts, embedded, self._embed_dims)
                embedded += len(texts) if isinstance(texts, list) else 0
                if time.monotonic() > deadline:
                    self._timeout(stage)
                self._send({**reply, "id": op_id}, deadline, stage)
            else:
                self._fail(Verdict(False, stage, "protocol", "bad frame", f"unexpected frame op {op!r}"), kill=True)

    def _send(self, message: dict[str, Any], deadline: float, stage: str) -> None:
        assert self._channel is not None
        try:
            sent = self._channel.send(message, deadline)
        except (BrokenPipeError, OSError) as exc:
            if isinstance(exc, BrokenPipeError) or not self._channel.closed:
                self._worker_died(stage)
            self._gone(stage)
        except FrameError as exc:
            self._fail(Verdict(False, stage, "protocol", "frame too large", str(exc)))
        if not sent:
            self._timeout(stage)

    def _next_frame(self, op_id: int, deadline: float, stage: str, waiting_for: str = "") -> dict[str, Any]:
        """The next frame of this op; enforces its deadline; drains the worker's output meanwhile."""
        assert self._channel is not None
        frame = self._channel.next_frame(op_id, deadline)
        if frame == TIMEOUT:
            self._timeout(stage, waiting_for)
        if frame == GONE:
            if self._channel.eof and not self._channel.closed:
                self._worker_died(stage)
            if self._channel.closed.startswith("bad frame"):
                self._fail(Verdict(False, stage, "protocol", "bad frame", self._channel.closed[11:]), kill=True)
            self._gone(stage)
        return frame

    def _keep_output(self, data: bytes) -> None:
        self._tail = (self._tail + data.decode("utf-8", "replace"))[-OUTPUT_TAIL_CHARS:]

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
            self._keep_output(data)

    def _gone(self, stage: str) -> None:
        """This op's worker ended while it waited (another op timed out or crashed it)."""
        verdict = self._died
        if verdict is None:
            reason = self._dead_reason or (self._channel.closed if self._channel else "") or "worker killed"
            verdict = Verdict(False, stage, "runtime", "worker not running",
                              f"the worker ended while this {stage}() was running: {reason}")
        raise SandboxError(Verdict(False, stage, verdict.gate, verdict.rule, verdict.message, verdict.line))

    def _timeout(self, stage: str, waiting_for: str = "") -> None:
        limit = STARTUP_TIMEOUT_S if waiting_for else self.limits.call_timeout_s
        what = waiting_for or ("load" if stage in _LOAD_STAGES else f"{stage}()") + f" (stage {stage})"
        self._fail(Verdict(False, stage, "limits", "timeout",
                           f"{what} exceeded the {limit:g}-second wall-clock limit; the worker was killed"), kill=True)

    def _worker_died(self, stage: str) -> None:
        with self._died_lock:
            if self._died is None:
                self._died = self._collect_death(stage)
        self._fail(Verdict(False, stage, self._died.gate, self._died.rule, self._died.message))

    def _collect_death(self, stage: str) -> Verdict:
        worker = self._worker
        assert worker is not None and self._channel is not None
        self._channel.shutdown("worker died")
        # The pipe closed because the worker died. Its keeper, if it has one (sandbox.jail.pidns),
        # then ends the same way within milliseconds; a group kill now would overwrite that status
        # with SIGKILL.
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
        tail = last_words(self._tail)
        rule, gate = "worker died", "runtime"
        if status == -signal.SIGXCPU:  # RLIMIT_CPU soft limit (limits.set_rlimits)
            rule, gate = "cpu limit", "limits"
        message = f"worker {exit_text(status)} before sending a result"
        return Verdict(False, stage, gate, rule, message + (f"; the end of its output (written by the worker, which "
                                                              f"ran program code; engine paths hidden):\n{tail}" if tail else ""))

    def _refuse_if_closed(self) -> None:
        if self._closed:
            self._fail(Verdict(False, "import", "runtime", "worker not running", "session closed"), kill=True)

    def _kill(self) -> int | None:
        if self._finalizer is None or not self._finalizer.alive:
            return None
        if self._channel is not None:  # no thread may be reading when the descriptors close
            self._channel.shutdown(self._dead_reason or "worker killed")
        status = self._finalizer()  # kill the group, reap, close pipes, remove the scratch dir
        self._dead_reason = self._dead_reason or "worker killed"
        return status

    def _fail(self, verdict: Verdict, logs: list[str] | None = None, kill: bool = False) -> None:
        reason = f"{verdict.stage}: {verdict.rule}: {verdict.message}"[:500]
        if kill:
            self._dead_reason = self._dead_reason or reason  # what other waiting ops will be told
            self._kill()
        if self._worker is not None and not (self._finalizer and self._finalizer.alive):
            self._dead_reason = self._dead_reason or reason
        raise SandboxError(verdict, logs)

    def _error_verdict(self, reply: dict[str, Any], stage: str, stages: tuple[str, ...]) -> Verdict:
        verdict = Verdict.from_json(reply.get("error"))
        if verdict.stage not in stages:  # the worker may not relabel an op as another stage
            verdict.stage = stage
        return verdict

    def _logs(self, reply: dict[str, Any]) -> list[str]:
        return check_logs(reply.get("logs"), self.limits)

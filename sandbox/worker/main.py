"""The sandbox worker: one process holding one memory program's knowledge base.

Started by engine/session.py through a launcher (never imported by the engine). Life of a worker:
  0. own pid namespace, as pid 2 of a new space with its own /proc. A forked worker is born there:
     its fork server made the space and moves it and its init into a cgroup of their own
     (sandbox.worker.fork_jail, sandbox.jail.cgroups). A fresh interpreter splits itself: the
     launched process stays outside as the keeper and does that move (sandbox.jail.pidns);
  1. own network namespace (no network at all), no_new_privs + rlimits (hard == soft),
     faulthandler for crash tails on stderr;
  2. import everything it will ever need and warm chromadb up (one client for the whole life);
  3. "ready" frame -> engine;
  4. "load": import the engine's allowed modules, take the cgroup report, chroot into
     the scratch dir, drop to uid 65534 (then PDEATHSIG, which a credential change clears), install
     the seccomp filter (sandbox.jail.seccomp), gate + exec the program (sandbox.worker.loader),
     KnowledgeBase(toolkit);
  5. "write"/"read" until the engine kills it. Every program call is wrapped in
     `except BaseException` and reported as an error frame -- SystemExit included -- and each
     result carries the op's thread CPU (`cpu_s`: program work, not waiting). Load and
     writes run on the main thread, in the order they come; reads may overlap, each on a thread
     of a small pool (at most `limits.parallel_reads`), so the LLM calls they wait on are in
     flight together (sandbox.worker.channel routes the replies), and they take turns on the
     CPU between those waits (sandbox.worker.baton).

The worker trusts the engine's frames; the engine trusts nothing the worker sends.
"""
from __future__ import annotations

import argparse
import faulthandler
import importlib
import json
import os
import sys
import threading
import time
import traceback
from typing import Any

from sandbox.jail import limits as oslimits
from sandbox.jail import cgroups, pidns, seccomp
from sandbox.protocol import FrameError, SandboxLimits
from sandbox.worker.baton import RESUMING, Baton
from sandbox.worker.channel import WorkerChannel
from sandbox.worker.errors import describe, error, program_error, program_line
from sandbox.worker.readers import ReadPool
from sandbox.worker.toolkit import LogSink, OpClock, make_toolkit

# Modules imported lazily by stdlib code a program may call; after the uid drop the interpreter's
# files may be unreadable, so they are imported up front.
# Other codecs than these fail with "unknown encoding" inside programs (a known, rare gap).
LAZY_STDLIB = ("_strptime", "encodings.latin_1", "encodings.ascii", "encodings.utf_16",
               "encodings.utf_32", "encodings.utf_8_sig", "encodings.cp1252", "encodings.idna",
               "unicodedata", "linecache", "tokenize")
# The sqlite progress handler fires a little before the engine's SIGKILL, so a runaway query
# ends in a clean exception rather than a killed worker when the program would otherwise finish.
_DB_DEADLINE_FRACTION = 0.9
# Stack of each read thread: deep enough for the recursion limit of restricted code, small enough
# that a full pool stays far below RLIMIT_AS.
READ_THREAD_STACK = 4 * 1024 * 1024


class Worker:
    def __init__(self, in_fd: int, out_fd: int, parent_pid: int, limits: SandboxLimits, home: str,
                 net_namespace: bool = True, layers: list[str] | None = None,
                 warnings: list[str] | None = None, keeper_report_fd: int | None = None) -> None:
        self.in_fd, self.out_fd, self.parent_pid = in_fd, out_fd, parent_pid
        self.channel = WorkerChannel(in_fd, out_fd)
        self.channel.on_idle = oslimits.return_freed_heap   # between bursts of ops
        self.readers: ReadPool | None = None  # made after the load
        self.baton = Baton()
        self.net_namespace = net_namespace
        self.limits, self.home = limits, home
        self.layers: list[str] = list(layers or [])  # e.g. the pid namespace, entered in main()
        self.warnings: list[str] = list(warnings or [])
        self.keeper_report_fd = keeper_report_fd  # the cgroup report (keeper or fork server), read before any program code
        self.clock = OpClock()
        self.log = LogSink(limits.max_log_chars)
        self.loaded: Any = None
        self.allowed_imports: list[str] = []
        self.reader_fns: list = []   # other programs' read() (op_reader)
        self.kb: Any = None
        self.loader: Any = None
        self.loader_error = ""

    # ----------------------------------------------------------------- setup

    def layer(self, fn, *args) -> None:
        try:
            self.layers.append(fn(*args))
        except oslimits.LayerUnavailable as exc:
            self.warnings.append(f"{fn.__name__}: {exc}")

    def prepare(self) -> None:
        # First: unshare() needs the single thread and the root of this moment (docs/sandbox.md, L6).
        if "pid_namespace" in self.layers:
            self.layer(pidns.mount_private_proc)
        if self.net_namespace:
            self.layer(oslimits.enter_net_namespace)
        else:
            self.warnings.append("enter_net_namespace: switched off by the engine (sandbox.engine.launch.NET_NAMESPACE)")
        self.layer(oslimits.set_no_new_privs)
        self.layer(oslimits.set_rlimits, self.limits.memory_mb, self.limits.cpu_s)
        for name in LAZY_STDLIB:
            importlib.import_module(name)
        try:
            self.loader = importlib.import_module("sandbox.worker.loader")
        except ImportError as exc:
            self.loader_error = f"sandbox.worker.loader is not available: {exc}"
        self.toolkit = self._make_toolkit()
        self.layers.append("toolkit_capabilities")

    def _make_toolkit(self) -> Any:
        # Heavy imports live here so a crash in them is reported with the worker's stderr tail.
        import chromadb
        from chromadb.config import Settings

        from sandbox.worker.embedding import HashingEmbeddingFunction
        from sandbox.worker.one_cpu import OneCpu
        from sandbox.worker.toolkit_chroma import make_chroma, warm_up
        from sandbox.worker.toolkit_db import make_database

        forked = _SERVER_SETTINGS is not None
        settings = _SERVER_SETTINGS if forked else Settings(anonymized_telemetry=False, allow_reset=False)
        # chromadb's tokio runtime: one thread, not one per core -- one chroma call at a time needs no
        # more (a vector-search write: 3.3 -> 2.3 ms a chunk). In-process: the environment block stays.
        os.environ["TOKIO_WORKER_THREADS"] = "1"
        self._chroma_client = chromadb.EphemeralClient(settings)
        self._db = make_database(self.clock)
        self._one_cpu = OneCpu()   # finds chromadb's threads in /proc: before the scratch root hides it
        chroma = make_chroma(self._chroma_client, HashingEmbeddingFunction(), self._one_cpu.run)
        if not forked:  # a fork server imported all of it already (prepare_in_server)
            warm_up(chroma)
        return make_toolkit(self._db, chroma, self.log, self.ask_engine)

    def _engine_embeddings(self, label: str) -> None:
        """The load asked for the engine's embeddings: the program's collections get them (the
        warm-up collection, made with hashing, is gone by now)."""
        from sandbox.worker.embedding import EngineEmbeddingFunction
        from sandbox.worker.toolkit_chroma import make_chroma

        chroma = make_chroma(self._chroma_client, EngineEmbeddingFunction(self.embed_engine, label), self._one_cpu.run)
        self.toolkit = make_toolkit(self._db, chroma, self.log, self.ask_engine)

    def ask_engine(self, messages: list[dict[str, str]]) -> dict[str, Any]:
        started, turn = time.monotonic(), self.baton.give()   # another read runs while this one waits
        reply = self.channel.ask(messages)
        if turn:
            self.baton.take(RESUMING)
        self.clock.extend(time.monotonic() - started)  # LLM time does not count against the op
        if reply.get("op") != "llm_reply":
            return {"ok": False, "kind": "error", "error": f"unexpected reply {reply.get('op')!r}"}
        return reply

    def embed_engine(self, texts: list[str]) -> dict[str, Any]:
        turn = self.baton.give()
        reply = self.channel.embed(texts)   # the engine counts embedding time in the op: so does its clock
        if turn:
            self.baton.take(RESUMING)
        if reply.get("op") != "embed_reply":
            return {"ok": False, "error": f"unexpected reply {reply.get('op')!r}"}
        return reply

    # ----------------------------------------------------------------- ops

    def serve(self) -> None:
        self.channel.send({"op": "ready", "layers": self.layers, "warnings": self.warnings})
        while True:
            try:
                request = self.channel.next_request()
            except EOFError:
                return
            op_id = request.get("id", 0)
            if request.get("op") == "read" and self.readers is not None:
                self.readers.submit(request, op_id)
            else:
                self.run_op(request, op_id, threaded=False)
                if request.get("op") == "load" and self.kb is not None and self.limits.parallel_reads > 1:
                    threading.stack_size(READ_THREAD_STACK)  # threads start after the seccomp filter
                    # Reads take turns (sandbox.worker.baton); a short GIL slice lets the main thread
                    # route an LLM reply while a read computes, so the read that waited goes next.
                    sys.setswitchinterval(0.0005)
                    self.readers = ReadPool(self.limits.parallel_reads, self._run_threaded)

    def _run_threaded(self, request: dict[str, Any], op_id: int) -> None:
        self.baton.take()   # reads take turns on the CPU (sandbox.worker.baton)
        try:
            self.run_op(request, op_id, threaded=True)
        except BaseException:  # noqa: BLE001 -- the result could not be sent: the engine is gone
            os._exit(75)
        finally:
            self.baton.give()

    def run_op(self, request: dict[str, Any], op_id: int, threaded: bool) -> None:
        op = request.get("op")
        handler = {"load": self.op_load, "write": self.op_write, "read": self.op_read, "reader": self.op_reader}.get(op)
        self.channel.enter(op_id, threaded)
        try:
            if handler is None:
                reply = {"ok": False, "error": error("unknown", "protocol", "unknown op", f"unknown op {op!r}")}
            else:
                self.log.take()
                self.clock.start(self.limits.call_timeout_s * _DB_DEADLINE_FRACTION)
                cpu0 = time.thread_time()   # this thread's CPU: waiting on a toolkit call is not in it
                try:
                    reply = handler(request)
                finally:
                    self.clock.stop()
                reply["cpu_s"] = round(time.thread_time() - cpu0, 6)
            reply["op"], reply["id"] = "result", op_id
            reply["logs"] = self.log.take()
            try:
                self.channel.send(reply)
            except (FrameError, TypeError, ValueError) as exc:  # e.g. a non-JSON schema default
                self.channel.send({"op": "result", "id": op_id, "ok": False, "logs": [], "error": error(
                    "unknown", "protocol", "unsendable result", f"result could not be encoded: {exc}")})
        finally:
            self.channel.leave()

    def op_load(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.kb is not None:
            return {"ok": False, "error": error("import", "protocol", "already loaded", "this worker already holds a program")}
        allowed = [m for m in request.get("allowed_imports", []) if isinstance(m, str)]
        for name in allowed:  # engine configuration, not program text: safe to import as is
            try:
                importlib.import_module(name)
            except ImportError:
                pass  # the loader reports a missing module when a program imports it
        if self.keeper_report_fd is not None:  # long written by now: its writer started with us
            layers, warnings = pidns.read_keeper_report(self.keeper_report_fd)
            self.keeper_report_fd = None
            self.layers += layers
            self.warnings += warnings
        self.layer(oslimits.enter_scratch_root, self.home)
        self.layer(oslimits.drop_privileges, "/" if "scratch_root" in self.layers else self.home)
        self.layer(oslimits.set_parent_death_signal, self.parent_pid)
        # Last, just before program code first runs: every import and thread start that needs a
        # refused call (exec for ldconfig, say) has happened by now.
        self.layer(seccomp.install_filter)
        if self.loader is None:
            return {"ok": False, "error": error("import", "runtime", "loader missing", self.loader_error)}
        if isinstance(request.get("embed"), str):
            self._engine_embeddings(request["embed"])
        self.channel.send({"op": "stage", "id": request.get("id", 0), "stage": "import"})
        try:
            loaded = self.loader.load_program(request["source"], allowed, log=self.log.add,
                                              max_source_bytes=self.limits.max_source_bytes)
        except self.loader.ProgramRejected as rej:
            return {"ok": False, "error": error(rej.stage, rej.gate, rej.rule, str(rej.message), rej.line)}
        except BaseException as exc:  # noqa: BLE001 -- anything the program does at import
            return {"ok": False, "error": program_error("import", exc)}
        self.channel.send({"op": "stage", "id": request.get("id", 0), "stage": "init"})
        try:
            self.kb = loaded.kb_cls(self.toolkit)
        except BaseException as exc:  # noqa: BLE001
            return {"ok": False, "error": program_error("init", exc)}
        self.loaded, self.allowed_imports = loaded, allowed
        return {"ok": True, "knowledge_item_schema": loaded.knowledge_item_schema,
                "query_schema": loaded.query_schema, "constants": loaded.constants,
                "layers": self.layers, "warnings": self.warnings}

    def _instance(self, stage: str, cls: type, data: Any, schema: list[dict]) -> tuple[Any, dict | None]:
        try:
            return self.loader.build_instance(cls, data, schema), None
        except BaseException as exc:  # noqa: BLE001 -- dataclass __init__/__post_init__ is program code
            return None, error(stage, "contract", f"bad {cls.__name__}", describe(exc), program_line(exc))

    def op_write(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.kb is None:
            return {"ok": False, "error": error("write", "protocol", "not loaded", "no program loaded")}
        item, failure = self._instance("write", self.loaded.knowledge_item_cls, request.get("item"),
                                       self.loaded.knowledge_item_schema)
        if failure:
            return {"ok": False, "error": failure}
        raw_text = request.get("raw_text")
        try:
            self.kb.write(item, raw_text if isinstance(raw_text, str) else "")
        except BaseException as exc:  # noqa: BLE001
            return {"ok": False, "error": program_error("write", exc)}
        return {"ok": True, "output": None}

    def op_reader(self, request: dict[str, Any]) -> dict[str, Any]:
        """Make another program's read() runnable here (loader.load_reader); its number for op_read."""
        if self.kb is None or not isinstance(request.get("source"), str):
            return {"ok": False, "error": error("reader", "protocol", "not loaded", "no program loaded, or no source")}
        try:
            shift = request.get("line_shift") if type(request.get("line_shift")) is int else 0
            fn = self.loader.load_reader(request["source"], self.loaded, self.allowed_imports, line_shift=shift,
                                         max_source_bytes=self.limits.max_source_bytes)
        except self.loader.ProgramRejected as rej:
            return {"ok": False, "error": error("reader", rej.gate, rej.rule, str(rej.message), rej.line)}
        self.reader_fns.append(fn)
        return {"ok": True, "output": len(self.reader_fns) - 1}

    def op_read(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.kb is None:
            return {"ok": False, "error": error("read", "protocol", "not loaded", "no program loaded")}
        query, failure = self._instance("read", self.loaded.query_cls, request.get("query"),
                                        self.loaded.query_schema)
        if failure:
            return {"ok": False, "error": failure}
        reader = request.get("reader")   # another program's read() (op_reader), else the program's own
        try:
            output = self.kb.read(query) if reader is None else self.reader_fns[reader](self.kb, query)
        except BaseException as exc:  # noqa: BLE001
            return {"ok": False, "error": program_error("read", exc)}
        if type(output) is not str:
            return {"ok": False, "error": error("read", "contract", "read output not str",
                                                f"read() returned {type(output).__name__}, not str")}
        if len(output) > self.limits.read_max_chars:
            return {"ok": False, "error": error("read", "limits", "read output too long",
                                                f"read() returned {len(output)} characters; the limit is {self.limits.read_max_chars}")}
        return {"ok": True, "output": output}


# Set in a fork server by prepare_in_server(): chromadb's Settings, built once for every worker
# forked from it (pydantic reads the environment and a .env: ~6 ms per worker otherwise).
_SERVER_SETTINGS: Any = None


def prepare_in_server() -> None:
    """Called by the fork server after its imports: what every forked worker would otherwise redo.
    A worker forked after this skips `warm_up` (~45 ms of the ~90 ms to a ready worker): the server
    imported all it pulls in (tests/test_sandbox_forkserver.py: no collection method imports more)."""
    global _SERVER_SETTINGS
    from chromadb.config import Settings

    _SERVER_SETTINGS = Settings(anonymized_telemetry=False, allow_reset=False)


def _cgroup_joiner(memory_mb: int) -> pidns.KeeperTask:
    """The keeper's task (sandbox.jail.pidns): worker, init and keeper into a new cgroup. Called with
    (0, 0) by a worker without a keeper: then only the caller itself moves."""
    def join(worker_pid: int, init_pid: int) -> str:
        members = [pid for pid in (worker_pid, init_pid) if pid] + [0]  # 0: the writer itself
        return cgroups.join_report(memory_mb, members)
    return join


def arguments() -> argparse.ArgumentParser:
    """The worker's command line (also read by the fork server: sandbox.worker.fork_jail)."""
    parser = argparse.ArgumentParser(prog="sandbox.worker.main")
    parser.add_argument("--in-fd", type=int, required=True)
    parser.add_argument("--out-fd", type=int, required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--limits", required=True, help="SandboxLimits as JSON")
    parser.add_argument("--home", required=True, help="the worker's own writable directory")
    parser.add_argument("--no-net-namespace", action="store_true", help="stay in the parent's network namespace")
    parser.add_argument("--no-pid-namespace", action="store_true", help="stay in the parent's pid namespace")
    parser.add_argument("--no-cgroup", action="store_true", help="stay in the parent's cgroup")
    # Added by the fork server, never by the engine: it forked us into a namespace it made.
    parser.add_argument("--pid-namespace-made", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--jail-report-fd", type=int, default=None, help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    layers, warnings, parent_pid = [], [], args.parent_pid
    limits = SandboxLimits(**json.loads(args.limits))
    join_cgroup = None if args.no_cgroup else _cgroup_joiner(limits.memory_mb)
    if args.no_cgroup:
        warnings.append("join_worker_cgroup: switched off by the engine (sandbox.engine.launch.CGROUP)")
    report_fd = None
    if args.pid_namespace_made:  # the server holds init and moves us into the cgroup (fork_jail)
        layers.append("pid_namespace")
        parent_pid, report_fd = pidns.PARENT_OUTSIDE, args.jail_report_fd
    elif args.no_pid_namespace:
        warnings.append("enter_pid_namespace: switched off by the engine (sandbox.engine.launch.PID_NAMESPACE)")
    else:  # before anything else: from here on only the worker runs this code (see sandbox.jail.pidns)
        try:  # the keeper moves keeper, init and worker into the cgroup while the worker starts
            layer, report_fd = pidns.enter_pid_namespace(args.parent_pid, join_cgroup)
            layers.append(layer)
            parent_pid = pidns.PARENT_OUTSIDE
        except oslimits.LayerUnavailable as exc:
            warnings.append(f"enter_pid_namespace: {exc}")
    if join_cgroup is not None and report_fd is None:  # no keeper: join now, alone
        joined, missing = pidns.parse_report(join_cgroup(0, 0) if not args.pid_namespace_made else
                                             "warning:join_worker_cgroup: the fork server sent no report")
        layers += joined
        warnings += missing
    faulthandler.enable(file=sys.stderr)  # a segfault leaves a Python traceback in the log tail
    worker = Worker(args.in_fd, args.out_fd, parent_pid, limits, args.home,
                    net_namespace=not args.no_net_namespace, layers=layers, warnings=warnings,
                    keeper_report_fd=report_fd)
    try:
        worker.prepare()
    except BaseException:
        traceback.print_exc()
        raise SystemExit(3)
    worker.serve()


if __name__ == "__main__":
    main()

"""The MCP server: a store's memory as tools an agent host calls (official `mcp` SDK, the
[serve] extra: `pip install 'mstar-evolve[serve]'`).

  tool      remember(text, namespace="default", id=None)      extract, write(), log (fsync), acknowledge;
                                                                a retry with the same id is answered from the log
  tool      recall(question, namespace="default", answer=False) the program's read() output; with
                                                                answer=true also the task agent's answer
  resource  memory://program                                  the program's instructions and schemas (JSON)
  tools     list_entries, get_entry, forget, forget_namespace, export_namespace (mstar.memory.mcp_tools)

Every tool call runs over a MemoryService: writes to one namespace apply in log order, reads of
it run concurrently. Calls wait for a slot of their namespace and a thread of the server's
(mstar.memory.fairness: a slow namespace queues only its own calls). A refusal or fault is one
line in an error result (`is_error`), never a traceback: a bad namespace name, a namespace the
client may not use, a read-only namespace, a full disk, a program that failed.

Transports: stdio (what desktop hosts launch), and streamable HTTP. HTTP binds loopback by
default; on every address the Host and Origin headers are checked against DNS rebinding
(mstar.memory.hosts). Bound to a non-loopback address the server refuses to start without a
token: one bearer token (read from an environment variable, never the command line) that every
request must carry, or an access file with a token per client and the namespaces each may use
(mstar.memory.access).
"""
from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import socket
from typing import Any, Callable, Optional, TypedDict

from mstar.memory.access import Access, AccessGuard, send_unauthorized
from mstar.memory.fairness import FairGate
from mstar.memory.hosts import HostCheck, HostGuard, sdk_check_off
from mstar.memory.mcp_tools import add_manage_tools, mstar_version, server_class
from mstar.memory.sandboxed import MemoryProgramError
from mstar.memory.service import MemoryService
from mstar.memory.store import DEFAULT_NAMESPACE, StoreError

SERVER_NAME = "mstar-memory"
PROGRAM_URI = "memory://program"


def mcp_missing() -> str | None:
    """One line when the SDK is not installed, else None."""
    try:
        import mcp.server.mcpserver  # noqa: F401
    except ImportError:
        return "mstar serve needs the official MCP SDK: pip install 'mstar-evolve[serve]' (the `mcp` package, 2.x)"
    return None


class RememberResult(TypedDict):
    namespace: str
    seq: int                      # its place in the namespace's write log
    item: dict                    # the KnowledgeItem the program's write() received
    warnings: list[str]
    error: Optional[str]          # write() raised; the text is kept (logged) all the same
    id: str                       # the entry's id (yours, or one the memory made): get_entry / forget take it
    repeated: bool                # this id was already remembered: that write's acknowledgement, nothing new


class RecallResult(TypedDict):
    namespace: str
    retrieved: str                # what the program's read() returned
    answer: Optional[str]         # the task agent's answer (answer=true), else null
    query: dict                   # the Query the agent formulated
    warnings: list[str]
    error: Optional[str]          # read() raised or timed out; retrieved is then empty


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:1000] or type(exc).__name__


def build_server(service: MemoryService, *, gate: FairGate | None = None, access: Access | None = None):
    """The MCPServer for `service` (not started). `access`: the clients and their namespaces (HTTP
    with --access); without it every caller may use every namespace."""
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError

    info = service.program_info()
    consts = info["instructions"]
    app = server_class()(
        SERVER_NAME, log_level="WARNING", version=mstar_version(),
        instructions=(f"A long-term memory (mstar memory program {info['program']!r}). Call remember with any text "
                      "worth keeping (a conversation turn, a fact, a finished task) and recall with a question "
                      "before answering; use one namespace per user or agent. Read memory://program for how "
                      "this memory stores and answers."))

    gate = gate or FairGate()

    def guarded(op: Callable[[], Any]) -> Any:
        try:
            return op()
        except (StoreError, MemoryProgramError) as exc:
            raise ToolError(_one_line(exc)) from None

    async def on_namespace(ctx: Any, namespace: str, op: Callable[[], Any]) -> Any:
        """`op` for a call on `namespace`: the client's access checked, then a fair turn on a thread."""
        if access is not None:
            guarded(lambda: access.check(ctx.headers, namespace))
        return await gate.run(namespace, lambda: guarded(op))

    async def remember(text: str, namespace: str = DEFAULT_NAMESPACE, id: Optional[str] = None,
                       ctx: Context = None) -> RememberResult:
        r = await on_namespace(ctx, namespace, lambda: service.remember(text, namespace, id=id))
        return {"namespace": r.namespace, "seq": r.seq, "item": r.item, "warnings": r.warnings, "error": r.error,
                "id": r.id, "repeated": r.repeated}

    async def recall(question: str, namespace: str = DEFAULT_NAMESPACE, answer: bool = False,
                     ctx: Context = None) -> RecallResult:
        a = await on_namespace(ctx, namespace, lambda: service.recall(question, namespace, answer=answer))
        return {"namespace": namespace, "retrieved": a.retrieved, "answer": a.answer if answer else None,
                "query": a.query, "warnings": a.warnings, "error": a.error}

    # The SDK hands a tool its call's Context by the parameter's type; with postponed annotations
    # that type is a string naming this function's local import, so it is given as the class.
    for tool in (remember, recall):
        tool.__annotations__["ctx"] = Context

    app.add_tool(remember, name="remember", structured_output=True, description=(
        "Remember a text in the memory (namespace: one per user or agent; made on first use). The memory "
        "extracts what to keep itself: " + consts.get("INSTRUCTION_KNOWLEDGE_ITEM", "")[:500]
        + " Give an id of your own to make a retry safe: a text already remembered under it is not written again."))
    app.add_tool(recall, name="recall", structured_output=True, description=(
        "Recall what the memory holds for a question (namespace as for remember). Returns the retrieved text; "
        "with answer=true also an answer written from it."))

    add_manage_tools(app, service, on_namespace, Context)

    @app.resource(PROGRAM_URI, name="program", mime_type="application/json",
                  description="The memory program's instructions and the schemas of what it stores and is asked")
    def program() -> str:
        return json.dumps(info, indent=2, ensure_ascii=False)

    return app


def run_stdio(service: MemoryService, gate: FairGate | None = None) -> None:
    import anyio
    anyio.run(build_server(service, gate=gate).run_stdio_async)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BearerGuard:
    """ASGI middleware: every HTTP request carries `Authorization: Bearer <token>`, or gets 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode("utf-8")

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            given = next((v for k, v in scope.get("headers", []) if k.lower() == b"authorization"), b"")
            if not hmac.compare_digest(given, self._expected):
                reason = "wrong bearer token" if given else "no bearer token (send Authorization: Bearer <token>)"
                await send_unauthorized(send, reason)
                return
        await self.app(scope, receive, send)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (port 0: any free port; `getsockname()` tells which)."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


def run_http(service: MemoryService, sock: socket.socket, token: str | None, *, access: Access | None = None,
             allow_hosts: tuple[str, ...] = (), gate: FairGate | None = None) -> None:
    """Serve streamable HTTP at /mcp on `sock` until SIGINT/SIGTERM: with `access`, the clients of an
    access file (each its namespaces), else with `token` one bearer token, else (loopback) none."""
    import anyio
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            # uvicorn shuts down gracefully on SIGINT/SIGTERM and then raises the signal again, which
            # would end the process before the command closes its namespaces: not raised again here.
            with super().capture_signals():
                yield
                getattr(self, "_captured_signals", []).clear()

    host = sock.getsockname()[0]
    app = build_server(service, gate=gate, access=access).streamable_http_app(
        host=host, transport_security=sdk_check_off())
    asgi = AccessGuard(app, access) if access else BearerGuard(app, token) if token else app
    asgi = HostGuard(asgi, HostCheck(host, allow_hosts))        # first: a rebound request learns nothing
    server = Server(uvicorn.Config(asgi, log_level="warning", lifespan="on"))
    anyio.run(lambda: server.serve(sockets=[sock]))

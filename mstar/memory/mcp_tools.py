"""The MCP server's tools for managing what a memory holds, and what its clients are told when
they call a tool wrongly (mstar.memory.server builds the server with these).

  tool  list_entries(namespace="default", offset=0, limit=50, contains=None)  a page of entries
  tool  get_entry(id, namespace="default")                                     one entry
  tool  forget(ids=None, matching=None, namespace="default")                   erase entries (one of the two)
  tool  forget_namespace(namespace)                                           erase a namespace whole
  tool  export_namespace(namespace="default")                                 its texts as JSON lines

forget_namespace has no default namespace: wiping one takes its name. Arguments the tool's
schema refuses (missing, of the wrong type) are answered with one line naming each argument and
what it needs, instead of the validator's multi-line text.
"""
from __future__ import annotations

from importlib import metadata
from typing import Any, Awaitable, Callable, Optional

from typing_extensions import TypedDict   # pydantic (the SDK's schemas) needs this one on Python < 3.12

from mstar.memory.service import MemoryService
from mstar.memory.store import DEFAULT_NAMESPACE


def mstar_version() -> str:
    """The installed distribution's version (being renamed from `mstar` to `mstar-evolve`)."""
    for name in ("mstar-evolve", "mstar"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


class EntryResult(TypedDict):
    id: str
    seq: int                      # its place in the namespace's log
    at: str                       # when it was acknowledged (UTC)
    text: str                     # the raw text, as remembered
    item: dict                    # the KnowledgeItem the program's write() received
    error: Optional[str]          # write() raised when it was remembered


class PageResult(TypedDict):
    namespace: str
    entries: list[EntryResult]
    total: int                    # entries that match (all without `contains`)
    offset: int
    next_offset: Optional[int]    # pass it as offset for the next page; null on the last one


class ForgetResult(TypedDict):
    namespace: str
    forgotten: list[str]          # ids of the erased entries
    missing: list[str]            # ids asked for that the namespace did not hold


class ForgetNamespaceResult(TypedDict):
    namespace: str
    forgotten: int                # how many entries it held


class ExportResult(TypedDict):
    namespace: str
    count: int
    jsonl: str                    # one {"text", "id", "at"} per line; `mstar memory import` takes it back


def add_manage_tools(app: Any, service: MemoryService, on_namespace: Callable[..., Awaitable[Any]],
                     context: type) -> None:
    """The managing tools on `app`. Each goes through `on_namespace(ctx, namespace, op)` as remember
    and recall do (mstar/memory/server.py): the client's access to the namespace is checked, then
    `op` runs on a fair turn of the namespace's slots."""
    from mstar.memory.store import StoreError

    async def list_entries(namespace: str = DEFAULT_NAMESPACE, offset: int = 0, limit: int = 50,
                           contains: Optional[str] = None, ctx: Any = None) -> PageResult:
        return await on_namespace(ctx, namespace, lambda: service.entries(namespace, offset, limit, contains).to_dict())

    async def get_entry(id: str, namespace: str = DEFAULT_NAMESPACE, ctx: Any = None) -> EntryResult:
        return await on_namespace(ctx, namespace, lambda: service.entry(id, namespace).to_dict())

    async def forget(ids: Optional[list[str]] = None, matching: Optional[str] = None,
                     namespace: str = DEFAULT_NAMESPACE, ctx: Any = None) -> ForgetResult:
        def run() -> dict:
            if (ids is None) == (matching is None):
                raise StoreError("forget takes either ids (a list of entry ids) or matching (a text), not both "
                                 "nor neither")
            done = service.forget(ids, namespace) if ids is not None else service.forget_matching(matching, namespace)
            return done.to_dict()
        return await on_namespace(ctx, namespace, run)

    async def forget_namespace(namespace: str, ctx: Any = None) -> ForgetNamespaceResult:
        return {"namespace": namespace,
                "forgotten": await on_namespace(ctx, namespace, lambda: service.forget_namespace(namespace))}

    async def export_namespace(namespace: str = DEFAULT_NAMESPACE, ctx: Any = None) -> ExportResult:
        lines = await on_namespace(ctx, namespace, lambda: service.export(namespace))
        return {"namespace": namespace, "count": len(lines), "jsonl": "".join(lines)}

    for tool in (list_entries, get_entry, forget, forget_namespace, export_namespace):
        tool.__annotations__["ctx"] = context   # the SDK finds a tool's Context by this annotation

    app.add_tool(list_entries, name="list_entries", structured_output=True, description=(
        "List what the memory holds in a namespace, oldest first, a page at a time: each entry's id, time, "
        "raw text and the item the memory stored. contains: only entries holding that text (any case)."))
    app.add_tool(get_entry, name="get_entry", structured_output=True,
                 description="One entry of a namespace, by its id (from remember or list_entries).")
    app.add_tool(forget, name="forget", structured_output=True, description=(
        "Erase entries for good: by ids, or every entry holding the text `matching` (any case; list_entries "
        "with contains= shows which first). The memory is rebuilt without them and no file keeps their text."))
    app.add_tool(forget_namespace, name="forget_namespace", structured_output=True, description=(
        "Erase a whole namespace (every entry, its files); name it explicitly. A later remember starts it anew."))
    app.add_tool(export_namespace, name="export_namespace", structured_output=True, description=(
        "A namespace's raw texts as JSON lines (text, id, time), oldest first: a copy another store can import."))


def _argument_problem(err: dict) -> str:
    where = ".".join(str(part) for part in err.get("loc", ())) or "arguments"
    kind = err.get("type", "")
    if kind == "missing":
        return f"argument {where!r} is missing"
    shown = repr(err.get("input"))
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"argument {where!r}: {str(err.get('msg', 'invalid')).rstrip('.').lower()} (got {shown})"


def server_class() -> type:
    """MCPServer whose refusal of a tool's arguments is one line naming them."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from pydantic import ValidationError

    class MemoryMCPServer(MCPServer):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            tool = self._tool_manager.get_tool(name)
            if tool is not None:
                known = set(tool.parameters.get("properties", {}))
                extra = sorted(set(arguments) - known)
                if extra:
                    raise ToolError(f"{name}: unknown argument(s) {', '.join(map(repr, extra))}; it takes "
                                    f"{', '.join(sorted(known))}")
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as exc:
                if isinstance(exc.__cause__, ValidationError):
                    problems = "; ".join(_argument_problem(e) for e in exc.__cause__.errors())
                    raise ToolError(f"{name}: {problems}") from None
                raise

    return MemoryMCPServer

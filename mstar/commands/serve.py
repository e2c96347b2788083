"""`mstar serve PROGRAM --store DIR`: serve a memory program over MCP, kept in a store folder
(mstar/memory/server.py; the [serve] extra). Everything is checked before serving -- the SDK,
the LLM settings and endpoints, the program's gates, the store, the address and token -- and each
failure is one line on stderr and exit status 2 (3 for an endpoint that does not answer). In
stdio mode stdout carries the protocol: every line of ours goes to stderr."""
from __future__ import annotations

import os
import sys


def register(sub) -> None:
    from mstar.commands.llm_flags import add_llm_args
    from mstar.memory.fairness import DEFAULT_PER_NAMESPACE, DEFAULT_THREADS
    from mstar.memory.pool import DEFAULT_IDLE_CLOSE_S, DEFAULT_MAX_OPEN

    p = sub.add_parser("serve", help="serve a memory program over MCP (stdio or HTTP), kept in a store folder")
    p.add_argument("program", nargs="?", default=None,
                   help="the program (.py, e.g. from `mstar export`, or a built-in name); optional when --store "
                        "already holds one")
    p.add_argument("--store", required=True, metavar="DIR",
                   help="the store folder: made for PROGRAM when new; it keeps every namespace's write log")
    p.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                   help="stdio (what agent hosts launch; default) or streamable HTTP at /mcp")
    p.add_argument("--host", default="127.0.0.1",
                   help="HTTP address (default loopback); any other address needs a token (--token-env)")
    p.add_argument("--port", type=int, default=8765, help="HTTP port (0 = any free port; the one taken is printed)")
    p.add_argument("--token-env", default="MSTAR_SERVE_TOKEN", metavar="VAR",
                   help="environment variable holding the bearer token HTTP clients must send (required "
                        "off loopback; enforced whenever it is set)")
    p.add_argument("--access", default=None, metavar="FILE",
                   help="HTTP: a TOML file of clients, each a token and the namespaces it may use "
                        "(docs/serve.md); replaces the single token of --token-env")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="HTTP: a host name clients use to reach the server (e.g. behind a proxy); requests "
                        "whose Host or Origin names anything but the bound address (and localhost on "
                        "loopback) are refused, against DNS rebinding. Repeatable")
    p.add_argument("--namespace-calls", type=int, default=DEFAULT_PER_NAMESPACE, metavar="N",
                   help="calls of one namespace in flight at once; more wait behind that namespace's own")
    p.add_argument("--threads", type=int, default=DEFAULT_THREADS, metavar="N",
                   help="threads serving calls, all namespaces together (more than --namespace-calls)")
    p.add_argument("--max-open", type=int, default=DEFAULT_MAX_OPEN, metavar="N",
                   help="namespaces open at once (one sandbox worker each); the least recently used idle "
                        "one is closed to open another")
    p.add_argument("--idle-close", type=float, default=DEFAULT_IDLE_CLOSE_S, metavar="SECONDS",
                   help="close a namespace nobody asked for this long (0 = never); it reopens from its log")
    add_llm_args(p)
    p.add_argument("--no-preflight", action="store_true",
                   help="skip the one cheap call per LLM role (task, toolkit) that checks key, model and URL")
    p.set_defaults(func=cmd_serve)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def cmd_serve(args) -> int:
    from mstar.memory.server import bind, is_loopback, mcp_missing, run_http, run_stdio

    missing = mcp_missing()
    if missing:
        _say(f"mstar: {missing}")
        return 2
    if args.max_open < 1:
        _say(f"mstar: --max-open {args.max_open}: give 1 or more")
        return 2
    token = (os.environ.get(args.token_env) or None) if args.transport == "http" else None
    checked = _check_http_options(args, token)
    if isinstance(checked, int):
        return checked
    gate, access, allow_hosts = checked
    if args.transport == "http" and not is_loopback(args.host) and not token and not access:
        _say(f"mstar: --host {args.host} is not a loopback address: set a bearer token in ${args.token_env} "
             "(clients send `Authorization: Bearer <token>`), give --access FILE, or serve on 127.0.0.1")
        return 2
    service = open_service(args, args.program, args.store)
    if isinstance(service, int):
        return service
    try:
        if args.transport == "stdio":
            _say(f"serving {service.folder.name} (store {service.folder.root}) over stdio")
            run_stdio(service, gate)
            return 0
        try:
            sock = bind(args.host, args.port)
        except OSError as exc:
            _say(f"mstar: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
            return 2
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in host else host
        _say(f"serving {service.folder.name} (store {service.folder.root}) at http://{shown}:{port}/mcp"
             + (f" ({len(access.clients)} clients of {access.source}, each its namespaces)" if access
                else " (bearer token required)" if token else ""))
        run_http(service, sock, token, access=access, allow_hosts=allow_hosts, gate=gate)
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        service.close()
        service.llm.close()


def _check_http_options(args, token):
    """(FairGate, Access or None, allowed host names) from the options, or an exit status after one line."""
    from mstar.memory.access import Access, AccessError
    from mstar.memory.fairness import FairGate
    from mstar.memory.hosts import HostNameError, allowed_name

    try:
        gate = FairGate(args.namespace_calls, args.threads)
        allow_hosts = tuple(allowed_name(name) for name in args.allow_host)
    except (ValueError, HostNameError) as exc:
        _say(f"mstar: {exc}")
        return 2
    if args.access is None:
        return gate, None, allow_hosts
    if args.transport != "http":
        _say("mstar: --access is for --transport http (over stdio the host that launched the server is its "
             "one client)")
        return 2
    if token:
        _say(f"mstar: give either --access (a token per client) or ${args.token_env} (one token for every "
             f"namespace), not both; unset ${args.token_env}")
        return 2
    try:
        return gate, Access.load(args.access), allow_hosts
    except AccessError as exc:
        _say(f"mstar: {exc}")
        return 2


def open_service(args, program, store):
    """The MemoryService for the command's LLM options, or an exit status after one line."""
    from mstar.commands.llm_flags import resolve_llm
    from mstar.llm.router import LLMRouter
    from mstar.llm.types import LLMError
    from mstar.memory.service import MemoryService
    from mstar.memory.store import StoreError

    try:
        router = LLMRouter.from_config(resolve_llm(args), on_warning=lambda w: _say(f"mstar: warning: {w}"))
    except (LLMError, ValueError) as exc:
        _say(f"mstar: {exc}")
        return 2
    if not getattr(args, "no_preflight", True):
        failed = [c for c in router.preflight(["task", "toolkit"]) if not c.ok]
        if failed:
            _say(f"mstar: {failed[0].message}")
            return 3
    try:
        return MemoryService(store, program, llm=router, max_open=getattr(args, "max_open", 1),
                             idle_close_s=getattr(args, "idle_close", 0) or None,
                             on_warning=lambda w: _say(f"mstar: warning: {w}"))
    except StoreError as exc:
        router.close()
        _say(f"mstar: {exc}")
        return 2

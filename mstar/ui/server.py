"""The HTTP server: routes, static assets, the live stream. Standard library only.

    GET /                                              the page (static/index.html)
    GET /static/<file>                                 its scripts and styles (package data)
    GET /api/runs                                      the runs list
    GET /api/runs/<run>                                one run: live panel, lineage nodes, ending
    GET /api/runs/<run>/progress                       the live panel alone
    GET /api/runs/<run>/spend                          spend per role and over time
    GET /api/runs/<run>/programs/<ref>                 one program (an id, iter_NNN, a number, best)
    GET /api/runs/<run>/programs/<ref>/cases/<split>   its cases on static or test
    GET /api/runs/<run>/programs/<ref>/cases/<split>/<query id>   one case, whole
    GET /api/runs/<run>/compare?a=&b=&split=           two programs on the items both answered
    GET /api/stream[?run=<run>]                        Server-Sent Events: "changed", and what
    GET /api/store                                     the memory store (--store): program, namespaces
    GET /api/store/<namespace>?offset=&limit=&contains=   a page of its entries (mstar.ui.store)
    GET /api/store/<namespace>/recall?q=               what read() returns for a question

Only GET: the server changes nothing, here or in the run folders. Each request runs in its own
thread (ThreadingHTTPServer; a listen queue of LISTEN_QUEUE, and a connection silent for
CONNECTION_TIMEOUT_S is closed); a live stream holds one and looks at the run's files every quarter
second (a few stat calls), sending `lineage` at once when an event, the summary or the run's
liveness changed and `usage` at most every two seconds when only LLM calls were recorded; the
page refetches what changed. Every answer carries a Content-Security-Policy that allows only
this server's own scripts and styles: a second wall behind the page's rule of putting data in
the DOM as text only.
"""
from __future__ import annotations

import json
import socket
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, unquote, urlsplit

from mstar.memory.log import LogError
from mstar.memory.store import StoreError
from mstar.run.store import RunFormatError, dumps
from mstar.ui import api, cases
from mstar.ui.access import Access, is_loopback, new_token
from mstar.ui.folders import RunFolders, RunNotFound, RunUnreadable

POLL_S = 0.25            # how often a live stream looks at the files
USAGE_EVERY_S = 2.0      # at most this often a "usage" change (LLM calls arrive many times a second)
BEAT_S = 15.0            # a comment line keeps idle streams (and proxies) open
LISTEN_QUEUE = 64        # connections the kernel holds until the server accepts them
CONNECTION_TIMEOUT_S = 30.0   # a connection silent (or not reading) this long is closed: frees its thread
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
         ".txt": "text/plain; charset=utf-8"}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def load_assets() -> dict[str, tuple[bytes, str]]:
    """The page's files by name, read once from the package (nothing else is ever served)."""
    out = {}
    for entry in resources.files("mstar.ui").joinpath("static").iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
        if entry.is_file() and suffix in TYPES:
            out[entry.name] = (entry.read_bytes(), TYPES[suffix])
    return out


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # A page opens a handful of connections at once (assets, API calls, the stream), several tabs
    # more; the default queue of 5 made the kernel drop the rest until a thread got to accept().
    request_queue_size = LISTEN_QUEUE


class Handler(BaseHTTPRequestHandler):
    server_version = "mstar-ui"
    protocol_version = "HTTP/1.0"      # one request per connection: simple, and streams end cleanly

    @property
    def ui(self) -> "UIServer":
        return self.server.ui       # type: ignore[attr-defined]

    def setup(self) -> None:
        # Every connection has a thread; one that sends half a request and then nothing (or a
        # stream whose reader stopped reading) would hold it for ever. The socket's timeout ends it.
        self.timeout = self.server.ui.connection_timeout_s    # type: ignore[attr-defined]
        super().setup()

    def log_message(self, format, *args):   # quiet: the console is for the URL and errors
        if self.ui.verbose:
            super().log_message(format, *args)

    # ------------------------------------------------------------ responses
    def _head(self, status: int, ctype: str, length: int | None = None, cache: str = "no-store",
              cookie: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.send_header("Cache-Control", cache)
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cross-Origin-Resource-Policy", "same-origin")
        if cookie:
            self.send_header("Set-Cookie", self.ui.access.cookie_header())
        self.end_headers()

    def _send(self, status: int, body: bytes, ctype: str, cookie: bool = False, cache: str = "no-store") -> None:
        self._head(status, ctype, len(body), cache, cookie)
        self.wfile.write(body)

    def _json(self, status: int, data, cookie: bool = False) -> None:
        self._send(status, dumps(data).encode("ascii"), "application/json", cookie)

    def _error(self, status: int, message: str, api_call: bool) -> None:
        if api_call:
            self._json(status, {"error": message})
        else:
            self._send(status, message.encode("utf-8", "replace"), "text/plain; charset=utf-8")

    # ------------------------------------------------------------ routing
    def do_GET(self) -> None:          # noqa: N802 (http.server's name)
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        parts = [unquote(p) for p in url.path.split("/")[1:]]
        api_call = parts[:1] == ["api"]
        verdict = self.ui.access.check(self.headers, query)
        if not verdict.ok:
            return self._error(verdict.status, verdict.reason, api_call)
        if verdict.set_cookie and not api_call and url.path == "/":
            # The token came in the link: keep it in a cookie and drop it from the address bar.
            self.send_response(303)
            self.send_header("Location", "/")
            self.send_header("Set-Cookie", self.ui.access.cookie_header())
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        try:
            if parts == [""] or parts == ["index.html"]:
                body, ctype = self.ui.assets["index.html"]
                return self._send(200, body, ctype, cache="no-cache")
            if len(parts) == 2 and parts[0] == "static" and parts[1] in self.ui.assets:
                body, ctype = self.ui.assets[parts[1]]
                return self._send(200, body, ctype, cache="no-cache")
            if parts == ["api", "stream"]:
                return self._stream(query.get("run", [None])[0])
            if api_call:
                return self._json(200, self._api(parts[1:], query))
            return self._error(404, f"nothing at {url.path}", False)
        except (api.NotFound, RunNotFound) as exc:
            return self._error(404, str(exc), api_call)
        except RunUnreadable as exc:
            return self._error(409, f"the run folder cannot be read: {exc}", api_call)
        except RunFormatError as exc:    # e.g. a lineage id that leads outside the run folder
            return self._error(409, str(exc), api_call)
        except (StoreError, LogError) as exc:          # a bad name or page; a log a server holds open
            return self._error(409, str(exc), api_call)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            return None
        except Exception as exc:     # a bug or a record this version misreads: say so, keep serving
            self.log_error("%s failed: %s", url.path, traceback.format_exc())
            return self._error(500, f"{type(exc).__name__}: {exc}", api_call)

    def _api(self, p: list[str], query: dict) -> dict:
        f = self.ui.folders
        one = lambda key, default=None: query.get(key, [default])[0]  # noqa: E731
        if p == ["runs"]:
            return api.runs(f)
        if p[:1] == ["store"]:
            return self._store(p[1:], one)
        if len(p) >= 2 and p[0] == "runs":
            name, rest = p[1], p[2:]
            if not rest:
                return api.run(f, name)
            if rest == ["progress"]:
                return api.progress(f, name)
            if rest == ["spend"]:
                return api.spend(f, name)
            if rest == ["compare"]:
                return cases.compare(f, name, one("a", ""), one("b", ""), one("split", "static"))
            if len(rest) == 2 and rest[0] == "programs":
                return api.program(f, name, rest[1])
            if len(rest) == 4 and rest[0] == "programs" and rest[2] == "cases":
                return cases.case_list(f, name, rest[1], rest[3])
            if len(rest) == 5 and rest[0] == "programs" and rest[2] == "cases":
                return cases.case_detail(f, name, rest[1], rest[3], rest[4])
        raise api.NotFound(f"no API route /api/{'/'.join(p)}")

    def _store(self, p: list[str], one) -> dict:
        store = self.ui.store
        if store is None:
            raise api.NotFound("no memory store is shown here (start with `mstar ui --store DIR`)")
        if not p:
            return store.summary()
        if len(p) == 1:
            def number(key: str, default: int) -> int:
                try:
                    return int(one(key, default))
                except ValueError:
                    raise StoreError(f"{key} must be a whole number") from None
            return store.entries(p[0], number("offset", 0), number("limit", 50), one("contains"))
        if len(p) == 2 and p[1] == "recall":
            return store.recall(p[0], one("q", ""))
        raise api.NotFound(f"no API route /api/store/{'/'.join(p)}")

    def _stream(self, run: str | None) -> None:
        f = self.ui.folders
        look = (lambda: f.stamp(run)) if run else f.runs_stamp
        last = look()                  # a run that does not exist: 404 before the stream opens
        self._head(200, "text/event-stream")
        self.wfile.write(b"retry: 1000\n\n")
        self._event("hello", {"run": run})
        sent = beat = time.monotonic()
        stopping = self.ui.stopping
        while not stopping.wait(POLL_S):
            try:
                now_stamp = look()
            except RunNotFound:
                self._event("gone", {"run": run})
                return
            now = time.monotonic()
            if now_stamp["lineage"] != last["lineage"]:
                self._event("change", {"kind": "lineage"})
            elif now_stamp["usage"] != last["usage"] and now - sent >= USAGE_EVERY_S:
                self._event("change", {"kind": "usage"})
            elif now - max(sent, beat) >= BEAT_S:
                self.wfile.write(b": beat\n\n")
                self.wfile.flush()
                beat = now
                continue
            else:
                continue
            last, sent = now_stamp, now

    def _event(self, name: str, data: dict) -> None:
        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()


class UIServer:
    """`mstar ui`'s server over one runs folder. A non-loopback host without a token gets a new
    one (`.token`, printed by the command). Use as a context manager, or start() / close()."""

    def __init__(self, runs_dir, host: str = "127.0.0.1", port: int = 0, token: str | None = None,
                 verbose: bool = False, connection_timeout_s: float = CONNECTION_TIMEOUT_S, store=None):
        loopback = is_loopback(host)
        self.token = token or (None if loopback else new_token())
        self.access = Access(self.token, loopback)
        self.folders = RunFolders(runs_dir)
        self.store = None
        if store is not None:
            from mstar.ui.store import StoreView
            self.store = StoreView(store)       # StoreError: not a memory store
        self.assets = load_assets()
        self.verbose = verbose
        self.connection_timeout_s = connection_timeout_s
        self.stopping = threading.Event()
        server_cls = _HTTPServer
        if ":" in host:
            server_cls = type("_HTTPServer6", (_HTTPServer,), {"address_family": socket.AF_INET6})
        self.httpd = server_cls((host.strip("[]"), port), Handler)
        self.httpd.ui = self                  # type: ignore[attr-defined]
        self.host = host
        self.port = self.httpd.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host.strip('[]')}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/" + (f"?token={self.token}" if self.token else "")

    def start(self) -> "UIServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="mstar-ui", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self.httpd.serve_forever()

    def close(self) -> None:
        self.stopping.set()                   # live streams end at their next look
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join(timeout=5)
        self.httpd.server_close()
        if self.store is not None:
            self.store.close()

    def __enter__(self) -> "UIServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

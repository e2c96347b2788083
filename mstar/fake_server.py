"""A local OpenAI-compatible chat server for tests and benchmarks.

Serves POST /v1/chat/completions (and /chat/completions) with usage figures.
Answers come from a script (a list of replies, used in order) or from the
offline backend, chosen by the request's model name ("offline-task",
"offline-reflector", ... or a role name). The real `openai` client talks to it
over loopback, so tests exercise the same code path as a real endpoint.
"""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from mstar.llm.types import estimate_tokens, messages_text

# A responder returns the reply text, or (text, finish_reason) to simulate e.g. a cut-off reply.
Responder = Callable[[str, list[dict]], "str | tuple[str, str]"]


def offline_responder(seed: int = 0) -> Responder:
    """Answer each request with the offline model of the role named in `model`."""
    from mstar.llm.offline_backend import OfflineBackend

    cache: dict[str, OfflineBackend] = {}
    lock = threading.Lock()

    def respond(model: str, messages: list[dict]) -> str:
        role = model.removeprefix("offline-")
        if role not in ("task", "reflector", "toolkit", "judge"):
            role = "task"
        with lock:
            backend = cache.setdefault(role, OfflineBackend(role, seed=seed))
        return backend.complete(messages).text

    return respond


def scripted_responder(replies: list[str]) -> Responder:
    it = iter(replies)
    lock = threading.Lock()

    def respond(model: str, messages: list[dict]) -> str:
        with lock:
            try:
                return next(it)
            except StopIteration:
                raise RuntimeError("the fake server's script has no more replies")

    return respond


class FakeOpenAIServer:
    """`with FakeOpenAIServer(responder) as srv: srv.base_url ...`"""

    def __init__(self, responder: Responder, *, latency_s: float = 0.0, host: str = "127.0.0.1"):
        self.responder = responder
        self.latency_s = latency_s
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_POST(self):
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    return self._send(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
                with server._lock:
                    server.requests.append(body)
                if server.latency_s:
                    time.sleep(server.latency_s)
                model, messages = body.get("model", ""), body.get("messages", [])
                try:
                    reply = server.responder(model, messages)
                except Exception as exc:
                    return self._send(500, {"error": {"message": str(exc), "type": "server_error"}})
                text, finish = (reply, "stop") if isinstance(reply, str) else reply
                pt, ct = estimate_tokens(messages_text(messages)), estimate_tokens(text)
                self._send(200, {
                    "id": f"chatcmpl-fake-{len(server.requests)}", "object": "chat.completion",
                    "created": int(time.time()), "model": model,
                    "choices": [{"index": 0, "finish_reason": finish,
                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
                })

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._httpd = ThreadingHTTPServer((host, 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "FakeOpenAIServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

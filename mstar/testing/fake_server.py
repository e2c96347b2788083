"""A local OpenAI-compatible chat server for tests and benchmarks.

Serves POST /v1/chat/completions (and /chat/completions) with usage figures,
and GET /v1/stats (requests and injected faults so far). Answers come from a
script (a list of replies, used in order) or from the offline models. Any model
name is served: the role is read from the prompt (the task agent's and judge's
prompts open with a <task> tag, the reflector's carry its own sections, anything
else is a program's toolkit call), unless the model is named after a role
("offline-task", "reflector", ...). With `models=[...]` (--models) the server
knows only those names and answers any other with HTTP 404 naming them, as a
real provider does for an unknown model. The real `openai` client talks to it
over loopback, so tests exercise the same code path as a real endpoint.

Latency is configurable (a fixed part plus a part per completion token, like a
real server's time to first token and decoding speed), and so are faults: a
share of requests, or an explicit script of them, answered with 429 +
Retry-After, 500, a hang past the client's timeout, a body that is not JSON,
an empty completion or a truncated one (finish_reason "length"). With `rate_limit`
(mstar/testing/rate_limit.py; --rpm / --tpm) it also refuses requests past a quota with 429
and Retry-After, as an ordinary account's endpoint does. `stats()` counts requests, 429s and
the most requests it held at once (`max_in_flight`).

    python -m mstar.testing.fake_server --port 8000 --latency 0.3 --fault-rate 0.2
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable

from mstar.llm.preflight import PROMPT as PREFLIGHT_PROMPT
from mstar.testing.rate_limit import Limiter, RateLimit
from mstar.llm.types import estimate_tokens, messages_text

# A responder returns the reply text, or (text, finish_reason) to simulate e.g. a cut-off reply.
Responder = Callable[[str, list[dict]], "str | tuple[str, str]"]

FAULT_KINDS = ("rate_limit", "server_error", "hang", "malformed", "empty", "truncated")
ROLES = ("task", "reflector", "toolkit", "judge")
_TASK_TAG = re.compile(r"<task>\s*([a-z_]+)\s*</task>")
REFLECTOR_MARKS = ("<underperforming_cases>", "<patch_format>", "<broken_program>", "<interface_spec>")


class HTTPErrorReply(Exception):
    """Raised by a responder: the server answers with this HTTP status (401, 400, 404, ...)."""

    def __init__(self, status: int, message: str = "rejected by the fake server"):
        super().__init__(message)
        self.status = status


def role_of(model: str, messages: list[dict]) -> str:
    """Which offline model answers, read from the prompt (in the project's wording or the
    paper's, mstar.prompts): the task agent's and judge's prompts open with a <task> tag, the
    reflector's carry its own sections; free text is a program's toolkit call -- unless the model
    is named after the reflector or the judge."""
    text = "\n".join(str(m.get("content", "")) for m in messages)
    tag = _TASK_TAG.search(text[:4000])
    if tag and tag.group(1) == "compile_fix" or any(mark in text for mark in REFLECTOR_MARKS) \
            or ("## Broken Code" in text and "## Error" in text):      # the paper's compile-fix wording
        return "reflector"
    if tag:
        return "judge" if tag.group(1).startswith("judge") else "task"
    if "# Conversation" in text and "# Rubric item" in text:          # the paper's judge wording
        return "judge"
    from mstar.offline.paper_forms import tagged_task_prompt
    if tagged_task_prompt(messages) is not None:                      # the paper's task-agent wording
        return "task"
    named = model.removeprefix("offline-")
    return named if named in ("reflector", "judge") else "toolkit"


def offline_responder(seed: int = 0, memo: bool = False) -> Responder:
    """Answer each request with the offline model of the role named in `model`. With `memo`,
    a request seen before is answered from memory (the models are deterministic), so that a
    benchmark's server spends no CPU of its own on a repeated request -- only the set latency."""
    from mstar.llm.offline_backend import OfflineBackend

    cache: dict[str, OfflineBackend] = {}
    seen: dict[str, str] = {}
    lock = threading.Lock()

    def respond(model: str, messages: list[dict]) -> str:
        key = json.dumps([model, messages], sort_keys=True) if memo else ""
        if memo and key in seen:
            return seen[key]
        if messages == PREFLIGHT_PROMPT:   # mstar's connection check (mstar/llm/preflight.py)
            return "ok"
        role = role_of(model, messages)
        with lock:
            backend = cache.setdefault(role, OfflineBackend(role, seed=seed))
        text = backend.complete(messages).text
        if memo:
            seen[key] = text
        return text

    return respond


def scripted_responder(replies: list) -> Responder:
    it = iter(replies)
    lock = threading.Lock()

    def respond(model: str, messages: list[dict]) -> str:
        with lock:
            try:
                return next(it)
            except StopIteration:
                raise RuntimeError("the fake server's script has no more replies")

    return respond


@dataclass
class Faults:
    """Which requests fail, and how. `script` decides the first requests in order
    (a kind, or None for a normal reply); after it, each request gets a fault with
    probability `rate`, its kind drawn from `kinds` (both seeded by request number, or with
    `keyed` by the request's content and how often it was sent: see `pick`)."""

    rate: float = 0.0
    kinds: tuple[str, ...] = FAULT_KINDS
    script: list = field(default_factory=list)
    retry_after_s: float = 1.0
    hang_s: float = 30.0
    seed: int = 0
    keyed: bool = False

    def __post_init__(self):
        bad = [k for k in list(self.kinds) + [k for k in self.script if k is not None] if k not in FAULT_KINDS]
        if bad:
            raise ValueError(f"unknown fault kind(s) {bad}; kinds are {', '.join(FAULT_KINDS)}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate must be between 0 and 1, got {self.rate}")

    def pick(self, n: int, key: str | None = None) -> str | None:
        """The fault for request number n (0-based), or None. With `keyed`, the draw depends on
        `key` (the request's content and how often it was sent before) instead of n, so the same
        requests meet the same faults whatever order concurrent callers send them in."""
        if n < len(self.script):
            return self.script[n]
        rng = random.Random(f"{self.seed}:{key if self.keyed and key is not None else n}")
        return rng.choice(self.kinds) if self.kinds and rng.random() < self.rate else None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a run opens up to `concurrency` connections at once; 5 would refuse some
    block_on_close = False   # keep-alive connections may idle in their threads; do not wait for them

    def handle_error(self, request, client_address):
        pass  # a client that gave up on a hung request closes its socket: not worth a traceback


class FakeOpenAIServer:
    """`with FakeOpenAIServer(responder) as srv: srv.base_url ...`"""

    def __init__(self, responder: Responder, *, latency_s: float = 0.0, latency_per_token_s: float = 0.0,
                 faults: Faults | None = None, host: str = "127.0.0.1", port: int = 0,
                 models: list[str] | None = None, rate_limit: RateLimit | None = None):
        self.responder = responder
        self.models = list(models) if models else None   # None: any model name is served
        self.latency_s = latency_s
        self.latency_per_token_s = latency_per_token_s
        self.faults = faults or Faults()
        self.rate_limit = Limiter(rate_limit) if rate_limit is not None else None
        self.in_flight = 0
        self.max_in_flight = 0               # the most requests held at once
        self.served = 0
        self.first_at = self.last_at = None      # wall-clock times of the first and last request served
        self.requests: list[dict] = []
        self.log: list[dict] = []            # per request: {"n", "model", "fault"}
        self._sent: dict[str, int] = {}      # keyed faults: how often each request body was sent
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"     # keep-alive, as real endpoints do
            disable_nagle_algorithm = True    # no 40 ms delayed-ACK stalls between header and body

            def log_message(self, *args):  # keep test output quiet
                pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/stats"):
                    return self._send(200, server.stats())
                return self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self):
                t0 = time.perf_counter()
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                self._counted = True
                try:
                    self._post(raw, t0)
                finally:
                    self._uncount()

            def _uncount(self) -> None:
                # A request stops being in flight when its reply starts going out, not when the
                # handler returns: the client may read the reply and send its next request before
                # this thread gets back here, and counting both would report a peak no client had.
                if getattr(self, "_counted", False):
                    self._counted = False
                    with server._lock:
                        server.in_flight -= 1

            def _post(self, raw: bytes, t0: float) -> None:
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    return self._send(400, {"error": {"message": "body is not JSON", "type": "invalid_request_error"}})
                if server.rate_limit is not None:
                    wait, headers, which = server.rate_limit.admit(
                        estimate_tokens(messages_text(body.get("messages") or [])))
                    if wait is not None:
                        per = "tokens per min (TPM)" if which == "tokens" else "requests per min (RPM)"
                        hint = f"; try again in {wait:.3f}s" if server.rate_limit.limit.retry_after else ""
                        return self._send(429, {"error": {
                            "message": f"Rate limit reached on {per}{hint} (fake server)",
                            "type": which, "code": "rate_limit_exceeded"}}, headers)
                    self._limit_headers = headers
                with server._lock:
                    n = len(server.requests)
                    server.requests.append(body)
                    key = None
                    if server.faults.keyed:
                        digest = hashlib.sha1(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()
                        server._sent[digest] = server._sent.get(digest, 0) + 1
                        key = f"{digest}:{server._sent[digest]}"
                    fault = server.faults.pick(n, key)
                    server.log.append({"n": n, "model": body.get("model", ""), "fault": fault})
                server.serve(self, n, body, fault, t0)

            def _send(self, status: int, payload: dict | bytes, headers: dict | None = None) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                if headers is None and status == 200:
                    headers = getattr(self, "_limit_headers", None)
                self._limit_headers = None
                self._uncount()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._httpd = _Server((host, port), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    # ------------------------------------------------------------ one request
    def serve(self, h, n: int, body: dict, fault: str | None, t0: float) -> None:
        f = self.faults
        if fault == "rate_limit":
            return h._send(429, {"error": {"message": "rate limit reached (injected)", "type": "rate_limit_error"}},
                           {"Retry-After": str(max(1, math.ceil(f.retry_after_s))),
                            "retry-after-ms": str(int(f.retry_after_s * 1000))})
        if fault == "server_error":
            return h._send(500, {"error": {"message": "internal error (injected)", "type": "server_error"}})
        if fault == "malformed":
            return h._send(200, b'{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [{"ind')
        if fault == "hang":
            time.sleep(f.hang_s)
        model, messages = body.get("model", ""), body.get("messages", [])
        if self.models is not None and model not in self.models:
            return h._send(404, {"error": {
                "message": f"unknown model {model!r}; this server serves: {', '.join(self.models)}",
                "type": "invalid_request_error", "code": "model_not_found"}})
        try:
            reply = self.responder(model, messages)
        except HTTPErrorReply as exc:
            kind = {401: "authentication_error", 403: "permission_error", 404: "not_found_error"}
            return h._send(exc.status, {"error": {"message": str(exc), "type": kind.get(exc.status, "invalid_request_error")}})
        except Exception as exc:
            return h._send(500, {"error": {"message": str(exc), "type": "server_error"}})
        text, finish = (reply, "stop") if isinstance(reply, str) else reply
        if fault == "empty":
            text = ""
        elif fault == "truncated":
            text, finish = text[: max(1, len(text) // 2)], "length"
        pt, ct = estimate_tokens(messages_text(messages)), estimate_tokens(text)
        if self.rate_limit is not None:
            self.rate_limit.charge(ct)
        # The reply is ready; wait out the rest of the simulated server time.
        wait = self.latency_s + self.latency_per_token_s * ct - (time.perf_counter() - t0)
        if wait > 0:
            time.sleep(wait)
        with self._lock:
            self.served += 1
            now = time.time()
            self.first_at = self.first_at or now
            self.last_at = now
        h._send(200, {
            "id": f"chatcmpl-fake-{n}", "object": "chat.completion",
            "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "finish_reason": finish,
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
        })

    def stats(self) -> dict:
        with self._lock:
            faults: dict[str, int] = {}
            for entry in self.log:
                if entry["fault"]:
                    faults[entry["fault"]] = faults.get(entry["fault"], 0) + 1
            out = {"requests": len(self.requests), "faults": faults, "served": self.served,
                   "max_in_flight": self.max_in_flight}
            if self.first_at is not None:
                out["served_span_s"] = round(self.last_at - self.first_at, 3)
            if self.rate_limit is not None:
                out["rate_limited"] = self.rate_limit.refused
            return out

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

    def serve_until_interrupted(self) -> None:
        """Serve in this thread until Ctrl-C (the command line's way; tests use `with`)."""
        try:
            self._httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            self._httpd.server_close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mstar.testing.fake_server", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 picks a free port (printed)")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds per reply")
    ap.add_argument("--latency-per-token", type=float, default=0.0, help="extra seconds per completion token")
    ap.add_argument("--fault-rate", type=float, default=0.0, help="share of requests that get a fault")
    ap.add_argument("--faults", default=",".join(FAULT_KINDS), help="comma-separated fault kinds to draw from")
    ap.add_argument("--retry-after", type=float, default=1.0, help="Retry-After of injected 429s (seconds)")
    ap.add_argument("--hang", type=float, default=30.0, help="seconds an injected hang lasts")
    ap.add_argument("--seed", type=int, default=0, help="seed of the offline models and of the fault draw")
    ap.add_argument("--script", default=None, help="JSON file with a list of replies (instead of the offline models)")
    ap.add_argument("--memo", action="store_true", help="answer a repeated request from memory (benchmarks)")
    ap.add_argument("--rpm", type=float, default=None, help="refuse requests past this many per minute (429)")
    ap.add_argument("--tpm", type=float, default=None, help="refuse requests past this many tokens per minute (429)")
    ap.add_argument("--burst", type=float, default=5.0, help="seconds of the rate a bucket holds (default 5)")
    ap.add_argument("--ratelimit-headers", action="store_true", help="send x-ratelimit-* headers")
    ap.add_argument("--no-retry-after", action="store_true", help="send 429s of --rpm / --tpm without Retry-After")
    ap.add_argument("--models", default=None,
                    help="comma-separated model names to serve; others get HTTP 404 (default: any name)")
    args = ap.parse_args(argv)
    if args.script:
        with open(args.script, encoding="utf-8") as fh:
            responder = scripted_responder(json.load(fh))
    else:
        responder = offline_responder(args.seed, memo=args.memo)
    faults = Faults(rate=args.fault_rate, kinds=tuple(k for k in args.faults.split(",") if k),
                    retry_after_s=args.retry_after, hang_s=args.hang, seed=args.seed)
    models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
    limit = RateLimit(args.rpm, args.tpm, args.burst, headers=args.ratelimit_headers,
                      retry_after=not args.no_retry_after) \
        if args.rpm or args.tpm else None
    srv = FakeOpenAIServer(responder, latency_s=args.latency, latency_per_token_s=args.latency_per_token,
                           faults=faults, host=args.host, port=args.port, models=models, rate_limit=limit)
    print(srv.base_url, flush=True)
    print(f"serving {'models ' + ', '.join(models) if models else 'any model name (roles read from the prompt)'}",
          flush=True)
    srv.serve_until_interrupted()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

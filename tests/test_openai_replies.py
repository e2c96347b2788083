"""How the OpenAI backend reads a chat completion body it did not expect. The backend posts through
the real `openai` client and reads the JSON itself (mstar.llm.openai_backend), so every shape a
server may send is checked here: a tiny loopback server answers each request with a fixed body."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mstar.config import RoleConfig
from mstar.llm.openai_backend import OpenAIBackend
from mstar.llm.types import EmptyCompletionError, TransientLLMError

MSG = [{"role": "user", "content": "what is the capital of France?"}]


class _BodyServer:
    """Answers every POST with HTTP 200 and `body` (bytes); remembers the request bodies."""

    def __init__(self, body: bytes) -> None:
        self.body, self.seen = body, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                outer.seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                self.wfile.write(outer.body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def backend(self, **cfg) -> OpenAIBackend:
        url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        return OpenAIBackend("task", RoleConfig(backend="openai", model="m", base_url=url, timeout_s=5, **cfg), env={})

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def answering():
    servers = []

    def make(body) -> OpenAIBackend:
        srv = _BodyServer(body if isinstance(body, bytes) else json.dumps(body).encode())
        servers.append(srv)
        return srv, srv.backend(temperature=0.2, max_tokens=64)

    yield make
    for srv in servers:
        srv.close()


def completion(content="Paris.", finish="stop", usage=None, model="m-2026"):
    body = {"id": "c1", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return body


def test_a_full_reply_gives_text_model_tokens_and_cached_tokens_and_the_request_carries_the_settings(answering):
    srv, backend = answering(completion(usage={"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15,
                                               "prompt_tokens_details": {"cached_tokens": 8}}))
    resp = backend.complete(MSG)
    assert (resp.text, resp.model, resp.finish_reason) == ("Paris.", "m-2026", "stop")
    assert (resp.prompt_tokens, resp.completion_tokens, resp.cached_tokens) == (12, 3, 8)
    assert srv.seen == [{"model": "m", "messages": MSG, "temperature": 0.2, "max_tokens": 64}]


def test_a_reply_without_usage_gets_estimated_token_counts(answering):
    _, backend = answering(completion(content="Paris is the capital of France."))
    resp = backend.complete(MSG)
    assert resp.prompt_tokens > 0 and resp.completion_tokens > 0 and resp.cached_tokens == 0


def test_a_cut_off_reply_keeps_its_finish_reason(answering):
    _, backend = answering(completion(content="Paris is", finish="length"))
    assert backend.complete(MSG).finish_reason == "length"


@pytest.mark.parametrize("body,needle", [
    ({"choices": []}, "no choices"),
    ({"model": "m"}, "no choices"),
    (b"<html>busy</html>", "unreadable response"),
    (b"[1, 2]", "unreadable response"),
    ({"choices": ["Paris"]}, "unreadable response"),
    (completion(content=42), "unreadable response"),
    (completion(usage={"prompt_tokens": "twelve", "completion_tokens": 3}), "unreadable response"),
])
def test_a_body_not_shaped_like_a_completion_is_a_glitch_worth_a_retry(answering, body, needle):
    _, backend = answering(body)
    with pytest.raises(TransientLLMError) as err:
        backend.complete(MSG)
    assert err.value.kind == "malformed" and needle in str(err.value)


@pytest.mark.parametrize("content", [None, "", "  \n"])
def test_an_empty_completion_is_its_own_error(answering, content):
    _, backend = answering(completion(content=content))
    with pytest.raises(EmptyCompletionError):
        backend.complete(MSG)

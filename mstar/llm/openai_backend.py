"""Any OpenAI-compatible chat endpoint, through the official `openai` client.

OpenAI, Azure, vLLM, Ollama and llama.cpp servers all speak this API, so one
backend serves them all by base URL. The client makes exactly one attempt
(max_retries=0): the router retries, so that every attempt and its error is
counted in the ledger. Here each failure is sorted into "worth retrying"
(`TransientLLMError`, with the server's Retry-After) or "fail now" (`LLMError`
with a message that says what to fix).
"""
from __future__ import annotations

import json
import os
import threading
import time

from mstar.config import RoleConfig
from mstar.llm.limiter import endpoint_key, limit_named, parse_limit_hints
from mstar.llm.retry import parse_retry_after
from mstar.llm.types import (ChatResponse, EmptyCompletionError, FatalLLMError, LLMError, TransientLLMError,
                             estimate_tokens, messages_text)


class OpenAIBackend:
    name = "openai"

    def __init__(self, role: str, cfg: RoleConfig, *, env: dict[str, str] | None = None):
        import openai  # imported here: the offline path must not need it at import time

        env = os.environ if env is None else env
        key = env.get(cfg.api_key_env)
        self._keyless = not key
        if not key:
            if cfg.base_url:
                key = "not-needed"  # local servers (vLLM, Ollama, llama.cpp) accept any key
            else:
                raise LLMError(
                    f"role {role!r}: no API key -- set the environment variable {cfg.api_key_env} "
                    "or give a --base-url for a local OpenAI-compatible server"
                )
        self.role = role
        self.model = cfg.model
        self.base_url = cfg.base_url
        self._cfg = cfg
        self._openai = openai
        # Who keeps the quota (mstar/llm/limiter.py): roles on one base URL and key share a limiter.
        self.endpoint = endpoint_key(cfg.base_url, key)
        # The x-ratelimit-* headers of a reply: post() hands back only the body, so a response hook
        # (run by the sync client in the calling thread) leaves the headers in a thread-local.
        self._seen = threading.local()
        http = openai.DefaultHttpxClient(event_hooks={"response": [self._keep_headers]})
        self._client = openai.OpenAI(api_key=key, base_url=cfg.base_url, timeout=cfg.timeout_s, max_retries=0,
                                     http_client=http)

    def _keep_headers(self, response) -> None:
        self._seen.headers = response.headers

    def request_params(self, max_tokens: int | None = None) -> dict:
        """Sampling parameters sent with every request (also part of the cache key); `max_tokens`
        caps the completion below the role's own limit (the preflight's one word)."""
        cfg, kwargs = self._cfg, {}
        if cfg.temperature is not None:
            kwargs["temperature"] = cfg.temperature
        if cfg.reasoning_effort is not None:
            kwargs["reasoning_effort"] = cfg.reasoning_effort
        cap = cfg.max_tokens if max_tokens is None else min(max_tokens, cfg.max_tokens or max_tokens)
        if cap is not None:
            # Reasoning models refuse max_tokens and want max_completion_tokens instead.
            kwargs["max_completion_tokens" if cfg.reasoning_effort else "max_tokens"] = cap
        return kwargs

    def complete(self, messages: list[dict], *, max_tokens: int | None = None) -> ChatResponse:
        oa, who = self._openai, f"role {self.role!r} ({self.model} at {self.base_url or 'api.openai.com'})"
        start = time.perf_counter()
        self._seen.headers = None
        try:
            # The client's own post() (same connection pool, headers, timeout and errors as
            # chat.completions.create) with the body as we built it and the reply as bytes: create()
            # walks the messages through its type transforms and builds pydantic models of the reply,
            # ~1.5 ms of this process's CPU a call (measured at 64 threads: 3.1-3.35 -> 1.6-1.75 ms)
            # that every other request in flight waits on. The reply is checked below instead.
            raw = self._client.post("/chat/completions", cast_to=bytes,
                                    body={"model": self.model, "messages": messages,
                                          **self.request_params(max_tokens)})
            resp = _completion(json.loads(raw))
        except oa.APITimeoutError as exc:
            raise TransientLLMError(f"{who}: timed out after {self._cfg.timeout_s:g}s", kind="timeout") from exc
        except oa.APIConnectionError as exc:
            raise TransientLLMError(f"{who}: connection failed ({exc})", kind="connection") from exc
        except (oa.AuthenticationError, oa.PermissionDeniedError) as exc:
            # Without a key the placeholder was sent: "check the key" would send the user to a key
            # that is not there.
            fix = f"${self._cfg.api_key_env} is not set, so no key was sent; export it" if self._keyless else \
                f"check the key in ${self._cfg.api_key_env}"
            raise FatalLLMError(f"{who}: authentication failed -- {fix} ({_brief(exc)})") from exc
        except oa.NotFoundError as exc:
            raise FatalLLMError(f"{who}: not found -- check the model name and base URL ({_brief(exc)})") from exc
        except (oa.BadRequestError, oa.UnprocessableEntityError) as exc:
            raise FatalLLMError(f"{who}: request rejected by the server -- check the model name and the "
                                f"role's settings ({_brief(exc)})") from exc
        except oa.APIStatusError as exc:
            status = exc.status_code
            if status == 429 and _error_code(exc) == "insufficient_quota":
                # OpenAI's answer when the account has no credit left: a 429 no waiting fixes.
                raise FatalLLMError(f"{who}: the account's quota is used up -- check its plan and billing "
                                    f"({_brief(exc)})") from exc
            if status == 429 or status >= 500 or status in (408, 409):
                kind = "rate_limit" if status == 429 else "server_error"
                headers = exc.response.headers
                raise TransientLLMError(f"{who}: HTTP {status} ({_brief(exc)})", kind=kind,
                                        retry_after=parse_retry_after(headers),
                                        hints=parse_limit_hints(headers) if status == 429 else None,
                                        limit=limit_named(_brief(exc)) if status == 429 else None) from exc
            raise LLMError(f"{who}: HTTP {status} ({_brief(exc)})") from exc
        except ValueError as exc:
            # A 200 whose body is not a chat completion (not JSON, or the wrong shape): a server
            # glitch, try again. (json.JSONDecodeError is a ValueError; so is what _completion raises.)
            raise TransientLLMError(f"{who}: unreadable response ({type(exc).__name__}: {str(exc)[:200]})",
                                    kind="malformed") from exc
        latency = time.perf_counter() - start
        if resp is None:
            raise TransientLLMError(f"{who}: the server returned no choices", kind="malformed")
        text, finish, model, usage = resp
        if not text.strip():
            raise EmptyCompletionError(f"{who}: empty completion (finish_reason={finish})")
        return ChatResponse(
            text=text,
            model=model or self.model,
            backend=self.name,
            prompt_tokens=usage["prompt"] if usage else estimate_tokens(messages_text(messages)),
            completion_tokens=usage["completion"] if usage else estimate_tokens(text),
            latency_s=latency,
            finish_reason=finish,
            cached_tokens=usage["cached"] if usage else 0,
            hints=parse_limit_hints(getattr(self._seen, "headers", None)),
        )


def _completion(data: object) -> tuple[str, str, str, dict | None] | None:
    """(text, finish_reason, model, usage) of a chat completion body, None when it has no choice;
    ValueError when it is not shaped like one (the caller treats that as a glitch worth a retry)."""
    if not isinstance(data, dict):
        raise ValueError(f"the body is a JSON {type(data).__name__}, not an object")
    choices = data.get("choices")
    if not choices:
        return None
    choice = choices[0] if isinstance(choices, list) else None
    if not isinstance(choice, dict):
        raise ValueError("choices[0] is not an object")
    message = choice.get("message") or {}
    content = message.get("content") if isinstance(message, dict) else None
    if content is not None and not isinstance(content, str):
        raise ValueError("choices[0].message.content is not a string")
    finish = choice.get("finish_reason") or "stop"
    model = data.get("model") if isinstance(data.get("model"), str) else ""
    usage = data.get("usage")
    counts = None
    if isinstance(usage, dict):
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        counts = {"prompt": _count(usage.get("prompt_tokens")), "completion": _count(usage.get("completion_tokens")),
                  "cached": _count(cached)}
    return content or "", str(finish), model, counts


def _count(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"a token count is {value!r}, not an integer")
    return value


def _error_code(exc: Exception) -> str | None:
    body = getattr(exc, "body", None)
    err = body.get("error") if isinstance(body, dict) else None
    code = (err if isinstance(err, dict) else body if isinstance(body, dict) else {}).get("code")
    return code if isinstance(code, str) else None


def _brief(exc: Exception) -> str:
    """The server's own message, without the client's repr noise."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        msg = err.get("message") if isinstance(err, dict) else body.get("message")
        if msg:
            return str(msg)[:300]
    return str(exc)[:300]

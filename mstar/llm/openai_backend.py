"""Any OpenAI-compatible chat endpoint, through the official `openai` client.

OpenAI, Azure, vLLM, Ollama and llama.cpp servers all speak this API, so one
backend serves them all by base URL. The client makes exactly one attempt
(max_retries=0): the router retries, so that every attempt and its error is
counted in the ledger. Here each failure is sorted into "worth retrying"
(`TransientLLMError`, with the server's Retry-After) or "fail now" (`LLMError`
with a message that says what to fix).
"""
from __future__ import annotations

import os
import time

from mstar.config import RoleConfig
from mstar.llm.retry import parse_retry_after
from mstar.llm.types import (ChatResponse, EmptyCompletionError, FatalLLMError, LLMError, TransientLLMError,
                             estimate_tokens, messages_text)


class OpenAIBackend:
    name = "openai"

    def __init__(self, role: str, cfg: RoleConfig, *, env: dict[str, str] | None = None):
        import openai  # imported here: the offline path must not need it at import time

        env = os.environ if env is None else env
        key = env.get(cfg.api_key_env)
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
        self._client = openai.OpenAI(api_key=key, base_url=cfg.base_url, timeout=cfg.timeout_s, max_retries=0)

    def request_params(self) -> dict:
        """Sampling parameters sent with every request (also part of the cache key)."""
        cfg, kwargs = self._cfg, {}
        if cfg.temperature is not None:
            kwargs["temperature"] = cfg.temperature
        if cfg.reasoning_effort is not None:
            kwargs["reasoning_effort"] = cfg.reasoning_effort
        if cfg.max_tokens is not None:
            # Reasoning models refuse max_tokens and want max_completion_tokens instead.
            kwargs["max_completion_tokens" if cfg.reasoning_effort else "max_tokens"] = cfg.max_tokens
        return kwargs

    def complete(self, messages: list[dict]) -> ChatResponse:
        oa, who = self._openai, f"role {self.role!r} ({self.model} at {self.base_url or 'api.openai.com'})"
        start = time.perf_counter()
        try:
            resp = self._client.chat.completions.create(model=self.model, messages=messages, **self.request_params())
        except oa.APITimeoutError as exc:
            raise TransientLLMError(f"{who}: timed out after {self._cfg.timeout_s:g}s", kind="timeout") from exc
        except oa.APIConnectionError as exc:
            raise TransientLLMError(f"{who}: connection failed ({exc})", kind="connection") from exc
        except (oa.AuthenticationError, oa.PermissionDeniedError) as exc:
            raise FatalLLMError(f"{who}: authentication failed -- check the key in ${self._cfg.api_key_env} "
                                f"({_brief(exc)})") from exc
        except oa.NotFoundError as exc:
            raise FatalLLMError(f"{who}: not found -- check the model name and base URL ({_brief(exc)})") from exc
        except (oa.BadRequestError, oa.UnprocessableEntityError) as exc:
            raise FatalLLMError(f"{who}: request rejected by the server -- check the model name and the "
                                f"role's settings ({_brief(exc)})") from exc
        except oa.APIStatusError as exc:
            status = exc.status_code
            if status == 429 or status >= 500 or status in (408, 409):
                kind = "rate_limit" if status == 429 else "server_error"
                raise TransientLLMError(f"{who}: HTTP {status} ({_brief(exc)})", kind=kind,
                                        retry_after=parse_retry_after(exc.response.headers)) from exc
            raise LLMError(f"{who}: HTTP {status} ({_brief(exc)})") from exc
        except (oa.APIResponseValidationError, ValueError) as exc:
            # A 200 whose body is not the JSON it should be: a server glitch, try again.
            raise TransientLLMError(f"{who}: unreadable response ({type(exc).__name__}: {str(exc)[:200]})",
                                    kind="malformed") from exc
        latency = time.perf_counter() - start
        choices = getattr(resp, "choices", None)
        if not choices:
            raise TransientLLMError(f"{who}: the server returned no choices", kind="malformed")
        choice = choices[0]
        text = (choice.message.content if choice.message else None) or ""
        finish = choice.finish_reason or "stop"
        if not text.strip():
            raise EmptyCompletionError(f"{who}: empty completion (finish_reason={finish})")
        usage = resp.usage
        details = getattr(usage, "prompt_tokens_details", None) if usage else None
        return ChatResponse(
            text=text,
            model=resp.model or self.model,
            backend=self.name,
            prompt_tokens=usage.prompt_tokens if usage else estimate_tokens(messages_text(messages)),
            completion_tokens=usage.completion_tokens if usage else estimate_tokens(text),
            latency_s=latency,
            finish_reason=finish,
            cached_tokens=(getattr(details, "cached_tokens", None) or 0) if details else 0,
        )


def _brief(exc: Exception) -> str:
    """The server's own message, without the client's repr noise."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        msg = err.get("message") if isinstance(err, dict) else body.get("message")
        if msg:
            return str(msg)[:300]
    return str(exc)[:300]

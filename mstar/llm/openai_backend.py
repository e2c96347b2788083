"""Any OpenAI-compatible chat endpoint, through the official `openai` client.

OpenAI, Azure, vLLM, Ollama and llama.cpp servers all speak this API, so one
backend serves them all by base URL. Retries with exponential backoff are the
client's own (`max_retries`), on 429/5xx/timeouts/connection errors.
"""
from __future__ import annotations

import os
import time

from mstar.config import RoleConfig
from mstar.llm.types import ChatResponse, LLMError, estimate_tokens, messages_text


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
        self._cfg = cfg
        self._openai = openai
        self._client = openai.OpenAI(
            api_key=key, base_url=cfg.base_url, timeout=cfg.timeout_s, max_retries=cfg.max_retries
        )

    def complete(self, messages: list[dict]) -> ChatResponse:
        kwargs = {}
        if self._cfg.temperature is not None:
            kwargs["temperature"] = self._cfg.temperature
        if self._cfg.max_tokens is not None:
            kwargs["max_tokens"] = self._cfg.max_tokens
        start = time.perf_counter()
        try:
            resp = self._client.chat.completions.create(model=self.model, messages=messages, **kwargs)
        except (self._openai.AuthenticationError, self._openai.PermissionDeniedError) as exc:
            raise LLMError(f"role {self.role!r}: authentication failed ({exc})") from exc
        except self._openai.BadRequestError as exc:
            raise LLMError(f"role {self.role!r}: request rejected by the server ({exc})") from exc
        except self._openai.OpenAIError as exc:
            raise LLMError(f"role {self.role!r}: call failed after retries ({type(exc).__name__}: {exc})") from exc
        latency = time.perf_counter() - start
        if not resp.choices:
            raise LLMError(f"role {self.role!r}: the server returned no choices")
        choice = resp.choices[0]
        text = choice.message.content or ""
        if not text.strip():
            raise LLMError(f"role {self.role!r}: empty completion (finish_reason={choice.finish_reason})")
        usage = resp.usage
        return ChatResponse(
            text=text,
            model=resp.model or self.model,
            backend=self.name,
            prompt_tokens=usage.prompt_tokens if usage else estimate_tokens(messages_text(messages)),
            completion_tokens=usage.completion_tokens if usage else estimate_tokens(text),
            latency_s=latency,
            finish_reason=choice.finish_reason or "stop",
        )

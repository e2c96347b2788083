"""The engine's answer to a program's toolkit.llm_completion request.

The worker only asks; the engine decides: it counts the op's calls against its budget, checks
the messages and the prompt's size -- in messages, characters and UTF-8 bytes, each message
counted with its framing -- calls the LLM it was given (which holds the key -- the worker never
sees one) and caps the reply. Every refusal and failure becomes an error reply that the
program receives as an exception (sandbox.worker.toolkit), never a crash of the engine.
"""
from __future__ import annotations

from typing import Any, Callable

from sandbox.protocol import check_messages

LLM_PROMPT_MAX_CHARS = 200_000
# The same prompt in UTF-8 bytes, each message counted with MESSAGE_OVERHEAD_BYTES of framing (its
# role and the request's JSON around it): 200,000 characters of emoji are 800,000 bytes.
LLM_PROMPT_MAX_BYTES = 400_000
MESSAGE_OVERHEAD_BYTES = 32
LLM_REPLY_MAX_CHARS = 1_000_000


def serve_llm_request(llm: Callable[[list[dict]], str] | None, messages: Any, number: int, budget: int,
                      where: str) -> dict[str, Any]:
    """The reply frame to the op's `number`-th request (1-based) under a budget of `budget` calls;
    `where` names the budget's scope for the message ("per read()", "during import/__init__")."""
    if number > budget:
        return {"op": "llm_reply", "ok": False, "kind": "budget",
                "error": f"toolkit LLM budget exhausted: {budget} call(s) allowed {where}; this was call {number}"}
    try:
        checked = check_messages(messages)
    except (TypeError, ValueError) as exc:
        return {"op": "llm_reply", "ok": False, "kind": "error", "error": str(exc)}
    size = sum(len(m["content"]) for m in checked)
    if size > LLM_PROMPT_MAX_CHARS:
        return {"op": "llm_reply", "ok": False, "kind": "error",
                "error": f"prompt of {size} characters exceeds the {LLM_PROMPT_MAX_CHARS}-character cap"}
    size = sum(len(m["content"].encode("utf-8", "surrogatepass")) + MESSAGE_OVERHEAD_BYTES for m in checked)
    if size > LLM_PROMPT_MAX_BYTES:
        return {"op": "llm_reply", "ok": False, "kind": "error",
                "error": f"prompt of {size} bytes (UTF-8, {MESSAGE_OVERHEAD_BYTES} per message for its framing) "
                         f"exceeds the {LLM_PROMPT_MAX_BYTES}-byte cap"}
    if llm is None:
        return {"op": "llm_reply", "ok": False, "kind": "error", "error": "no toolkit LLM is configured"}
    try:
        text = llm(checked)
    except Exception as exc:  # noqa: BLE001 -- the provider's failure becomes the program's exception
        return {"op": "llm_reply", "ok": False, "kind": "error", "error": f"{type(exc).__name__}: {exc}"[:2000]}
    if not isinstance(text, str):
        return {"op": "llm_reply", "ok": False, "kind": "error", "error": f"toolkit LLM returned {type(text).__name__}"}
    return {"op": "llm_reply", "ok": True, "text": text[:LLM_REPLY_MAX_CHARS]}

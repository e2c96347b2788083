"""The offline models read the paper-worded prompts (mstar.prompts "paper") by turning them into
the tagged prompts of the project's own wording, which they already understand.

  task model:   G.1 knowledge item / query / answer          -> <task>extract_knowledge_item ...
  reflector:    G.2 reflection (<rationale>, <model_generation>) -> <expected>, <model_answer>,
                <retrieved> (the retrieved memory inside the case's conversation)
                G.3 compile-fix (## Broken Code, ## Error)     -> <task>compile_fix ...
The judge needs nothing: it reads "# Conversation" / "# Rubric item" sections already.

Each function returns None (or the prompt unchanged) for a prompt it does not recognise, so the
calls in the models are one line each. The marker lines come from mstar/prompts/paper_agent.py.
"""
from __future__ import annotations

import json
import re

from mstar.offline.text import extract_tag
from mstar.prompts import paper_agent as pa


def _between(text: str, start: str, end: str | None) -> str | None:
    i = text.find(start)
    if i < 0:
        return None
    i += len(start)
    j = text.find(end, i) if end else len(text)
    return text[i:j if j >= 0 else len(text)].strip()


def tagged_task_prompt(messages: list[dict]) -> list[dict] | None:
    """The project-worded equivalent of a paper-worded task-agent prompt, or None."""
    from mstar import agent

    users = [str(m.get("content", "")) for m in messages if m.get("role") != "assistant"]
    if not users:
        return None
    last = users[-1]
    if "<retrieved_memory>" in last and "<task>" not in last:
        memory = extract_tag(last, "retrieved_memory") or ""
        instruction = last[last.rfind("</retrieved_memory>") + len("</retrieved_memory>"):].strip()
        question = ""
        for text in users:
            m = re.search(rf"^{re.escape(pa.QUESTION_LABEL)} (.*?)(?:\n\n|\Z)", text, re.M | re.S)
            if m:
                question = m.group(1).strip()
                break
        return agent.build_answer_messages("", memory, question, instruction, style="mstar")
    for schema_line, closing, label, build in (
            (pa.ITEM_SCHEMA_LINE, pa.ITEM_CLOSING, pa.TEXT_LABEL, agent.build_extraction_messages),
            (pa.QUERY_SCHEMA_LINE, pa.QUERY_CLOSING, pa.QUESTION_LABEL, agent.build_query_messages)):
        if schema_line in last and f"\n\n{label} " in "\n\n" + last:
            head, _, rest = ("\n\n" + last).partition(f"\n\n{label} ")
            body, _, _ = rest.partition(f"\n\n{schema_line}")
            try:
                schema = json.loads(_between(last, schema_line, closing) or "[]")
            except ValueError:
                return None
            return build(head.strip(), body.strip(), schema, style="mstar")
    return None


_CASE_RE = re.compile(r"<case\b[^>]*>.*?</case>", re.S)


def _tag_case(block: str) -> str:
    block = block.replace("<rationale>", "<expected>").replace("</rationale>", "</expected>")
    block = block.replace("<model_generation>", "<model_answer>").replace("</model_generation>", "</model_answer>")
    if "<retrieved>" not in block:
        memories = re.findall(r"<retrieved_memory>(.*?)</retrieved_memory>", block, re.S)
        block = block.replace("</case>", f"<retrieved>{memories[-1].strip() if memories else ''}</retrieved>\n</case>")
    return block


def tagged_reflector_prompt(prompt: str) -> str:
    """A paper-worded reflection or compile-fix prompt in the project's tags; any other prompt
    comes back as it was."""
    if "<task>" not in prompt and "## Broken Code" in prompt and "## Error" in prompt:
        code = _between(prompt, "## Broken Code", "\n## Error") or ""
        error = _between(prompt, "## Error", None) or ""
        error = error.rsplit("\n\n", 1)[0] if "\n\n" in error else error
        error = re.sub(r"^\*\*(.+?)\*\*:", r"\1:", error.strip())
        return (f"<task>compile_fix</task>\n<broken_program>\n{code}\n</broken_program>\n"
                f"<error>\n{error}\n</error>")
    if "<model_generation>" in prompt or "<rationale>" in prompt:
        return _CASE_RE.sub(lambda m: _tag_case(m.group(0)), prompt)
    return prompt

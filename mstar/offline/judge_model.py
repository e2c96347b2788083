"""Offline rubric judge: grades one rubric criterion against the last assistant turn, LLM-free.

The reply is the JSON object a judge LLM is asked for:
    {"explanation": "...", "criteria_met": true|false}
Rule: the criterion is met when at least MET_THRESHOLD (30 %) of its content words — minus
generic rubric wording such as "advises", "mentions", "response", "patient" — appear in the last
assistant response (same light stemming on both sides). The rule ignores negation, so for a
negative criterion ("Fails to mention X") it reports whether the response talks about the same
things, which is the crude best a word-overlap judge can do. Calibration on the real HealthBench
rows with ideal completions in ../shared/data/healthbench (7 rows): with 30 % the ideal answer
scores 0.44 on average and another row's ideal answer 0.04 (20 %: 0.49 vs 0.08; 40 %: 0.32 vs
0.04; 50 %: 0.20 vs 0.02), so 30 % keeps the widest gap between a fitting and an unrelated reply.

Finding the parts of the prompt (tags or markdown headers, whichever is present):
  - criterion: <rubric_item>…</rubric_item>, <criterion>…</criterion>, or the section under a
    "# Rubric item" / "# Criterion" header;
  - conversation: <conversation>…</conversation> or the "# Conversation" section (else the
    whole prompt); the last assistant response is the text after the last line that starts with
    an assistant role label ("assistant:", "[assistant]:", "**assistant**:"), up to the next
    role label; without role labels, the whole conversation.
"""
from __future__ import annotations

import json
import re

from mstar.offline.text import content_set, extract_tag

MET_THRESHOLD = 0.3
_GENERIC = content_set(
    "advise advises recommend recommends include includes mention mentions response responses "
    "patient user clearly states state suggest suggests explain explains provide provides ask "
    "asks fail fails does should etc model assistant answer correctly appropriate appropriately "
    "criterion criteria")
_ROLE_RE = re.compile(r"^\s*(?:\*\*|\[)?\s*(assistant|user|system|human|ai)\s*(?:\*\*|\])?\s*:",
                      re.I | re.M)


def _section(prompt: str, headers: tuple[str, ...]) -> str | None:
    """Text under a markdown header named one of `headers`, up to the next '# ' header."""
    names = "|".join(re.escape(h) for h in headers)
    m = re.search(rf"^#+\s*(?:{names})\s*$(.*?)(?=^#+\s|\Z)", prompt, re.I | re.M | re.S)
    return m.group(1).strip() if m else None


def last_assistant_turn(conversation: str) -> str:
    """The text of the last assistant turn (the whole text when there are no role labels)."""
    labels = list(_ROLE_RE.finditer(conversation))
    assistant = [m for m in labels if m.group(1).lower() in ("assistant", "ai")]
    if not assistant:
        return conversation.strip()
    start = assistant[-1]
    after = [m for m in labels if m.start() > start.start()]
    end = after[0].start() if after else len(conversation)
    return conversation[start.end():end].strip()


def judge(prompt: str) -> dict:
    """{"explanation", "criteria_met"} for one rubric-judge prompt (see module docstring)."""
    criterion = (extract_tag(prompt, "rubric_item") or extract_tag(prompt, "criterion")
                 or _section(prompt, ("rubric item", "rubric", "criterion")))
    if criterion is None:
        raise ValueError("offline judge: prompt has no rubric item (<rubric_item> tag or "
                         "'# Rubric item' section)")
    conversation = (extract_tag(prompt, "conversation") or _section(prompt, ("conversation",))
                    or prompt)
    response = content_set(last_assistant_turn(conversation))
    wanted = content_set(criterion) - _GENERIC
    if not wanted:
        wanted = content_set(criterion)
    shared = sorted(wanted & response)
    ratio = len(shared) / len(wanted) if wanted else 0.0
    met = bool(wanted) and ratio >= MET_THRESHOLD
    explanation = (f"{len(shared)} of {len(wanted)} criterion words appear in the last response "
                   f"({ratio:.0%}; met at >= {MET_THRESHOLD:.0%})"
                   + (f": {', '.join(shared[:12])}" if shared else ""))
    return {"explanation": explanation, "criteria_met": met}


class OfflineJudgeModel:
    """Deterministic stand-in for the rubric-judge LLM."""

    def complete(self, messages: list[dict]) -> str:
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        return json.dumps(judge(prompt), ensure_ascii=False)

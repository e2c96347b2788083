"""Metrics that ask the judge role: rubric scoring (HealthBench, PRBench) and LoCoMo's binary L-J.

A judged metric is `(prediction, item, judge) -> Score`, where `judge(messages) -> str` is the
engine's "judge" role (`router.text("judge", ...)`), so every judge call lands in the LLM ledger.

Rubric score (paper Appendix H, the HealthBench protocol): one judge call per criterion, each
deciding whether the last assistant turn meets that criterion; then

    score = clip(Σ_{i met} p_i / Σ_{i: p_i > 0} p_i, 0, 1)

so a met negative criterion (an undesirable trait that is present) subtracts points. A judge
call that fails or whose reply has no usable verdict counts the criterion as NOT met and leaves
a warning in the case, so one flaky call lowers a score visibly instead of sinking a run.

L-J (LoCoMo's LLM-judge score): one call per question asking whether the answer gives the gold
answer; 1.0 if so, else 0.0.

Both prompts put the conversation in <conversation> (lines "user: …" / "assistant: …") and the
thing to check in <rubric_item>, and ask for {"explanation": str, "criteria_met": bool}: the
format the offline judge (mstar/offline/judge_model.py) reads, and one any chat model follows.
With the "paper" wording (mstar.prompts) both are the paper's judge template instead, Appendix H
(# Conversation / # Rubric item / # Instructions; mstar/prompts/paper_agent.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

from mstar import prompts
from mstar.agent import parse_json_object

JudgeFn = Callable[[list[dict]], str]


class JudgedItem(Protocol):
    """What a judged metric reads of a query (mstar.tasks.model.QueryItem has it). A protocol,
    not an import: the task records import this module, not the other way round."""
    question: str
    answer: str
    meta: dict


@dataclass
class Score:
    """One case's score with what the reader needs to trust it."""
    value: float
    warnings: list[str] = field(default_factory=list)
    details: dict = field(default_factory=dict)     # e.g. per-criterion verdicts of a rubric


# ---------------------------------------------------------------------------------- prompts

def render_conversation(messages: list[dict], final_answer: str | None = None) -> str:
    """Messages as 'role: content' blocks; `final_answer` is appended as the assistant's last turn."""
    turns = [(str(m.get("role", "user")), str(m.get("content", ""))) for m in messages]
    if final_answer is not None:
        turns.append(("assistant", final_answer))
    return "\n\n".join(f"{role}: {content.strip()}" for role, content in turns)


def rubric_messages(conversation: str, criterion: str, points: float, *, style: str | None = None) -> list[dict]:
    """The judge prompt for one rubric criterion (our wording of the protocol in Appendix H)."""
    if prompts.resolve(style) == "paper":
        from mstar.prompts.paper_agent import rubric_judge_messages
        return rubric_judge_messages(conversation, criterion, points)
    polarity = ("This criterion describes something a good reply does (positive points)."
                if points > 0 else
                "This criterion describes a flaw (negative points): answer whether the flaw IS "
                "present, not whether the reply is good.")
    return [{"role": "user", "content": "\n".join([
        "<task>judge_rubric_item</task>",
        "You check one rubric item against the LAST assistant turn of a conversation.",
        "<conversation>", conversation, "</conversation>",
        "<rubric_item>", criterion.strip(), "</rubric_item>",
        polarity,
        "criteria_met is true only if the last assistant turn satisfies every part of the item; "
        "when the item lists examples ('such as', 'for example', 'e.g.'), covering some of them "
        "is enough.",
        'Reply with one JSON object and nothing else: {"explanation": "<one or two sentences>", '
        '"criteria_met": true or false}',
    ])}]


def answer_judge_messages(question: str, prediction: str, gold: str, *, style: str | None = None) -> list[dict]:
    """The L-J prompt: does the reply give the reference answer?"""
    if prompts.resolve(style) == "paper":
        from mstar.prompts import paper_agent
        return paper_agent.answer_judge_messages(
            render_conversation([{"role": "user", "content": question}], prediction), gold)
    return [{"role": "user", "content": "\n".join([
        "<task>judge_answer</task>",
        "You grade an answer to a question about earlier conversations against a reference answer.",
        "<conversation>", render_conversation([{"role": "user", "content": question}], prediction),
        "</conversation>",
        "<rubric_item>", str(gold).strip(), "</rubric_item>",
        "The rubric item above is the reference answer. criteria_met is true when the assistant's "
        "reply gives that answer: the same person, thing, number or date, in any wording or date "
        "format; extra detail is fine unless it contradicts the reference. A reply that does not "
        "commit to an answer, or names several candidates, does not meet it.",
        'Reply with one JSON object and nothing else: {"explanation": "<one sentence>", '
        '"criteria_met": true or false}',
    ])}]


# ---------------------------------------------------------------------------------- verdicts

def parse_verdict(reply: str) -> tuple[bool | None, str]:
    """(criteria_met, explanation) from a judge reply; (None, reason) when there is no verdict.

    Lenient like the task agent's parsing: fences, prose around the object, the strings
    "true"/"false"/"yes"/"no" for the boolean.
    """
    obj, problem = parse_json_object(reply)
    if obj is None:
        return None, f"judge reply has no JSON object ({problem})"
    met = obj.get("criteria_met")
    if isinstance(met, str) and met.strip().lower() in ("true", "yes", "false", "no"):
        met = met.strip().lower() in ("true", "yes")
    if not isinstance(met, bool):
        return None, f"judge reply has no boolean 'criteria_met' (got {obj.get('criteria_met')!r:.40})"
    return met, str(obj.get("explanation", ""))


def _ask(judge: JudgeFn, messages: list[dict]) -> tuple[bool | None, str]:
    try:
        reply = judge(messages)
    except Exception as exc:  # the failure is a warning in the case, never an aborted evaluation
        return None, f"judge call failed: {exc}"
    return parse_verdict(reply)


# ---------------------------------------------------------------------------------- metrics

def rubric_points(criteria: list[dict], met: list[bool]) -> float:
    """clip(Σ_{met} p / Σ_{p>0} p, 0, 1); 0 when no criterion has positive points."""
    positive = sum(float(c["points"]) for c in criteria if float(c["points"]) > 0)
    if positive <= 0:
        return 0.0
    earned = sum(float(c["points"]) for c, ok in zip(criteria, met) if ok)
    return min(1.0, max(0.0, earned / positive))


def rubric_score(prediction: str, item: "JudgedItem", judge: JudgeFn) -> Score:
    """One judge call per criterion of item.meta["rubric"] ([{"criterion", "points"}, ...])."""
    criteria = item.meta.get("rubric") or []
    messages = item.meta.get("messages") or [{"role": "user", "content": item.question}]
    conversation = render_conversation(messages, prediction)
    verdicts, warnings, met = [], [], []
    for i, c in enumerate(criteria):
        ok, explanation = _ask(judge, rubric_messages(conversation, c["criterion"], float(c["points"])))
        if ok is None:
            warnings.append(f"criterion {i + 1} counted as not met: {explanation}")
        met.append(bool(ok))
        verdicts.append({"criterion": c["criterion"], "points": c["points"], "met": ok,
                         "explanation": explanation})
    return Score(rubric_points(criteria, met), warnings, {"criteria": verdicts})


def llm_judge_score(prediction: str, item: "JudgedItem", judge: JudgeFn) -> Score:
    """LoCoMo's L-J: 1.0 when the judge says the reply gives the gold answer."""
    ok, explanation = _ask(judge, answer_judge_messages(item.question, prediction, item.answer))
    warnings = [f"answer counted as wrong: {explanation}"] if ok is None else []
    return Score(1.0 if ok else 0.0, warnings, {"judge": {"met": ok, "explanation": explanation}})


JudgedMetric = Callable[[str, "JudgedItem", JudgeFn], Score]

JUDGED_METRICS: dict[str, JudgedMetric] = {
    "rubric": rubric_score,
    "llm_judge": llm_judge_score,
}

"""Offline stand-in for GEPA's reflection LM: answers GEPA's instruction-proposal prompt.

`mstar baselines --programs gepa,gepa_vector_search` runs the real `gepa` library (mstar/gepa/),
whose reflective mutation sends its reflection model one prompt (gepa's
InstructionProposalSignature): the current text of the component between ``` fences, then the
examples the adapter built (mstar.gepa.adapter: "# Example N" / "## Inputs" / "### question" /
"## Generated Outputs" / "## Feedback" in markdown), then the request for a new instruction in
``` fences. Offline, the reflector role's model recognises that prompt and answers it here.

What a reflection model does with it -- write down the task's rules and the niche facts the
feedback reveals -- done by rule, deterministically:
  - one behaviour rule per failure signal the examples show (undated answers to "when"
    questions, "unknown" answers, answers much longer or shorter than expected -- the offline
    reflector's signals of the same names), each added once;
  - the facts the feedback gives (question -> expected answer) of the examples that scored
    below 1, newest last, capped, so the constant stays under MAX_CHARS.
"""
from __future__ import annotations

import re

from mstar.offline.cases import EMPTY_RE as _EMPTY_RE, WHEN_RE as _WHEN_RE, Case

OPENING = "I provided an assistant with the following instructions"
REQUEST = "write a new instruction for the assistant"
MAX_CHARS = 2500
FACTS_HEADER = "Facts learned from feedback:"
RULES = {  # failure signal -> the rule it adds (our own wording)
    "when_no_date": "When a question asks when something happened, answer with the date itself (day, month "
                    "and year as the memory gives them), never with a relative phrase.",
    "no_answer": "Do not reply that something is unknown: give the most likely answer that the memory supports.",
    "verbose": "Answer in as few words as possible: the fact that was asked for, nothing around it.",
    "terse": "Answer with the whole fact that was asked for, not a fragment of it.",
}


_DATE = re.compile(r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|\b(?:19|20)\d\d\b", re.I)


def case_signals(case: Case) -> set[str]:
    signals = set()
    answer, expected = case.answer.strip(), case.expected.strip()
    if _WHEN_RE.search(case.question) and not _DATE.search(answer):
        signals.add("when_no_date")
    if _EMPTY_RE.match(answer):
        signals.add("no_answer")
    n_answer, n_expected = len(answer.split()), len(expected.split())
    if n_answer > n_expected + 3:
        signals.add("verbose")
    elif 0 < n_answer and n_answer + 2 < n_expected:
        signals.add("terse")
    return signals


def is_proposal_prompt(prompt: str) -> bool:
    return prompt.lstrip().startswith(OPENING) and REQUEST in prompt


def _fenced_blocks(prompt: str) -> list[str]:
    return re.findall(r"```[^\n]*\n(.*?)\n?```", prompt, re.S)


def _section(block: str, header: str, level: int) -> str:
    """Text under a markdown header of exactly `level` #'s, up to the next header of that level
    or higher."""
    hashes = "#" * level
    m = re.search(rf"^{hashes} {re.escape(header)}\s*$(.*?)(?=^#{{1,{level}}} |\Z)", block, re.M | re.S)
    return m.group(1).strip() if m else ""


def parse_examples(side_info: str) -> list[tuple[Case, float | None]]:
    """(case, score) per "# Example N" of the adapter's reflective dataset."""
    out = []
    for block in re.split(r"^# Example \d+\s*$", side_info, flags=re.M)[1:]:
        inputs = _section(block, "Inputs", 2)
        question = _section(inputs, "question", 3)
        retrieved = _section(inputs, "retrieved_memory", 3)
        answer = _section(block, "Generated Outputs", 2)
        feedback = _section(block, "Feedback", 2)
        expected = re.search(r"^Expected answer: (.*)$", feedback, re.M)
        score = re.search(r"^Score: ([0-9.]+)", feedback, re.M)
        out.append((Case(question, expected.group(1).strip() if expected else "", answer, retrieved),
                    float(score.group(1)) if score else None))
    return out


def propose(prompt: str) -> str:
    """The reply: the new instruction in ``` fences."""
    blocks = _fenced_blocks(prompt)
    current = blocks[0].strip() if blocks else ""
    examples = parse_examples(blocks[1] if len(blocks) > 1 else "")
    head, _, facts_text = current.partition(FACTS_HEADER)
    rules = [l for l in head.strip().splitlines() if l.strip()]
    facts = [l for l in facts_text.strip().splitlines() if l.strip().startswith("- ")]
    for signal in sorted({s for case, _ in examples for s in case_signals(case)}):
        rule = RULES.get(signal)
        if rule and rule not in rules:
            rules.append(rule)
    for case, score in examples:
        if case.expected and case.question and (score is None or score < 1.0):
            fact = f"- {' '.join(case.question.split())} -> {' '.join(case.expected.split())}"
            if fact not in facts:
                facts.append(fact)

    def render(kept: list[str]) -> str:
        parts = ["\n".join(rules)] if rules else []
        if kept:
            parts.append(FACTS_HEADER + "\n" + "\n".join(kept))
        return "\n\n".join(parts)

    while facts and len(render(facts)) > MAX_CHARS:
        facts.pop(0)                       # the oldest facts go first
    return "```\n" + render(facts) + "\n```"

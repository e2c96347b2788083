"""The task agent's and the judges' prompts in the paper's form (Appendix G.1 and H).

G.1 gives three templates, parameterised by the program's INSTRUCTION_* constants:
  knowledge item:  INSTRUCTION_KNOWLEDGE_ITEM / "Text:" raw text / the schema / JSON only
  query:           INSTRUCTION_QUERY / "Question:" question / the schema / JSON only
  answer:          <retrieved_memory> ALWAYS_ON_KNOWLEDGE + retrieved </retrieved_memory> / INSTRUCTION_RESPONSE
The answer turn continues the query conversation (the paper's reflector shows it as
[user] query prompt, [assistant] query JSON, [user] retrieved memory + instruction), so the
question reaches the model through the first turn; without those turns the question is put in
front of the memory. H gives the rubric judge's template (# Conversation, # Rubric item,
# Instructions); LoCoMo's L-J judge has no template in the paper, so it is written here in the
same form with the reference answer as the rubric item.

Structure, labels and headers are the paper's; the sentences are this project's paraphrase. The
offline models read these forms through mstar/offline/paper_forms.py, which imports the marker
lines below, so wording and parser cannot drift apart.
"""
from __future__ import annotations

import json

ITEM_SCHEMA_LINE = "The KnowledgeItem has to follow this schema:"
ITEM_CLOSING = "Reply with nothing but one valid JSON object with the schema's fields. No explanation."
QUERY_SCHEMA_LINE = "The query has to be a JSON object that follows this schema:"
QUERY_CLOSING = "Reply with the JSON alone."
TEXT_LABEL = "Text:"
QUESTION_LABEL = "Question:"

RUBRIC_JUDGE_INTRO = ("Your task is to read a conversation and one rubric item, and to grade the final turn -- the "
                      "last response of the assistant -- on how well it satisfies that rubric item.")
JUDGE_INSTRUCTIONS = """# Instructions
Reply with a JSON object that has the fields "explanation" and "criteria_met".
- "explanation": why the response does, or does not, satisfy the item.
- "criteria_met": a boolean. When a rubric item holds several criteria, every one of them must be satisfied for true.
- Exception: when the item says "such as" or "for example", the response does not have to cover every example listed.
- For a negative item (a trait that is undesirable), return whether the item IS met (true = the bad behaviour is there), not whether the response is good."""


def _schema_text(schema: list[dict]) -> str:
    return json.dumps(schema, indent=1, ensure_ascii=False)


def extraction_messages(instruction: str, raw_text: str, schema: list[dict]) -> list[dict]:
    text = "\n\n".join([instruction.strip(), f"{TEXT_LABEL} {raw_text}",
                        f"{ITEM_SCHEMA_LINE}\n{_schema_text(schema)}", ITEM_CLOSING])
    return [{"role": "user", "content": text}]


def query_messages(instruction: str, question: str, schema: list[dict]) -> list[dict]:
    text = "\n\n".join([instruction.strip(), f"{QUESTION_LABEL} {question}",
                        f"{QUERY_SCHEMA_LINE}\n{_schema_text(schema)}", QUERY_CLOSING])
    return [{"role": "user", "content": text}]


def answer_messages(always_on: str, retrieved: str, question: str, instruction: str,
                    query_turns: list[dict] | None = None) -> list[dict]:
    """The answer turn after the query turns (user prompt, assistant JSON) when given; else one
    message that names the question first."""
    memory = f"{always_on}\n{retrieved}" if always_on.strip() else retrieved
    turn = f"<retrieved_memory>\n{memory.strip()}\n</retrieved_memory>\n\n{instruction.strip()}"
    if query_turns:
        return [dict(m) for m in query_turns] + [{"role": "user", "content": turn}]
    return [{"role": "user", "content": f"{QUESTION_LABEL} {question}\n\n{turn}"}]


def rubric_judge_messages(conversation: str, criterion: str, points: float) -> list[dict]:
    """One rubric criterion, shown as HealthBench shows it: "[points] criterion"."""
    item = f"[{points:g}] {criterion.strip()}"
    text = "\n\n".join([RUBRIC_JUDGE_INTRO, f"# Conversation\n{conversation}", f"# Rubric item\n{item}",
                        JUDGE_INSTRUCTIONS])
    return [{"role": "user", "content": text}]


def answer_judge_messages(conversation: str, gold: str) -> list[dict]:
    """LoCoMo's L-J in the rubric judge's form, the reference answer as the rubric item."""
    intro = (RUBRIC_JUDGE_INTRO + " Here the rubric item is a reference answer: it is met when the final "
             "response gives that answer -- the same person, thing, number or date, in any wording; extra "
             "detail is fine unless it contradicts the reference. A response that names several candidates, "
             "or none, does not meet it.")
    text = "\n\n".join([intro, f"# Conversation\n{conversation}", f"# Rubric item\n{str(gold).strip()}",
                        JUDGE_INSTRUCTIONS])
    return [{"role": "user", "content": text}]

# ATTACK: 135,000 empty messages per toolkit LLM call (a 3.9 MB frame; "0 characters" of prompt), once per write and read: the character cap let them all through, the engine held ~300 MB of message dicts, the checker's --json report grew to 63 MB, and a real provider would have been sent ~500k tokens of message framing
# EXPECTED: runs: the worker refuses the call (at most 64 messages per call; the engine checks count and UTF-8 bytes again), the program sees a ValueError
# outcome: ok
# output: many: ValueError
# The test passes a unique marker path (in a world-writable directory) as raw_text and
# as every str field of the item and the query; the directory must stay empty.
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Copy the text."
INSTRUCTION_QUERY = "Copy the question."
INSTRUCTION_RESPONSE = "Answer from the memory."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str = field(default="", metadata={"description": "The text to remember"})


@dataclass
class Query:
    question: str = field(default="", metadata={"description": "The question"})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.notes = []

    def ask(self):
        try:
            self.toolkit.llm_completion([{"role": "user", "content": ""}] * 135_000)
            return "many: served"
        except Exception as exc:
            return "many: " + type(exc).__name__

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        target = raw_text.strip()  # the marker path
        self.notes.append(self.ask())

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        return self.ask()

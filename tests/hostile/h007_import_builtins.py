# ATTACK: import builtins and use builtins.open to write the marker
# EXPECTED: rejected statically
# outcome: static imports import_not_allowed
# message: import builtins is not allowed
# The test passes a unique marker path (in a world-writable directory) as raw_text and
# as every str field of the item and the query; the directory must stay empty.
import builtins
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

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        target = raw_text.strip()  # the marker path
        builtins.open(target, "w").write("pwned")

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        return "notes: " + str(len(self.notes))

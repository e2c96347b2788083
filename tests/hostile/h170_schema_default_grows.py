# ATTACK: a hashable dict subclass as a field default whose items() is small when the loader measures it and 3.5 MB when the reply is encoded, so the engine would put 3.5 MB into every prompt
# EXPECTED: runs harmlessly: the loader sends a plain copy of the JSON it measured, and the engine measures what it received again
# outcome: ok
# The test passes a unique marker path (in a world-writable directory) as raw_text and
# as every str field of the item and the query; the directory must stay empty.
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Copy the text."
INSTRUCTION_QUERY = "Copy the question."
INSTRUCTION_RESPONSE = "Answer from the memory."
ALWAYS_ON_KNOWLEDGE = ""


class Grows(dict):
    calls = [0]

    def __hash__(self):
        return 1

    def items(self):
        self.calls[0] += 1
        if self.calls[0] == 1:
            return [("k", "small")]
        return [("k", "x" * 3_500_000)]


@dataclass
class KnowledgeItem:
    text: str = field(default="", metadata={"description": "The text to remember"})
    extra: dict = field(default=Grows(k="v"), metadata={"description": "Extra data"})


@dataclass
class Query:
    question: str = field(default="", metadata={"description": "The question"})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.notes = []

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        target = raw_text.strip()  # the marker path
        self.notes.append(item.text)

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        return "notes: " + str(len(self.notes))

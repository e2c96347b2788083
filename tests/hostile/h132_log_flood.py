# ATTACK: 20k logger.debug calls with 1 KB each, a 10 MB print and 1000 more prints
# EXPECTED: runs: logs capped per op
# outcome: ok
# output: flooded
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

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        target = raw_text.strip()  # the marker path
        line = "L" * 1000
        for i in range(20_000):
            self.toolkit.logger.debug(line)

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        for i in range(1000):
            print("P" * 10_000_000 if i == 0 else "p")
        return "flooded"

# ATTACK: guarded imports of the modules the hook serves to C code (_strptime, time)
# EXPECTED: runs harmlessly: a program's own import statement never gets them
# outcome: ok
# output: refused 4 of 4
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
        refused = 0
        try:
            import time
        except ImportError:
            refused += 1
        try:
            import _strptime
        except ImportError:
            refused += 1
        try:
            from time import sleep
        except ImportError:
            refused += 1
        try:
            from _strptime import _strptime_datetime
        except ImportError:
            refused += 1
        self.notes = ["refused " + str(refused) + " of 4"]

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        return "; ".join(self.notes)

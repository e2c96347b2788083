# ATTACK: __dict__ / __class__ reads (allowed on the program's own objects) aimed at host objects
# EXPECTED: runs harmlessly: each read on a host object or a class is refused
# outcome: ok
# output: refused 5 of 5
# The test passes a unique marker path (in a world-writable directory) as raw_text and
# as every str field of the item and the query; the directory must stay empty.
import json
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
        for obj, name in ((self.toolkit, "__dict__"), (json, "__dict__"), (KnowledgeBase, "__dict__"),
                          (self.toolkit, "__class__"), (KnowledgeBase, "__class__")):
            try:
                getattr(obj, name)
            except AttributeError:
                refused += 1
        mine = self.__dict__ is not None and self.__class__.__name__ == "KnowledgeBase"
        self.notes = ["refused " + str(refused) + " of 5", "own: " + str(mine)]

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        return "; ".join(self.notes)

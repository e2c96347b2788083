# ATTACK: class-private names inside a class (mangled to _Class__x) aimed at the guards and host privates
# EXPECTED: runs harmlessly: mangled names are the program's own attributes only
# outcome: ok
# output: refused 2 of 2
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
        for obj in (self.toolkit, self.toolkit.db):
            try:
                obj.__secret_handle
            except AttributeError:
                refused += 1
        self.__count = getattr(self, "_KnowledgeBase__count", 0) + 1
        self.notes = ["refused " + str(refused) + " of 2", "count " + str(self.__count)]

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        return "; ".join(self.notes)

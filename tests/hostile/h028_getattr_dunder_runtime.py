# ATTACK: getattr with computed dunder names (no dunder in the source text)
# EXPECTED: contained at run time: the guarded getattr refuses names starting with __
# outcome: write runtime exception
# message: attributes starting with "__" are not allowed
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
        cls = getattr((), "__cla" + "ss__")
        self.notes.append(str(getattr(cls, "__ba" + "ses__")))

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        return "notes: " + str(len(self.notes))

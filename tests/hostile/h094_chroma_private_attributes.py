# ATTACK: _client / _system / _settings / _embedding_function of the wrappers
# EXPECTED: runs harmlessly: underscore attributes of host objects are refused; the program counts the refusals
# outcome: ok
# output: reached 0 of 5
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
        col = self.toolkit.chroma.get_or_create_collection("notes")
        reached = 0
        for obj, name in ((self.toolkit.chroma, "_client"), (self.toolkit.chroma, "_system"),
                          (col, "_client"), (col, "_embedding_function"), (self.toolkit.db, "_conn")):
            try:
                getattr(obj, name)
                reached += 1
            except AttributeError:
                pass
        self.notes.append("reached " + str(reached) + " of 5")

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        return "; ".join(self.notes)

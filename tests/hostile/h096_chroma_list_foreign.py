# ATTACK: list_collections to find other programs' or the engine's collections
# EXPECTED: runs harmlessly: the worker's client holds only this program's collections
# outcome: ok
# output: collections: ['mine']
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
        self.col = self.toolkit.chroma.get_or_create_collection("mine")

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        target = raw_text.strip()  # the marker path
        self.notes.append(item.text)

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        return "collections: " + str(sorted(c.name for c in self.toolkit.chroma.list_collections()))

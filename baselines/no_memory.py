"""No Memory (paper Table 1, first row): the agent answers with nothing retrieved.

write() keeps nothing and read() returns the empty string, so the task agent sees only
ALWAYS_ON_KNOWLEDGE. It is the floor every memory design is measured against.

Contract: nothing dropped -- there is nothing to drop.
"""
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Write down what the text is about in a few words."
INSTRUCTION_QUERY = "Restate the question as a short search query."
INSTRUCTION_RESPONSE = "Answer the question using the retrieved memory. Be short and specific."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    topic: str = field(default="", metadata={"description": "What the text is about, in a few words (discarded)"})


@dataclass
class Query:
    query_text: str = field(default="", metadata={"description": "The question as a search query (ignored)"})


class KnowledgeBase:
    """Stores nothing, retrieves nothing."""

    def __init__(self, toolkit):
        self.toolkit = toolkit

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.toolkit.logger.debug("no memory: episode discarded")

    def read(self, query: Query) -> str:
        return ""

# ATTACK: typing.Annotated[str, ...] forwards attribute reads to str, so .format on the alias is the raw unbound str.format
# EXPECTED: contained at run time: the descriptor that comes back through the alias is replaced by the checked format
# outcome: read runtime exception
# message: format field
# The test passes a unique marker path (in a world-writable directory) as raw_text and
# as every str field of the item and the query; the directory must stay empty.
from dataclasses import dataclass, field
from typing import Annotated

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
        self.notes.append(item.text)

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        Text = Annotated[str, "a plain string"]
        return Text.format("{0.logger.debug.__func__.__globals__}", self.toolkit)

# ATTACK: fetch the raw bound format through getattr(super(...), computed name) in write(), keep it in an attribute, call it in read()
# EXPECTED: contained at run time: the stored method is already the checked format
# outcome: read runtime exception
# message: format field
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
        proxy = super(Template, Template("{0.toolkit.logger.debug.__globals__[__builtins__]}"))
        self.render = getattr(proxy, "for" + "mat")
        self.notes.append(item.text)

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        return self.render(self)


class Template(str):
    pass

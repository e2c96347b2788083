# ATTACK: super(Template, t).format, two-argument super from outside the class, on a generator to walk gi_frame.f_back.f_globals
# EXPECTED: contained at run time: a raw format reached through a super proxy comes back as the checked one
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
        self.notes.append(item.text)

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        gen = numbers()
        next(gen)
        proxy = super(Template, Template("{0.gi_frame.f_globals}"))
        return proxy.format(gen)


def numbers():
    yield 1
    yield 2


class Template(str):
    pass

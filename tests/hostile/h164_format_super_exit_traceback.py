# ATTACK: a str subclass calls super().format (the raw bound method) on the traceback __exit__ receives, to read the worker's frame locals as text
# EXPECTED: contained at run time: the guard checks what comes back, so super().format is the checked format and the template is refused
# outcome: write runtime exception
# message: format field {0.tb_frame.f_back.f_locals}
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
        catcher = Catcher()
        with catcher:
            raise ValueError("boom")
        self.notes.append(catcher.leak)

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        return "; ".join(self.notes)[:2000]


class Template(str):
    def render(self, value):
        return super().format(value)


class Catcher:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        self.leak = Template("{0.tb_frame.f_back.f_locals}").render(tb)
        return True

# ATTACK: a context manager's __exit__ receives the traceback; keep it and walk tb_frame from it
# EXPECTED: runs harmlessly: traceback and frame objects are refused by the guarded getattr, even from the program's own attribute
# outcome: ok
# output: refused 4 of 4
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
        with Catcher() as catcher:
            raise ValueError("boom")
        for name in ("tb", "kind"):
            try:
                held = getattr(catcher, name)
                getattr(held, "tb_" + "frame")
            except AttributeError:
                refused += 1
        held = catcher.__dict__["tb"]  # the instance dict hands the object over; its frames stay shut
        for name in ("tb_" + "frame", "tb_next"):
            try:
                getattr(held, name)
            except AttributeError:
                refused += 1
        self.notes = ["refused " + str(refused) + " of 4", "line " + str(held.tb_lineno)]

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        return "; ".join(self.notes)


class Catcher:
    def __enter__(self):
        self.tb = None
        return self

    def __exit__(self, kind, value, tb):
        self.tb = tb
        self.kind = kind
        return True

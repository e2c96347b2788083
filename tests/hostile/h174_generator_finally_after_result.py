# ATTACK: logger.debug(obj) where str(obj) is the program's own str subclass carrying a suspended generator; the log kept the object, it was freed after the result was sent, and the generator's finally then ran on the read thread with the op's clock stopped and the baton held (5.8-6.4 s of CPU per 10 s while the session stayed open; only the 600 s CPU limit ended it)
# EXPECTED: the log keeps the characters only (an exact str, made inside the op), so the generator is freed inside logger.debug and its finally runs inside the op's deadline: the op is killed on time
# outcome: read limits timeout
# The test passes a unique marker path (in a world-writable directory) as raw_text and
# as every str field of the item and the query; the directory must stay empty.
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Copy the text."
INSTRUCTION_QUERY = "Copy the question."
INSTRUCTION_RESPONSE = "Answer from the memory."
ALWAYS_ON_KNOWLEDGE = ""


class Carrier(str):
    pass


def spin_on_close():
    try:
        yield 1
    finally:
        n = 0
        while True:  # program code that runs whenever the generator is freed
            n += 1


class Loud:
    def __str__(self):
        text = Carrier("look at me")
        text.hidden = spin_on_close()
        next(text.hidden)
        return text


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
        self.toolkit.logger.debug(Loud())
        return "answered: " + str(len(self.notes))

# ATTACK: as h174, but the generator's finally runs a runaway recursive SQL query: run after the result, it held the database with no deadline, and the next read timed out
# EXPECTED: the query runs inside the read that logged the object (interrupted by the op clock's progress handler, and run again by the finally until the engine kills the worker at the read's deadline)
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


def query_on_close(db):
    try:
        yield 1
    finally:  # program code that runs whenever the generator is freed: holds the database for good
        while True:
            try:
                db.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c")
            except Exception:
                pass


class Loud:
    def __init__(self, db):
        self.db = db

    def __str__(self):
        text = Carrier("look at me")
        text.hidden = query_on_close(self.db)
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
        self.toolkit.logger.debug(Loud(self.toolkit.db))
        return "answered: " + str(len(self.notes))

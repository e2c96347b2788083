# ATTACK: a field default that is a tuple nested 940 deep (1,882 characters as JSON, under the 2,000 cap): the engine copies defaults into items, records and reports recursively, and such a copy overflowed the stack (the checker's --json died in GateReport.to_dict, mstar evolve in EvalResult.to_dict)
# EXPECTED: refused at load: a default may nest lists or dicts at most MAX_DEFAULT_DEPTH (8) deep, checked in the worker and again on what the engine received
# outcome: import interface default_too_deep
# message: KnowledgeItem.extra: the default nests lists or dicts more than 8 deep
# The test passes a unique marker path (in a world-writable directory) as raw_text and
# as every str field of the item and the query; the directory must stay empty.
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Copy the text."
INSTRUCTION_QUERY = "Copy the question."
INSTRUCTION_RESPONSE = "Answer from the memory."
ALWAYS_ON_KNOWLEDGE = ""

DEEP = ()
for _ in range(940):
    DEEP = (DEEP,)


@dataclass
class KnowledgeItem:
    text: str = field(default="", metadata={"description": "The text to remember"})
    extra: list = field(default=DEEP, metadata={"description": "Extra data"})


@dataclass
class Query:
    question: str = field(default="", metadata={"description": "The question"})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.notes = []

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        target = raw_text.strip()  # the marker path
        self.notes.append(item.text)

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        return "notes: " + str(len(self.notes))

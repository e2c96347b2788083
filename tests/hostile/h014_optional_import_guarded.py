# ATTACK: try: import time / numpy (installed in the engine) / except ImportError
# EXPECTED: runs harmlessly: the guarded import passes the static gate, the hook refuses it at run time, the fallback runs
# outcome: ok
# output: time: ImportError; numpy: ImportError
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
        found = []
        try:
            import time
            time.sleep(60)
            found.append("time: imported")
        except ImportError as exc:
            found.append("time: " + type(exc).__name__)
        try:
            import numpy as np
            found.append("numpy: imported " + str(np))
        except ImportError as exc:
            found.append("numpy: " + type(exc).__name__)
        self.notes = found

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        return "; ".join(self.notes)

# ATTACK: PRAGMA temp_store_directory / writable_schema / query_only tricks
# EXPECTED: runs harmlessly: every pragma outside the allowlist is refused; the program reports the refusals
# outcome: ok
# output: refused 3 of 3
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
        directory = target.rsplit("/", 1)[0]
        for sql in ("PRAGMA temp_store_directory = '" + directory + "'", "PRAGMA writable_schema = ON",
                    "PRAGMA mmap_size = 1000000000"):
            try:
                self.toolkit.db.execute(sql)
            except Exception as exc:
                if "not authorized" in str(exc):
                    refused += 1
        self.notes.append("refused " + str(refused) + " of 3")

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        return "; ".join(self.notes)

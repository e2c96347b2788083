# ATTACK: ATTACH /proc/self/environ and /proc/1/environ as databases to read them
# EXPECTED: runs harmlessly: ATTACH is refused, nothing is read; the program reports what it got
# outcome: ok
# output: read nothing
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
        got = []
        for path in ("/proc/self/environ", "/proc/1/environ", "/proc/self/cmdline"):
            try:
                self.toolkit.db.execute("ATTACH DATABASE ? AS env", (path,))
                got.append(str(self.toolkit.db.execute("SELECT * FROM env.sqlite_master").fetchall()))
            except Exception as exc:
                pass
        return "read " + ("; ".join(got) if got else "nothing")

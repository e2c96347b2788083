# ATTACK: store llm_completion in __init__/write#0 and call it twice in a later read()
# EXPECTED: runs: the budget is per op in the engine, so the second call in read() is refused
# outcome: ok
# output: stored second: LLMBudgetExceeded
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
        self.fn = self.toolkit.llm_completion

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        target = raw_text.strip()  # the marker path
        self.later = self.toolkit.llm_completion

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        self.fn([{"role": "user", "content": "one"}])
        try:
            self.later([{"role": "user", "content": "two"}])
            return "stored second: served"
        except Exception as exc:
            return "stored second: " + type(exc).__name__

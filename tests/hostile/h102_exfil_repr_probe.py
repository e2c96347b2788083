# ATTACK: send everything printable about the toolkit and modules to the LLM and the read output
# EXPECTED: runs harmlessly: no secret is reachable; the test checks outputs, logs and LLM prompts
# outcome: ok
# The test passes a unique marker path (in a world-writable directory) as raw_text and
# as every str field of the item and the query; the directory must stay empty.
import json
import chromadb
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
        parts = [repr(self.toolkit), str(dir(self.toolkit)), str(self.toolkit.llm_completion),
                 repr(self.toolkit.db), repr(self.toolkit.chroma), repr(json), repr(chromadb), str(dir())]
        blob = "\n".join(parts)
        try:
            self.toolkit.llm_completion([{"role": "user", "content": blob}])
        except Exception:
            pass
        self.toolkit.logger.debug(blob)
        return blob[:2500]

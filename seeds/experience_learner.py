"""Seed 3 -- Experience Learner (paper Appendix E, Listing 3).

The task agent distils each text into a general lesson and a specific fact;
they go to two lists. read() ignores the query and returns everything, each
list cut to 500 characters. Tests dual-track extraction with full recall.
"""
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Read the text and write down what it is about in a short topic line and the "
    "facts worth remembering in a few sentences."
)
INSTRUCTION_QUERY = "Turn the question into a search query that would find the facts needed to answer it."
INSTRUCTION_RESPONSE = "Answer the question using the retrieved memory. Be short and specific."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    lesson_learned: str = field(default="", metadata={"description": "A general lesson or pattern learned from the text"})
    fact_to_remember: str = field(default="", metadata={"description": "A specific fact worth remembering from the text"})


@dataclass
class Query:
    query_text: str = field(default="", metadata={"description": "A search query for the knowledge base"})


class KnowledgeBase:
    """Two lists, lessons and facts; read() returns all of both."""

    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.lessons = []
        self.facts = []

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.lessons.append(item.lesson_learned)
        self.facts.append(item.fact_to_remember)

    def read(self, query: Query) -> str:
        if not self.lessons and not self.facts:
            return "No information stored."
        lessons_text = "\n".join(self.lessons)[:500]
        facts_text = "\n".join(self.facts)[:500]
        return f"Lessons:\n{lessons_text}\n\nFacts:\n{facts_text}"[:3000]

"""Seed 2 -- LLM Summarizer (paper Appendix E, Listing 2).

Keeps every raw text in a plain list. read() concatenates them (up to 30,000
characters) and spends its one toolkit LLM call on a summary focused on the
query. Tests whether synthesis at read time can stand in for indexing.
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
    topic: str = field(default="", metadata={"description": "What the text is about, in a few words"})
    content: str = field(default="", metadata={"description": "The facts worth remembering from the text"})


@dataclass
class Query:
    query_text: str = field(default="", metadata={"description": "A search query for the knowledge base"})


class KnowledgeBase:
    """Keep all raw text; summarise it for each query with one LLM call."""

    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.raw_texts = []

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.raw_texts.append(raw_text)

    def read(self, query: Query) -> str:
        if not self.raw_texts:
            return "No information stored."
        combined = "\n\n".join(self.raw_texts)[:30000]
        messages = [{
            "role": "user",
            "content": (
                "Given the query below, summarise only the information in the texts that is "
                "relevant to it. Be concise and factual.\n\n"
                f"Query: {query.query_text}\n\nTexts:\n{combined}"
            ),
        }]
        try:
            result = self.toolkit.llm_completion(messages)
        except Exception as exc:  # budget or provider failure: fall back to raw text
            self.toolkit.logger.debug(f"llm_completion failed: {exc}")
            result = combined
        return result[:3000]

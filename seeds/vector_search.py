"""Seed 1 -- Vector Search (paper Appendix E, Listing 1).

Plain retrieval-augmented memory: every episode is cut into paragraph-aligned
chunks of about 500 characters and stored in a chroma collection; read()
returns the five chunks closest to the query. No toolkit LLM call.
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
    """Store raw text chunks in chroma; retrieve the closest ones."""

    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.collection = toolkit.chroma.get_or_create_collection("knowledge")
        self.doc_count = 0

    def chunk(self, text, max_chars=500):
        # Paragraph-aligned chunks: a paragraph longer than max_chars is split hard.
        chunks = []
        current = ""
        for para in text.split("\n"):
            para = para.strip()
            if not para:
                continue
            while len(para) > max_chars:
                if current:
                    chunks.append(current)
                    current = ""
                chunks.append(para[:max_chars])
                para = para[max_chars:]
            if current and len(current) + 1 + len(para) > max_chars:
                chunks.append(current)
                current = para
            else:
                current = (current + "\n" + para) if current else para
        if current:
            chunks.append(current)
        return chunks

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        chunks = self.chunk(raw_text, max_chars=500)
        for chunk in chunks:
            self.collection.add(documents=[chunk], ids=[f"doc_{self.doc_count}"])
            self.doc_count += 1
        self.toolkit.logger.debug(f"stored {len(chunks)} chunks (total {self.doc_count})")

    def read(self, query: Query) -> str:
        if self.doc_count == 0:
            return "No information stored."
        results = self.collection.query(query_texts=[query.query_text], n_results=min(5, self.doc_count))
        docs = results["documents"][0] if results["documents"] else []
        self.toolkit.logger.debug(f"query {query.query_text!r} -> {len(docs)} chunks")
        return "\n\n".join(docs)[:3000] if docs else "No relevant information found."

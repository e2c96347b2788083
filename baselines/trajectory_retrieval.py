"""Trajectory Retrieval (paper Table 1; ALMA's baseline): keep every episode whole, return the
single most similar one.

write() stores the raw episode text (the "trajectory") in a chroma collection, unchanged and
unchunked; read() embeds the query and returns the nearest trajectory by cosine similarity.
No toolkit LLM call. The task agent's item only labels the trajectory in the log.

What the contract forced: read() returns at most 3,000 characters, so a trajectory longer
than that is cut -- the published baseline hands the whole trajectory to the agent.
"""
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Describe in one short line what happens in this text."
INSTRUCTION_QUERY = "Describe the situation the question is about, as a short search query."
INSTRUCTION_RESPONSE = "Answer the question using the retrieved memory. Be short and specific."
ALWAYS_ON_KNOWLEDGE = ""

TOP_K = 1            # one whole trajectory, as in the published baseline
READ_LIMIT = 3000    # the engine's cap on read() output


@dataclass
class KnowledgeItem:
    summary: str = field(default="", metadata={"description": "What happens in the text, in one line"})


@dataclass
class Query:
    query_text: str = field(default="", metadata={"description": "The situation the question is about"})


class KnowledgeBase:
    """Whole trajectories in a cosine-space chroma collection; read() returns the nearest."""

    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.trajectories = toolkit.chroma.get_or_create_collection(
            "trajectories", metadata={"hnsw:space": "cosine"})
        self.count = 0

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        if not raw_text.strip():
            return
        doc_id = "traj_" + str(self.count)
        self.trajectories.add(ids=[doc_id], documents=[raw_text],
                              metadatas=[{"summary": item.summary[:200]}])
        self.count += 1
        self.toolkit.logger.debug(doc_id + " stored (" + str(len(raw_text)) + " chars): " + item.summary[:80])

    def read(self, query: Query) -> str:
        if self.count == 0:
            return "No information stored."
        hits = self.trajectories.query(query_texts=[query.query_text], n_results=min(TOP_K, self.count),
                                       include=["documents", "distances"])
        docs = hits["documents"][0] if hits["documents"] else []
        ids = hits["ids"][0] if hits["ids"] else []
        dists = hits["distances"][0] if hits["distances"] else []
        for doc_id, dist in zip(ids, dists):
            self.toolkit.logger.debug("retrieved " + doc_id + " similarity " + str(round(1.0 - dist, 3)))
        return "\n\n".join(docs)[:READ_LIMIT] if docs else "No relevant information found."

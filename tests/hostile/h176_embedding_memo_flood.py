# ATTACK: every write queries its collection with 512 texts of 8,000 emoji (32 KB each), each one new: where the engine serves the embeddings, its memo kept every text as a key (37,633 keys, 1.15 GB after three writes, kept after the session closed)
# EXPECTED: runs: the engine's memo keys are 16-byte digests, its size is capped in bytes and a session's entries go when it ends (bench/bench_sandbox.py runs the corpus with served embeddings and measures the engine's memory; tests/test_sandbox_host_harm.py measures this attack alone)
# outcome: ok
# output: queried
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
        self.col = toolkit.chroma.get_or_create_collection("flood")
        self.col.add(ids=["seed"], documents=["seed"])
        self.n = 0

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        target = raw_text.strip()  # the marker path
        base = "\U0001F600" * 7990
        for _ in range(4):
            texts = [base + str(self.n + i).zfill(10) for i in range(128)]
            self.n += 128
            self.col.query(query_texts=texts, n_results=1)

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        return "queried " + str(self.n)

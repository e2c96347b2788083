"""A filtered chroma query that chromadb cannot run (a record's vector lost from its index) is
answered exactly instead (sandbox/worker/chroma_exact.py), through toolkit.chroma."""
from __future__ import annotations

import chromadb
import pytest
from chromadb.config import Settings
from chromadb.errors import InternalError

from sandbox.worker.chroma_exact import exact_query
from sandbox.worker.embedding import HashingEmbeddingFunction
from sandbox.worker.toolkit_chroma import make_chroma

PEOPLE = ["Jon", "Gina", "Melanie", "Caroline"]
TEXTS = [f"{PEOPLE[i % 4]} said something about {topic} on day {i}"
         for i, topic in enumerate(["painting", "jobs", "camping", "dancing", "adoption", "pottery", "running",
                                    "marketing", "the lake", "a book", "the bank", "a studio", "the mall",
                                    "a class", "the river", "a sunrise", "online orders", "kids"])]


@pytest.fixture(scope="module")
def client():
    # One EphemeralClient per process is the rule; tests use distinct collection names.
    return chromadb.EphemeralClient(Settings(anonymized_telemetry=False, allow_reset=False))


def _filled(client, name: str, space: str | None):
    ef = HashingEmbeddingFunction()
    raw = client.get_or_create_collection(name, metadata={"hnsw:space": space} if space else None,
                                          embedding_function=ef)
    for i, text in enumerate(TEXTS):
        raw.add(ids=[f"r{i:02d}"], documents=[text], metadatas=[{"person": PEOPLE[i % 4], "day": i}])
    return raw, ef


@pytest.mark.parametrize("space", [None, "cosine", "ip"])
def test_the_exact_answer_is_chromadbs_own_on_an_intact_index(client, space):
    raw, ef = _filled(client, f"exact_{space or 'l2'}", space)
    for args in ({"query_texts": ["camping by the river"], "n_results": 3, "where": {"person": "Melanie"}},
                 {"query_texts": ["jobs", "a studio"], "n_results": 20, "where": {"day": {"$gte": 5}},
                  "include": ["documents", "distances", "metadatas", "embeddings"]},
                 {"query_texts": ["the lake"], "n_results": 4, "where_document": {"$contains": "the"}}):
        want, got = raw.query(**args), exact_query(raw, ef, args)
        every = raw.query(**{**args, "n_results": len(TEXTS)})     # chromadb's distance of each match
        for q, (ids, dists) in enumerate(zip(got["ids"], got["distances"])):
            # The same distances rank by rank, each the one chromadb gives that record (records at
            # equal distances come in an order of chromadb's index: compared as such).
            assert dists == pytest.approx(list(want["distances"][q]), abs=1e-5)
            theirs = dict(zip(every["ids"][q], every["distances"][q]))
            assert [theirs[i] for i in ids] == pytest.approx(dists, abs=1e-5)
            assert len(set(ids)) == len(ids) == len(want["ids"][q])
            by_id = dict(zip(got["ids"][q], zip(got["documents"][q], got["metadatas"][q])))
            assert [by_id[i] for i in want["ids"][q] if i in by_id] == \
                [d for i, d in zip(want["ids"][q], zip(want["documents"][q], want["metadatas"][q])) if i in by_id]
        if "embeddings" in args.get("include", []):
            vectors = dict(zip(every["ids"][0], every["embeddings"][0]))
            assert [[pytest.approx(list(map(float, vectors[i])), abs=1e-6) for i in got["ids"][0]]] \
                == got["embeddings"][:1]
        else:
            assert got["embeddings"] is None


class _LostVector:
    """A real collection whose index lost one record's vector, as chromadb does now and then:
    a filtered query or a get of embeddings that touches the record raises InternalError."""

    def __init__(self, raw, lost: str):
        self.raw, self.lost = raw, lost
        self.name, self.metadata, self.id = raw.name, raw.metadata, raw.id

    def _touches(self, ids) -> bool:
        return ids is None or self.lost in ids

    def query(self, **args):
        if args.get("where") is not None or args.get("where_document") is not None:
            raise InternalError("Error executing plan: Internal error: Error finding id")
        return self.raw.query(**args)

    def get(self, ids=None, include=None, **args):
        if include and "embeddings" in include and self._touches(ids):
            raise InternalError("Error executing plan: Internal error: Error finding id")
        return self.raw.get(ids=ids, include=include, **args)

    def __getattr__(self, name):
        return getattr(self.raw, name)


class _Client:
    def __init__(self, client, lost: str):
        self.client, self.lost = client, lost

    def get_or_create_collection(self, name, metadata=None, embedding_function=None):
        return _LostVector(self.client.get_or_create_collection(name, metadata=metadata,
                                                                embedding_function=embedding_function), self.lost)


def test_a_program_gets_its_filtered_query_answered_when_chromadb_cannot(client):
    intact, ef = _filled(client, "exact_intact", "cosine")
    chroma = make_chroma(_Client(client, lost="r07"), ef)
    col = chroma.get_or_create_collection("exact_lost", metadata={"hnsw:space": "cosine"})
    for i, text in enumerate(TEXTS):
        col.add(ids=[f"r{i:02d}"], documents=[text], metadatas=[{"person": PEOPLE[i % 4], "day": i}])
    asked = {"query_texts": ["marketing"], "n_results": 3, "where": {"person": "Caroline"}}
    got = col.query(**asked)
    # r07 (Caroline, marketing) is the record whose vector was lost: ranked from its document again.
    assert got["ids"][0][0] == "r07"
    # The distances an intact collection gives (the records after r07 tie: their order is the index's).
    assert got["distances"][0] == pytest.approx(intact.query(**asked)["distances"][0], abs=1e-5)
    # Without a filter chromadb answers itself; a filter that is wrong is still the program's error.
    assert col.query(query_texts=["running"], n_results=2)["ids"][0]
    with pytest.raises(ValueError, match=r"where operator .* got \$bad"):
        col.query(query_texts=["running"], n_results=2, where={"person": {"$bad": 1}})

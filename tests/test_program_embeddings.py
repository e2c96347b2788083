"""Embeddings inside programs: chroma collections whose vectors the engine serves (ProgramSession's
`embed=`, mstar.split.embed.ProgramEmbeddings), MiniLM with the [embed] extra, hashing otherwise."""
import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mstar.config import LLMConfig, SandboxConfig
from mstar.evaluation import evaluate
from mstar.llm.router import LLMRouter
from mstar.split.embed import (HASHING_LABEL, ProgramEmbeddings, current_program_embeddings, minilm_available,
                               program_embeddings, program_embeddings_label, use_program_embeddings)
from mstar.tasks import load_task
from sandbox.engine.embed_proxy import EMBED_MAX_TEXTS, serve_embed_request
from sandbox.engine.session import ProgramSession, SandboxLimits

ROOT = Path(__file__).resolve().parents[1]
needs_minilm = pytest.mark.skipif(not minilm_available(), reason="the [embed] extra (MiniLM) is not installed")

PROGRAM = '''
import json
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "List the documents."
INSTRUCTION_QUERY = "Ask."
INSTRUCTION_RESPONSE = "Answer."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    docs: list[str] = field(default_factory=list, metadata={"description": "documents"})


@dataclass
class Query:
    text: str = field(default="", metadata={"description": "the question"})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.col = toolkit.chroma.get_or_create_collection("docs", metadata={"hnsw:space": "cosine"})
        self.n = 0

    def write(self, item, raw_text):
        ids = ["d%d" % (self.n + i) for i in range(len(item.docs))]
        self.col.add(ids=ids, documents=item.docs)
        self.n += len(ids)

    def read(self, query):
        try:
            res = self.col.query(query_texts=[query.text], n_results=self.n)
        except ValueError as exc:
            return "error: " + str(exc)
        return json.dumps(res["ids"][0])
'''
DOCS = ["Caroline went to the LGBTQ support group on Tuesday and felt accepted.",
        "Melanie said her support for the painting group started in 2020.",
        "The physician prescribed antibiotics for the infection.",
        "Tom's doctor parked his car outside the bakery."]
QUESTION = "Which doctor treated the sickness?"   # lexically nearest: d3 (doctor); by meaning: d2


def _neighbours(embed=None, limits=SandboxLimits(), question=QUESTION) -> list[str]:
    with ProgramSession(PROGRAM, embed=embed, limits=limits) as s:
        s.start()
        s.write({"docs": DOCS}, "raw")
        out = s.read({"text": question}).output
    return json.loads(out) if out.startswith("[") else out


class Counting:
    """A fake model: 'medical' texts on one axis, the rest on the other; counts its calls."""

    def __init__(self, delay: float = 0.0):
        self.calls, self.texts, self.delay = [], 0, delay

    def __call__(self, texts):
        self.calls.append(len(texts))
        self.texts += len(texts)
        time.sleep(self.delay)
        medical = ("physician", "sickness", "antibiotics")
        return [[1.0, 0.1] if any(w in t for w in medical) else [0.1, 1.0] for t in texts]


def test_the_workers_chroma_uses_the_engines_vectors_a_batch_per_call():
    fake = Counting()
    assert _neighbours(None)[0] == "d3"               # hashing: the doc that shares "doctor"
    got = _neighbours(fake)
    assert got[0] == "d2"                              # the engine's vectors decide
    assert fake.calls == [4, 1]                        # one request for the add of 4 docs, one per query


def test_embedding_time_counts_against_the_ops_deadline():
    """Issue 30 reversed this: the engine's embedding work for a program is the program's time
    (tests/test_sandbox_host_harm.py has the 10-second read a 3-second limit let through)."""
    from sandbox.engine.session import SandboxError
    slow = Counting(delay=0.6)   # the write's request alone takes 0.6 s of a 0.5-second op limit
    with pytest.raises(SandboxError, match="timeout"):
        _neighbours(slow, SandboxLimits(call_timeout_s=0.5))
    assert _neighbours(Counting(delay=0.05), SandboxLimits(call_timeout_s=5))[0] == "d2"


def test_a_failing_model_is_the_programs_value_error_not_a_crash():
    def broken(texts):
        raise RuntimeError("model exploded")
    with ProgramSession(PROGRAM, embed=broken) as s:
        s.start()
        with pytest.raises(Exception, match="embedding failed: RuntimeError: model exploded"):
            s.write({"docs": ["one doc"]}, "raw")          # the add raised inside write(): reported
        assert s.alive()                                   # the worker lives on
        out = s.read({"text": "anything"}).output          # the program caught it itself
        assert out.startswith("error: embedding failed") and "model exploded" in out


def test_embed_requests_are_checked_and_capped():
    ok = lambda texts: [[1.0, 0.0]] * len(texts)                               # noqa: E731
    dims: list[int] = []
    assert serve_embed_request(ok, ["a", "b"], 0, dims) == {"op": "embed_reply", "ok": True,
                                                            "vectors": [[1.0, 0.0], [1.0, 0.0]]}
    assert dims == [2]
    refusals = [serve_embed_request(None, ["a"], 0, []), serve_embed_request(ok, "a", 0, []),
                serve_embed_request(ok, ["a", 3], 0, []), serve_embed_request(ok, ["a"] * (EMBED_MAX_TEXTS + 1), 0, []),
                serve_embed_request(ok, ["x" * 9000], 0, []), serve_embed_request(ok, ["a"], 50_000, []),
                serve_embed_request(lambda t: [[1.0, 2.0, 3.0]] * len(t), ["a"], 0, [2]),
                serve_embed_request(lambda t: [[float("nan")]], ["a"], 0, []),
                serve_embed_request(lambda t: [], ["a"], 0, [])]
    assert all(r["ok"] is False and r["error"] for r in refusals)


def test_program_embeddings_remember_texts_and_batch_concurrent_requests():
    class Model:
        name = "fake-model"

        def __init__(self):
            self.batches = []

        def embed(self, texts):
            self.batches.append(list(texts))
            time.sleep(0.2)
            return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)

    model = Model()
    pe = ProgramEmbeddings(model, "fake")
    assert pe(["ab", "abc", "ab"]) == [[2.0, 1.0], [3.0, 1.0], [2.0, 1.0]]
    assert pe(["abc"]) == [[3.0, 1.0]] and len(model.batches) == 1            # remembered
    threads = [threading.Thread(target=pe, args=([f"text {i}"],)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(len(b) for b in model.batches[1:]) == 6 and len(model.batches) - 1 < 6   # coalesced


def test_an_evaluation_hands_its_embeddings_to_the_program(tmp_path):
    calls = []

    class Model:
        name = "fake"

        def embed(self, texts):
            calls.append(len(texts))
            return np.eye(8, dtype=np.float32)[[hash(t) % 8 for t in texts]]

    pe = ProgramEmbeddings(Model(), "fake")
    task = load_task("sample")
    src = (ROOT / "seeds" / "vector_search.py").read_text()
    router = LLMRouter.from_config(LLMConfig())
    res = evaluate(src, task.episodes[:4], task.validation[:3], metric=task.score, router=router,
                   sandbox=SandboxConfig(), workers=2, embed=pe)
    assert res.error is None and sum(calls) > 3 and pe.texts_encoded == sum(calls)


def test_the_choice_follows_embed_model_and_is_process_wide_only_when_asked(monkeypatch):
    assert program_embeddings("hashing") is None and program_embeddings("BAAI/bge-m3") is None
    assert current_program_embeddings() is None and program_embeddings_label() == HASHING_LABEL
    monkeypatch.setattr("mstar.split.embed._CONFIGURED", [])
    use_program_embeddings("hashing")
    assert current_program_embeddings() is None


def test_the_sandbox_never_imports_a_model():
    for path in (ROOT / "sandbox").rglob("*.py"):
        text = path.read_text()
        assert "import torch" not in text and "sentence_transformers" not in text, path


def _seed_ranking(embed) -> list[str]:
    """The Vector Search seed itself: one episode per doc, the read's chunks in rank order."""
    with ProgramSession((ROOT / "seeds" / "vector_search.py").read_text(), embed=embed) as s:
        info = s.start()
        for doc in DOCS:
            s.write({f["name"]: f.get("default") or "" for f in info.knowledge_item_schema}, doc)
        out = s.read({"query_text": QUESTION}).output
    return [f"d{DOCS.index(chunk)}" for chunk in out.split("\n\n")]


@needs_minilm
def test_with_minilm_chroma_queries_use_its_vectors_not_the_hash_embedders(monkeypatch):
    pe = program_embeddings("auto")
    assert pe is program_embeddings("auto")            # one model per engine process
    neural, hashed = _neighbours(pe), _neighbours(None)
    vectors = np.array(pe(DOCS))
    query = np.array(pe([QUESTION])[0])
    by_minilm = [f"d{i}" for i in np.argsort(-(vectors @ query))]
    assert neural == by_minilm                         # the chroma query ranks by MiniLM's cosine
    assert neural[0] == "d2" and hashed[0] == "d3"     # meaning vs shared words
    assert neural != hashed
    assert _seed_ranking(pe) == by_minilm and _seed_ranking(None) == hashed   # the seed program too
    monkeypatch.setattr("mstar.split.embed._CONFIGURED", [])
    assert use_program_embeddings("auto") is pe and "all-MiniLM-L6-v2" in program_embeddings_label()

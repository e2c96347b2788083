"""Toolkit capability objects, in process (fast): db, chroma, llm stub, logger, frames, embedding.

The worker-level behaviour (the same objects behind RestrictedPython, in a jailed process) is
covered by test_sandbox_host.py; these tests pin the wrappers' own contracts.
"""
from __future__ import annotations

import sqlite3
import time

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings

from sandbox.worker.embedding import HashingEmbeddingFunction, embed_text
from sandbox.protocol import MAX_FRAME_BYTES, FrameBuffer, FrameError, SandboxLimits, Verdict, encode_frame
from sandbox.worker.toolkit import (LLMBudgetExceeded, LLMError, LogSink, OpClock, check_messages, make_toolkit,
                             plain_in, plain_out)
from sandbox.worker.toolkit_chroma import make_chroma
from sandbox.worker.toolkit_db import make_database


@pytest.fixture
def db():
    return make_database(OpClock())


@pytest.fixture(scope="module")
def chroma():
    # One EphemeralClient per process is the rule; tests use distinct collection names.
    client = chromadb.EphemeralClient(Settings(anonymized_telemetry=False, allow_reset=False))
    return make_chroma(client, HashingEmbeddingFunction())


# --------------------------------------------------------------------------- db


def test_db_cursor_api(db):
    db.execute("CREATE TABLE t (a TEXT, b INTEGER)")
    cur = db.executemany("INSERT INTO t VALUES (?, ?)", [("x", 1), ("y", 2), ("z", 3)])
    assert cur.rowcount == 3
    assert db.execute("INSERT INTO t VALUES (:a, :b)", {"a": "w", "b": 4}).lastrowid == 4
    db.commit()
    cur = db.execute("SELECT a, b FROM t ORDER BY b")
    assert [d[0] for d in cur.description] == ["a", "b"]
    assert cur.fetchone() == ("x", 1)
    assert cur.fetchmany(2) == [("y", 2), ("z", 3)]
    assert list(cur) == [("w", 4)] and cur.fetchone() is None
    c2 = db.cursor()
    assert c2.execute("SELECT COUNT(*) FROM t").fetchall() == [(4,)]
    db.executescript("CREATE TABLE u (k); INSERT INTO u VALUES (1);")
    assert db.execute("SELECT k FROM u").fetchall() == [(1,)]
    assert not hasattr(cur, "connection") and not hasattr(db, "connection")


def test_db_row_factory_only_row_or_none(db):
    db.row_factory = sqlite3.Row
    db.execute("CREATE TABLE t (name TEXT)")
    db.execute("INSERT INTO t VALUES ('a')")
    assert db.execute("SELECT name FROM t").fetchone()["name"] == "a"
    with pytest.raises(TypeError, match="only sqlite3.Row or None"):
        db.row_factory = lambda cursor, row: cursor  # would hand out the raw cursor
    db.row_factory = None
    assert db.execute("SELECT name FROM t").fetchone() == ("a",)
    with pytest.raises(AttributeError):
        db.text_factory = bytes  # __slots__ = (): nothing else can be set


@pytest.mark.parametrize("sql,params,reason", [
    ("ATTACH DATABASE '/tmp/mstar_probe_a.db' AS x", (), "ATTACH"),
    ("ATTACH DATABASE ? AS x", ("/tmp/mstar_probe_b.db",), "not authorized"),
    ("VACUUM INTO '/tmp/mstar_probe_c.db'", (), "not authorized"),
    ("SELECT load_extension('libx')", (), "load_extension"),
    ("PRAGMA temp_store = FILE", (), "PRAGMA temp_store"),
])
def test_db_refuses_ways_out(db, sql, params, reason):
    with pytest.raises(sqlite3.DatabaseError, match=reason):
        db.execute(sql, params)


def test_db_bad_input_is_named(db):
    with pytest.raises(TypeError, match="SQL must be a str"):
        db.execute(123)
    with pytest.raises(TypeError, match="list, tuple or dict, got str"):
        db.execute("SELECT ?", "a")
    with pytest.raises(TypeError, match="unsupported type object"):
        db.execute("SELECT ?", (object(),))


def test_db_progress_handler_interrupts_runaway_sql_after_the_deadline():
    clock = OpClock()
    db = make_database(clock)
    clock.start(0.2)
    t0 = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="ran past the op deadline"):
        db.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c")
    assert time.monotonic() - t0 < 2
    clock.stop()
    assert db.execute("SELECT 1").fetchall() == [(1,)]


# --------------------------------------------------------------------------- chroma


def test_chroma_collection_roundtrip_returns_plain_data(chroma):
    col = chroma.get_or_create_collection("roundtrip", metadata={"hnsw:space": "cosine"})
    col.add(ids=["1", "2", "3"], documents=["Caroline adopted a dog named Rex",
                                            "The stock market crashed on Tuesday",
                                            "Rex the dog loves long walks"],
            metadatas=[{"k": 1}, {"k": 2}, {"k": 3}])
    hits = col.query(query_texts=["Caroline's dog Rex"], n_results=2, include=["documents", "embeddings", "distances"])
    assert set(hits["ids"][0]) == {"1", "3"}
    assert type(hits["embeddings"][0][0]) is list and type(hits["distances"][0][0]) is float
    col.upsert(ids=["2"], documents=["stocks fell"], metadatas=[{"k": 20}])
    col.update(ids=["1"], metadatas=[{"k": 10}])
    assert col.get(where={"k": 20})["documents"] == ["stocks fell"]
    assert col.count() == 3 and col.name == "roundtrip" and col.metadata["hnsw:space"] == "cosine"
    assert len(col.peek(2)["ids"]) == 2
    col.delete(ids=["1"])
    assert col.count() == 2
    assert chroma.get_collection("roundtrip").count() == 2
    assert "roundtrip" in [c.name for c in chroma.list_collections()]
    chroma.delete_collection("roundtrip")
    with pytest.raises(ValueError, match="does not exist"):
        chroma.get_collection("roundtrip")


def test_chroma_errors_are_clear(chroma):
    with pytest.raises(ValueError, match="'ab' has 2 characters; chroma collection names need 3-512"):
        chroma.create_collection("ab")
    with pytest.raises(ValueError, match="always uses the engine's embedding function"):
        chroma.get_or_create_collection("abc", embedding_function=object())
    chroma.create_collection("dupe")
    with pytest.raises(ValueError, match="already exists"):
        chroma.create_collection("dupe")
    assert not hasattr(chroma, "reset") and not hasattr(chroma.get_collection("dupe"), "modify")


def test_chroma_collections_index_often_and_answer_as_chromas_defaults_do():
    """Collections are made with a small hnsw sync threshold (toolkit_chroma._INDEX_EVERY: an add
    stays cheap as the collection grows); the program sees its own metadata only, its own hnsw
    settings win, and queries return what a collection with chroma's defaults returns."""
    client = chromadb.EphemeralClient(Settings(anonymized_telemetry=False, allow_reset=False))
    ef = HashingEmbeddingFunction()
    chroma = make_chroma(client, ef)
    col = chroma.get_or_create_collection("tuned-cosine", metadata={"hnsw:space": "cosine"})
    raw = client.get_collection("tuned-cosine", embedding_function=ef)
    assert raw.configuration_json["hnsw"]["sync_threshold"] == 16
    assert raw.configuration_json["hnsw"]["space"] == "cosine"
    assert col.metadata == {"hnsw:space": "cosine"}
    assert chroma.create_collection("tuned-plain").metadata is None
    own = chroma.get_or_create_collection("own-sync", metadata={"hnsw:sync_threshold": 500, "hnsw:batch_size": 50})
    assert client.get_collection("own-sync", embedding_function=ef).configuration_json["hnsw"]["sync_threshold"] == 500
    assert own.metadata == {"hnsw:sync_threshold": 500, "hnsw:batch_size": 50}

    plain = client.get_or_create_collection("chroma-defaults", metadata={"hnsw:space": "cosine"}, embedding_function=ef)
    assert plain.configuration_json["hnsw"]["sync_threshold"] == 1000
    docs = [f"note {i}: topic {i % 13} with detail {i * 7 % 31} and more words {i % 5}" for i in range(300)]
    for i, d in enumerate(docs):   # one record per add, as programs write
        col.add(ids=[f"d{i}"], documents=[d])
        plain.add(ids=[f"d{i}"], documents=[d], embeddings=[ef([d])[0]])
    for q in ("topic 3 detail 21", "more words 4", "note 250", "topic 12"):
        want = plain.query(query_embeddings=[ef([q])[0]], n_results=10)["ids"]
        assert col.query(query_texts=[q], n_results=10)["ids"] == want


# --------------------------------------------------------------------------- llm stub, logger


def test_llm_stub_validates_and_maps_engine_replies():
    replies = iter([{"ok": True, "text": "hi"}, {"ok": False, "kind": "budget", "error": "spent"},
                    {"ok": False, "kind": "error", "error": "down"}])
    sent = []
    toolkit = make_toolkit(None, None, LogSink(100), lambda m: sent.append(m) or next(replies))
    assert toolkit.llm_completion([{"role": "user", "content": "q", "name": "x"}], model="ignored") == "hi"
    assert sent == [[{"role": "user", "content": "q"}]]
    with pytest.raises(LLMBudgetExceeded, match="spent"):
        toolkit.llm_completion([{"role": "user", "content": "q"}])
    with pytest.raises(LLMError, match="down"):
        toolkit.llm_completion([{"role": "user", "content": "q"}])
    with pytest.raises(TypeError, match="non-empty list"):
        toolkit.llm_completion("just a string")
    with pytest.raises(TypeError, match="role 'tool'"):
        check_messages([{"role": "tool", "content": "x"}])
    assert len(sent) == 3  # invalid requests never leave the worker


def test_logger_caps_per_op():
    sink = LogSink(cap=20)
    toolkit = make_toolkit(None, None, sink, lambda m: {})
    toolkit.logger.debug("0123456789")
    toolkit.logger.warning(12345)
    toolkit.logger.debug("dropped")
    toolkit.logger.debug("dropped too")
    lines = sink.take()
    assert lines[0] == "0123456789" and lines[1].startswith("WARNING: ") and "cut at the 20-char" in lines[1]
    assert lines[-1] == "[2 more log messages dropped: per-op log cap of 20 chars]"
    assert sink.take() == []


def test_plain_data_conversion():
    class S(str):
        pass

    assert type(plain_in(S("x"), "v")) is str
    assert plain_in({"a": (1, [True, None])}, "v") == {"a": [1, [True, None]]}
    with pytest.raises(TypeError, match="dict keys must be str"):
        plain_in({1: 2}, "v")
    nested = []
    for _ in range(40):
        nested = [nested]
    with pytest.raises(ValueError, match="nested more than"):
        plain_in(nested, "v")
    out = plain_out({"e": np.ones((1, 2), dtype=np.float32), "n": np.int64(3)})
    assert out == {"e": [[1.0, 1.0]], "n": 3} and type(out["n"]) is int


# --------------------------------------------------------------------------- frames, records


def test_frames_roundtrip_in_pieces_and_refuse_garbage():
    data = encode_frame({"op": "a", "x": "é" * 10}) + encode_frame({"op": "b"})
    buf = FrameBuffer()
    got = []
    for i in range(len(data)):
        got += buf.feed(data[i:i + 1])
    assert got == [{"op": "a", "x": "é" * 10}, {"op": "b"}] and buf.pending == 0
    with pytest.raises(FrameError, match="announces"):
        FrameBuffer().feed((MAX_FRAME_BYTES + 1).to_bytes(4, "big"))
    with pytest.raises(FrameError, match="not valid UTF-8 JSON"):
        FrameBuffer().feed((3).to_bytes(4, "big") + b"{x}")
    with pytest.raises(FrameError, match="str 'op'"):
        FrameBuffer().feed(encode_frame({"op": 1})[:4] + b'{"op":1}')
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(FrameError):
        FrameBuffer().feed(len(deep).to_bytes(4, "big") + deep)
    with pytest.raises(FrameError, match="exceeds"):
        encode_frame({"op": "x", "s": "a" * MAX_FRAME_BYTES})


def test_records_validate_and_tolerate():
    with pytest.raises(ValueError, match="call_timeout_s must be > 0"):
        SandboxLimits(call_timeout_s=0)
    v = Verdict.from_json({"stage": "write", "gate": "runtime", "rule": "exception", "message": "m", "line": "7"})
    assert (v.stage, v.line) == ("write", None)
    assert Verdict.from_json("junk").gate == "protocol"


# --------------------------------------------------------------------------- embedding


def test_embedding_is_deterministic_normalised_and_content_sensitive():
    ef = HashingEmbeddingFunction()
    docs = ["Caroline adopted a dog named Rex last summer.",
            "Rex, Caroline's dog, was adopted from a shelter.",
            "The central bank raised interest rates again.",
            ""]
    a, b, c, empty = (np.asarray(v) for v in ef(docs))
    assert np.allclose([np.linalg.norm(v) for v in (a, b, c, empty)], 1.0, atol=1e-5)
    assert a @ b > 0.3 > abs(a @ c) and a @ b > b @ c + 0.3
    assert np.array_equal(embed_text(docs[0]), a)  # same text, same vector
    stems = embed_text("adopting dogs") @ embed_text("she adopted two dog")
    assert stems > embed_text("adopting dogs") @ embed_text("interest rates rose")
    assert HashingEmbeddingFunction.build_from_config(ef.get_config()).dim == 384
    assert not ef.is_legacy() and HashingEmbeddingFunction.name() == "mstar_feature_hashing"
    with pytest.raises(ValueError, match="embedding dim"):
        HashingEmbeddingFunction(dim=3)

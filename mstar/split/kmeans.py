"""The static validation set: k-means over the question embeddings, one member per cluster
(paper Table 7: 25 static items). Pure numpy; the random generator is passed in."""
from __future__ import annotations

import random

import numpy as np


def _np_generator(rng) -> np.random.Generator:
    """A numpy Generator from whatever the caller passed (drawing from it if it is a Random)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, random.Random):
        return np.random.default_rng(rng.getrandbits(64))
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise TypeError(f"expected random.Random, numpy Generator or int seed, got {type(rng).__name__}")


def kmeans_labels(x: np.ndarray, k: int, gen: np.random.Generator, max_iter: int = 30,
                  tol: float = 1e-3) -> np.ndarray:
    """Lloyd's k-means with k-means++ seeding; returns one cluster label per row.

    float32 throughout, centre sums by `_cluster_sums`, so 100k × 384 runs in seconds (the
    benchmark target: < 5 s). Stops when labels no longer
    change, when at most `tol` of the points moved (on fewer than 1/tol points: exact
    convergence), or after `max_iter` rounds: on 100k realistic embeddings Lloyd keeps moving a
    few hundred points for 100+ rounds, which changes nothing that matters for picking one
    representative per cluster.
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    n = len(x)
    sq = np.einsum("ij,ij->i", x, x)
    centers = np.empty((k, x.shape[1]), dtype=np.float32)
    first = int(gen.integers(n))
    centers[0] = x[first]
    d2 = np.maximum(sq - 2 * (x @ x[first]) + sq[first], 0.0).astype(np.float64)
    for c in range(1, k):
        total = d2.sum()
        # If every point already sits on a centre (duplicates), any point is as good as another.
        idx = int(gen.choice(n, p=d2 / total)) if total > 0 else int(gen.integers(n))
        centers[c] = x[idx]
        d2 = np.minimum(d2, np.maximum(sq - 2 * (x @ x[idx]) + sq[idx], 0.0))
    labels = np.full(n, -1)
    rows = np.arange(n)
    for it in range(max_iter):
        dist = sq[:, None] - 2 * (x @ centers.T) + np.einsum("ij,ij->i", centers, centers)[None, :]
        new = dist.argmin(axis=1)
        moved = int(np.count_nonzero(new != labels))
        labels = new
        if moved == 0 or (moved <= tol * n and it > 0):
            break
        counts = np.bincount(labels, minlength=k)
        sums = _cluster_sums(x, labels, counts)
        empty = np.flatnonzero(counts == 0)
        centers[counts > 0] = sums[counts > 0] / counts[counts > 0, None]
        if len(empty):
            # Re-seed empty clusters at the points worst served by their current centres.
            worst = np.argsort(-dist[rows, labels], kind="stable")[:len(empty)]
            centers[empty] = x[worst]
    return labels


def _cluster_sums(x: np.ndarray, labels: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Each cluster's sum of its points (k × d, float32), added one point after another in the
    points' order: bit for bit what a sparse one-hot (k × n) @ x product gives, which this
    replaced -- scipy.sparse held ~13 MB in the engine for the whole run, for one product."""
    sums = np.zeros((len(counts), x.shape[1]), dtype=np.float32)
    order = np.argsort(labels, kind="stable")  # stable: each cluster's points stay in order
    ends = np.cumsum(counts)
    for c in np.flatnonzero(counts):
        # Reducing a C-contiguous block over axis 0 adds its rows in order (no pairwise split).
        np.add.reduce(x[order[ends[c] - counts[c]:ends[c]]], axis=0, out=sums[c])
    return sums


def kmeans_static_set(embeddings: np.ndarray, n: int, rng) -> list[int]:
    """n indices, one drawn uniformly from each of n k-means clusters (sorted ascending).

    n >= number of rows -> every index. If the data has fewer than n distinct points some
    clusters come out empty; the missing picks are then drawn at random from the rest, so the
    result always has exactly min(n, rows) distinct indices.
    """
    x = np.asarray(embeddings, dtype=np.float32)   # kmeans_labels works in float32
    if x.ndim != 2:
        raise ValueError(f"kmeans_static_set: embeddings must be 2-d, got shape {x.shape}")
    rows = len(x)
    if n <= 0:
        return []
    if n >= rows:
        return list(range(rows))
    gen = _np_generator(rng)
    labels = kmeans_labels(x, n, gen)
    chosen: list[int] = []
    for c in range(n):
        members = np.flatnonzero(labels == c)
        if members.size:
            chosen.append(int(members[gen.integers(members.size)]))
    if len(chosen) < n:
        rest = np.setdiff1d(np.arange(rows), chosen)
        chosen += [int(i) for i in gen.choice(rest, n - len(chosen), replace=False)]
    return sorted(chosen)

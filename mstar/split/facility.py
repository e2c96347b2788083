"""Facility location: pick m episodes so every validation query has a similar episode (paper eq. 4).

    maximise  F(S) = Σ_v max_{e∈S} sim(v, e)   over S ⊆ episodes, |S| = m,   sim = dot product

(cosine for L2-normalised rows). Greedy is the classic (1 − 1/e) approximation; this module runs
it LAZILY (Minoux): F is monotone submodular, so a gain computed at an earlier step is an upper
bound on the gain now. Candidates sit in a heap keyed by their last bound; only the top ones are
re-evaluated, in small batches, until a freshly computed gain is on top — that one is the argmax.
Ties go to the lowest index, exactly as a plain argmax greedy would.

Three ways to run it:
- exact on a matrix (`neighbors=None`, N·V <= EXACT_LIMIT): the V×N similarity matrix is built
  once and greedy keeps every candidate's gain up to date INCREMENTALLY: a pick changes the
  coverage only of the rows it improves, so only those rows' contributions are subtracted from
  the gains (cost |changed rows| × N per step, not V × N). Same picks as a plain greedy, which
  is what the benchmark checks at N=10k, V=1k (bench/bench_select.py); lazy evaluation is no help
  there: on clustered embeddings nearly every bound goes stale at every step.
- exact on the fly (`neighbors=None`, larger inputs): similarities are computed `V × batch` at a
  time inside the lazy loop; nothing of size N×V is ever held (slow, but memory stays small).
- k nearest neighbours (`neighbors=k`): one blocked pass keeps, for each validation row, its k
  most similar episodes; every other similarity of that row is raised to the row's (k+1)-th
  best, θ_v, so it can never add gain. This is the usual sparsification for large facility
  location problems; the lazy greedy is then exact for that clipped objective Σ_v max(θ_v, max_S sim).

In every mode coverage starts at a lower bound L <= every similarity, so the first pick
maximises Σ_v sim(v, e) and F is the paper's objective up to a constant.

"auto" keeps exactness wherever N·V is small (every real task in the paper) and switches to k-NN
above `EXACT_LIMIT`: at N=100k, V=10k, m=1k a dense matrix alone is 4 GB and the exact lazy
greedy takes hours, while the sparse pass costs one blocked matmul and its greedy about a second.
"""
from __future__ import annotations

import heapq

import numpy as np

EXACT_LIMIT = 50_000_000     # N·V up to which "auto" is exact on a V×N float32 matrix (200 MB)
AUTO_NEIGHBORS = 100         # k for the sparsified objective under "auto"


class _DenseSims:
    """Exact similarities, computed on demand (inputs too large for a matrix)."""

    batch = 16

    def __init__(self, v: np.ndarray, e: np.ndarray, block: int):
        self.v, self.e = v, e
        max_v = float(np.sqrt(np.einsum("ij,ij->i", v, v).max()))
        max_e = max(float(np.sqrt(np.einsum("ij,ij->i", e[s:s + block], e[s:s + block]).max()))
                    for s in range(0, len(e), block))
        # Cauchy-Schwarz: every v·e >= -|v|max |e|max; a hair lower so rounding cannot cross it.
        self.floor = -max_v * max_e * (1 + 1e-6) - 1e-12
        self.block = block
        self._cache: dict[int, np.ndarray] = {}

    def initial_cover(self) -> np.ndarray:
        return np.full(len(self.v), self.floor, dtype=np.float64)

    def initial_gains(self) -> np.ndarray:
        v_sum = self.v.sum(axis=0, dtype=np.float64)
        out = np.empty(len(self.e), dtype=np.float64)
        for s in range(0, len(self.e), self.block):
            out[s:s + self.block] = self.e[s:s + self.block].astype(np.float64) @ v_sum
        return out - len(self.v) * self.floor

    def gains(self, batch: list[int], cover: np.ndarray) -> np.ndarray:
        sims = (self.v @ self.e[batch].T).astype(np.float64)          # V × batch
        self._cache = {idx: sims[:, j] for j, idx in enumerate(batch)}  # reused if one is picked next
        return np.maximum(sims - cover[:, None], 0.0).sum(axis=0)

    def take(self, i: int, cover: np.ndarray) -> None:
        column = self._cache.get(i)
        if column is None:
            column = (self.v @ self.e[i]).astype(np.float64)
        np.maximum(cover, column, out=cover)
        self._cache = {}


class _NeighborSims:
    """Each validation row's k most similar episodes, stored by episode (CSC-like)."""

    batch = 64

    def __init__(self, v: np.ndarray, e: np.ndarray, k: int, v_block: int = 512, e_block: int = 8192):
        top_s, top_i = _top_k_plus_one(v, e, k, v_block, e_block)
        self.theta = top_s.min(axis=1).astype(np.float64)            # the (k+1)-th best per row
        keep = top_s > top_s.min(axis=1, keepdims=True)               # strictly above θ_v: can add gain
        rows = np.broadcast_to(np.arange(len(v))[:, None], keep.shape)[keep]
        eps, sims = top_i[keep], top_s[keep].astype(np.float64)
        order = np.argsort(eps, kind="stable")
        self.rows, self.sims = rows[order], sims[order]
        self.ptr = np.searchsorted(eps[order], np.arange(len(e) + 1))
        self.n = len(e)

    def initial_cover(self) -> np.ndarray:
        return self.theta.copy()

    def initial_gains(self) -> np.ndarray:
        eps = np.repeat(np.arange(self.n), np.diff(self.ptr))
        return np.bincount(eps, weights=self.sims - self.theta[self.rows], minlength=self.n)

    def _entries(self, batch: list[int]) -> tuple[np.ndarray, np.ndarray]:
        b = np.asarray(batch)
        starts, lens = self.ptr[b], self.ptr[b + 1] - self.ptr[b]
        seg = np.repeat(np.arange(len(b)), lens)
        idx = np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens) + np.repeat(starts, lens)
        return seg, idx

    def gains(self, batch: list[int], cover: np.ndarray) -> np.ndarray:
        seg, idx = self._entries(batch)
        vals = np.maximum(self.sims[idx] - cover[self.rows[idx]], 0.0)
        return np.bincount(seg, weights=vals, minlength=len(batch))

    def take(self, i: int, cover: np.ndarray) -> None:
        sl = slice(self.ptr[i], self.ptr[i + 1])
        rows = self.rows[sl]
        cover[rows] = np.maximum(cover[rows], self.sims[sl])


def _top_k_plus_one(v: np.ndarray, e: np.ndarray, k: int, v_block: int, e_block: int):
    """Per validation row, the k+1 largest similarities and their episode indices.

    Blocked so memory stays at v_block × e_block; after the first episode block only entries
    above the row's running (k+1)-th best are merged, which keeps the selection cheap.
    """
    kk = k + 1
    out_s = np.empty((len(v), kk), dtype=np.float32)
    out_i = np.empty((len(v), kk), dtype=np.int64)
    for r0 in range(0, len(v), v_block):
        vb = v[r0:r0 + v_block]
        best_s = np.full((len(vb), kk), -np.inf, dtype=np.float32)
        best_i = np.zeros((len(vb), kk), dtype=np.int64)
        threshold = np.full(len(vb), -np.inf, dtype=np.float32)
        for c0 in range(0, len(e), e_block):
            sims = (vb @ e[c0:c0 + e_block].T).astype(np.float32, copy=False)
            rows = cols = None
            if c0:   # flatnonzero + divmod is several times faster than 2-d nonzero
                rows, cols = np.divmod(np.flatnonzero(sims > threshold[:, None]), sims.shape[1])
            if rows is None or rows.size > len(vb) * 4 * kk:
                # First block (or an adversarial order): most entries qualify, select among all.
                cand_s = np.concatenate([best_s, sims], axis=1)
                cand_i = np.concatenate([best_i, np.broadcast_to(np.arange(c0, c0 + sims.shape[1]),
                                                                   sims.shape)], axis=1)
            elif rows.size == 0:
                continue
            else:
                # Later blocks: only a few entries per row beat the running threshold; pad them.
                counts = np.bincount(rows, minlength=len(vb))       # row-major order: rows ascending
                pos = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)
                pad_s = np.full((len(vb), int(counts.max())), -np.inf, dtype=np.float32)
                pad_i = np.zeros(pad_s.shape, dtype=np.int64)
                pad_s[rows, pos] = sims[rows, cols]
                pad_i[rows, pos] = c0 + cols
                cand_s = np.concatenate([best_s, pad_s], axis=1)
                cand_i = np.concatenate([best_i, pad_i], axis=1)
            sel = np.argpartition(-cand_s, kk - 1, axis=1)[:, :kk]
            best_s = np.take_along_axis(cand_s, sel, axis=1)
            best_i = np.take_along_axis(cand_i, sel, axis=1)
            threshold = best_s.min(axis=1)
        out_s[r0:r0 + len(vb)], out_i[r0:r0 + len(vb)] = best_s, best_i
    return out_s, out_i


def _matrix_greedy(v: np.ndarray, e: np.ndarray, m: int) -> list[int]:
    """Plain greedy with incrementally maintained gains on the dense V×N matrix (see module doc)."""
    sims = v @ e.T                                             # V × N, float32 for float32 input
    n = sims.shape[1]
    floor = float(sims.min()) - 1e-6 * (1.0 + abs(float(sims.min())))
    cover = np.full(len(v), floor, dtype=sims.dtype)
    gains = sims.sum(axis=0, dtype=np.float64) - len(v) * floor  # Σ_v (sim − L) for the empty set
    taken = np.zeros(n, dtype=bool)
    rows_per_block = max(1, (1 << 22) // n)                    # temporaries of ~16 MB each
    chosen: list[int] = []
    for _ in range(m):
        open_gains = np.where(taken, -np.inf, gains)
        best = float(open_gains.max())
        # Incremental sums drift by rounding, so near-ties (e.g. duplicates, or all gains 0 once
        # every row is covered) are settled on freshly computed gains; lowest index wins.
        near = np.flatnonzero(open_gains >= best - 1e-6 * max(1.0, abs(best)))
        if len(near) > 1:
            exact = np.concatenate([np.maximum(sims[:, near[s:s + 512]] - cover[:, None], 0).sum(axis=0, dtype=np.float64)
                                    for s in range(0, len(near), 512)])
            gains[near] = exact
            i = int(near[np.argmax(exact)])
        else:
            i = int(near[0])
        chosen.append(i)
        taken[i] = True
        column = sims[:, i]
        changed = np.flatnonzero(column > cover)
        for s in range(0, len(changed), rows_per_block):
            r = changed[s:s + rows_per_block]
            block = sims[r]
            # Each changed row's contribution drops from max(sim − old, 0) to max(sim − new, 0).
            before = np.maximum(block - cover[r, None], 0)
            after = np.maximum(block - column[r, None], 0)
            gains -= (before - after).sum(axis=0, dtype=np.float64)
        cover[changed] = column[changed]
    return chosen


def _lazy_greedy(sims, m: int) -> list[int]:
    cover = sims.initial_cover()
    heap = [(-g, i, 0) for i, g in enumerate(sims.initial_gains().tolist())]  # (−bound, index, step)
    heapq.heapify(heap)
    chosen: list[int] = []
    while len(chosen) < m:
        _, i, step = heap[0]
        if step == len(chosen):        # a current gain that beats every other (stale) upper bound
            heapq.heappop(heap)
            sims.take(i, cover)
            chosen.append(i)
            continue
        batch = []
        while heap and len(batch) < sims.batch and heap[0][2] != len(chosen):
            batch.append(heapq.heappop(heap)[1])
        for idx, g in zip(batch, sims.gains(batch, cover).tolist()):
            heapq.heappush(heap, (-g, idx, len(chosen)))
    return chosen


def facility_location(val_emb: np.ndarray, ep_emb: np.ndarray, m: int, *,
                      neighbors: int | None | str = "auto", block: int = 8192) -> list[int]:
    """Greedy facility-location subset of episodes, in the order greedy picked them.

    neighbors: None -> exact objective; k -> k-nearest-neighbour sparsified objective (see module
    doc); "auto" -> exact when N·V <= EXACT_LIMIT, else k = AUTO_NEIGHBORS.
    m >= N -> all indices; m <= 0 -> []; no validation rows -> the first m indices (all gains 0).
    """
    v, e = np.asarray(val_emb), np.asarray(ep_emb)
    if v.ndim != 2 or e.ndim != 2:
        raise ValueError(f"facility_location: embeddings must be 2-d, got {v.shape} and {e.shape}")
    if len(v) and v.shape[1] != e.shape[1]:
        raise ValueError(f"facility_location: dimension mismatch, val {v.shape[1]} vs episodes {e.shape[1]}")
    n = len(e)
    if m <= 0:
        return []
    if m >= n:
        return list(range(n))
    if len(v) == 0:
        return list(range(m))
    dtype = np.result_type(v.dtype, e.dtype, np.float32)   # float32 stays float32 (speed, memory)
    v, e = np.ascontiguousarray(v, dtype=dtype), np.ascontiguousarray(e, dtype=dtype)
    if not (np.all(np.isfinite(v)) and all(np.all(np.isfinite(e[s:s + block])) for s in range(0, n, block))):
        raise ValueError("facility_location: embeddings contain NaN or inf")
    if neighbors == "auto":
        neighbors = None if n * len(v) <= EXACT_LIMIT else AUTO_NEIGHBORS
    if neighbors is None or neighbors + 1 >= n:
        if n * len(v) <= EXACT_LIMIT:
            return _matrix_greedy(v, e, m)
        return _lazy_greedy(_DenseSims(v, e, block), m)
    if not isinstance(neighbors, int) or neighbors < 1:
        raise ValueError(f"facility_location: neighbors must be a positive int, None or 'auto', got {neighbors!r}")
    return _lazy_greedy(_NeighborSims(v, e, neighbors, e_block=block), m)

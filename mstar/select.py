"""Selection: which parent to mutate, which failures to show, which queries and episodes to use.

All pure functions of their inputs plus an explicitly passed random generator (paper §3.3,
Algorithm 1a, Table 7):
- `softmax_sample`       parent selection, P(i) ∝ exp(s_i / τ);
- `efraimidis_spirakis`  weighted sampling without replacement (failed cases, weight 1 − score);
- `kmeans_static_set`    the static validation set: k-means into n clusters, one member each;
- `facility_location`    training episodes: greedy max of Σ_v max_{e∈S} sim(v, e) (lazy; in
                         mstar/facility.py, re-exported here);
- `rotating_batch`       the per-iteration rotating minibatch, reproducible from (seed, iteration);
- `make_split`           all of the above for one Task -> a `Split` record.

A "rng" argument may be a `random.Random` or a `numpy.random.Generator`; both give `.random()`.
"""
from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from mstar.embed import Embedder, default_embedder, describe
from mstar.facility import facility_location  # noqa: F401  (re-exported: part of this module's API)

if TYPE_CHECKING:  # only for annotations; keeps this module importable without the task layer
    from mstar.tasks import Task


def _np_generator(rng) -> np.random.Generator:
    """A numpy Generator from whatever the caller passed (drawing from it if it is a Random)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, random.Random):
        return np.random.default_rng(rng.getrandbits(64))
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    raise TypeError(f"expected random.Random, numpy Generator or int seed, got {type(rng).__name__}")


# --------------------------------------------------------------------------- parent selection

def softmax_probabilities(scores: Sequence[float], tau: float) -> np.ndarray:
    """P(i) = exp(s_i/τ) / Σ_j exp(s_j/τ), computed stably (shifted by the max score)."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or s.size == 0:
        raise ValueError("softmax: need a non-empty 1-d list of scores")
    if not np.all(np.isfinite(s)):
        raise ValueError(f"softmax: scores must be finite, got {s.tolist()}")
    if not (isinstance(tau, (int, float)) and math.isfinite(tau) and tau > 0):
        raise ValueError(f"softmax: temperature must be a positive finite number, got {tau!r}")
    w = np.exp((s - s.max()) / tau)  # the best score maps to 1; very low ones underflow to 0
    return w / w.sum()


def softmax_sample(scores: Sequence[float], tau: float, rng) -> int:
    """Index drawn with P(i) ∝ exp(scores[i] / tau). Small tau -> (nearly) always the best."""
    p = softmax_probabilities(scores, tau)
    cum = np.cumsum(p)
    u = float(rng.random()) * cum[-1]
    # side="right": zero-probability entries (flat stretches of cum) can never be hit.
    return int(min(np.searchsorted(cum, u, side="right"), len(p) - 1))


# --------------------------------------------------------------------------- failure sampling

def efraimidis_spirakis(weights: Sequence[float], k: int, rng, *, include_zero: bool = False) -> list[int]:
    """Weighted sampling of k distinct indices without replacement (Efraimidis & Spirakis 2006).

    Each positive-weight item gets the key u^(1/w), u ~ U(0, 1]; the k largest keys win (compared
    in log-log space so tiny weights cannot overflow). Returned in draw order (largest key first).

    Zero weights mean "never pick": such items are excluded, so fewer than k indices come back
    when fewer than k weights are positive. With include_zero=True they instead fill the
    remaining slots in uniformly random order, after every positive-weight item.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1:
        raise ValueError("efraimidis_spirakis: weights must be a 1-d sequence")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"efraimidis_spirakis: weights must be finite and >= 0, got {w.tolist()}")
    if int(k) != k or k < 0:
        raise ValueError(f"efraimidis_spirakis: k must be a non-negative integer, got {k!r}")
    ranked = []
    for i in np.flatnonzero(w > 0):           # index order, so a seed always gives the same draw
        u = 1.0 - float(rng.random())           # in (0, 1]
        # Largest u^(1/w)  <=>  smallest log(-log u) - log w; finite even for subnormal weights.
        rank = -math.inf if u == 1.0 else math.log(-math.log(u)) - math.log(float(w[i]))
        ranked.append((rank, int(i)))
    ranked.sort()
    chosen = [i for _, i in ranked[:k]]
    if include_zero and len(chosen) < k:
        zeros = [int(i) for i in np.flatnonzero(w == 0)]
        for j in range(len(zeros) - 1, 0, -1):   # Fisher-Yates with the caller's rng
            r = int(float(rng.random()) * (j + 1))
            zeros[j], zeros[r] = zeros[r], zeros[j]
        chosen += zeros[: k - len(chosen)]
    return chosen


# --------------------------------------------------------------------------- static set (k-means)

def kmeans_labels(x: np.ndarray, k: int, gen: np.random.Generator, max_iter: int = 30,
                  tol: float = 1e-3) -> np.ndarray:
    """Lloyd's k-means with k-means++ seeding; returns one cluster label per row.

    float32 throughout and centre sums as one sparse (k × n) @ (n × d) product per iteration,
    so 100k × 384 runs in seconds (the benchmark target: < 5 s). Stops when labels no longer
    change, when at most `tol` of the points moved (on fewer than 1/tol points: exact
    convergence), or after `max_iter` rounds: on 100k realistic embeddings Lloyd keeps moving a
    few hundred points for 100+ rounds, which changes nothing that matters for picking one
    representative per cluster.
    """
    from scipy.sparse import csr_matrix  # scipy comes with scikit-learn

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
        onehot = csr_matrix((np.ones(n, dtype=np.float32), (labels, rows)), shape=(k, n))
        counts = np.bincount(labels, minlength=k)
        sums = np.asarray(onehot @ x)
        empty = np.flatnonzero(counts == 0)
        centers[counts > 0] = sums[counts > 0] / counts[counts > 0, None]
        if len(empty):
            # Re-seed empty clusters at the points worst served by their current centres.
            worst = np.argsort(-dist[rows, labels], kind="stable")[:len(empty)]
            centers[empty] = x[worst]
    return labels


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


# --------------------------------------------------------------------------- rotating minibatch

def rotating_batch(pool_indices: Iterable[int], size: int, iteration: int, seed: int, *,
                   exclude: Iterable[int] = ()) -> list[int]:
    """`size` distinct indices from the pool, the same for the same (seed, iteration) in any process.

    The generator is seeded from the string "seed:iteration" (str seeds hash with SHA-512, not
    Python's randomised hash), so a resumed run redraws exactly the batches it drew before.
    Indices in `exclude` (e.g. the static set) are never returned.
    """
    if size < 0:
        raise ValueError(f"rotating_batch: size must be >= 0, got {size}")
    pool = sorted(set(int(i) for i in pool_indices) - set(int(i) for i in exclude))
    rng = random.Random(f"mstar-rotating:{seed}:{iteration}")
    return rng.sample(pool, min(size, len(pool)))


# --------------------------------------------------------------------------- one task's split

@dataclass(frozen=True)
class SplitConfig:
    static_size: int = 25      # paper Table 7: 25 static items, one per k-means cluster
    rotating_size: int = 5     # items per rotating minibatch
    train_ratio: int = 5       # training episodes = train_ratio × static items; <= 0 -> all episodes
    seed: int = 0
    cover: str = "validation"  # facility location covers "validation" (all) or only "static" queries
    embedder: str = ""         # which embedder chose the static set and the episodes


@dataclass
class Split:
    """Indices into task.validation (static, rotating_pool) and task.episodes (train_episodes)."""
    static: list[int]
    rotating_pool: list[int]
    train_episodes: list[int]
    config: SplitConfig = field(default_factory=SplitConfig)
    static_ids: list[str] = field(default_factory=list)
    train_episode_ids: list[str] = field(default_factory=list)

    def rotating(self, iteration: int) -> list[int]:
        """This iteration's rotating minibatch. An empty pool (tiny validation sets) falls back to
        the static set, so the reflector still sees cases."""
        pool = self.rotating_pool or self.static
        return rotating_batch(pool, self.config.rotating_size, iteration, self.config.seed)

    def to_dict(self) -> dict:
        return asdict(self)


def make_split(task: "Task", embedder: Embedder | None = None, *, static_size: int = 25,
               rotating_size: int = 5, train_ratio: int = 5, seed: int = 0,
               cover: str = "validation") -> Split:
    """Static set by k-means over question embeddings, the rest of validation as the rotating
    pool, and training episodes by facility location against the validation questions.

    Training budget M = train_ratio × |static| (the reference implementation's reading of the
    paper's "train episodes = 5× val items"); train_ratio <= 0 means every episode, which is what
    the paper's LoCoMo numbers (all 272 sessions) amount to. Facility location covers every
    validation question by default, so rotating-batch failures shown to the reflector have their
    sessions in memory too; cover="static" covers only the static set.

    Training episodes are returned in the task's order (not greedy order): programs see the
    sessions in the order they happened, which matters for memories that update facts.
    """
    if cover not in ("validation", "static"):
        raise ValueError(f"make_split: cover must be 'validation' or 'static', got {cover!r}")
    embedder = embedder or default_embedder()
    cfg = SplitConfig(static_size, rotating_size, train_ratio, seed, cover, describe(embedder))
    questions = [q.question for q in task.validation]
    q_emb = embedder.embed(questions)
    static = kmeans_static_set(q_emb, static_size, np.random.default_rng([seed, 0x5A7]))
    static_set = set(static)
    rotating_pool = [i for i in range(len(questions)) if i not in static_set]

    n_eps = len(task.episodes)
    budget = n_eps if train_ratio <= 0 else train_ratio * len(static)
    if budget >= n_eps:
        train = list(range(n_eps))
    else:
        targets = q_emb if cover == "validation" else q_emb[static]
        ep_emb = embedder.embed([ep.text for ep in task.episodes])
        train = sorted(facility_location(targets, ep_emb, budget))
    return Split(static, rotating_pool, train, cfg,
                 [task.validation[i].id for i in static], [task.episodes[i].id for i in train])

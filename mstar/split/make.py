"""One task's split: the static set, the rotating pool and the training episodes.

`make_split` picks the static set by k-means (mstar.split.kmeans), keeps the other validation
items as the rotating pool, and chooses training episodes by facility location
(mstar.split.facility) over embeddings (mstar.split.embed). The `Split` record is written to
the run folder (split.json) and read back on resume, so a resumed run uses the same items.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Iterable

import numpy as np

from mstar.split.embed import Embedder, default_embedder, describe
from mstar.split.facility import facility_location
from mstar.split.kmeans import kmeans_static_set

if TYPE_CHECKING:  # only for annotations; keeps this module importable without the task layer
    from mstar.tasks import Task


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
        """This iteration's rotating minibatch, drawn by the split's own seed and size."""
        return self.batch(self.config.rotating_size, iteration, self.config.seed)

    def batch(self, size: int, iteration: int, seed: int) -> list[int]:
        """`size` items of the rotating pool for `iteration`, drawn by `seed` (the loop passes the
        evolution's). An empty pool (tiny validation sets) falls back to the static set, so the
        reflector still sees cases."""
        return rotating_batch(self.rotating_pool or self.static, size, iteration, seed)

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

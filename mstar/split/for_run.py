"""A run's split: its settings (mstar.config) applied to its task."""
from __future__ import annotations

from mstar.config import RunConfig
from mstar.split.embed import make_embedder
from mstar.split.make import Split, make_split
from mstar.tasks import Task


def train_ratio(cfg: RunConfig, task: Task) -> int:
    """Training budget ratio: the run's explicit setting, else the task's own default (LoCoMo: 0 =
    every session, as in the paper), else 5 (paper Table 7)."""
    if cfg.evolution.train_ratio is not None:
        return cfg.evolution.train_ratio
    return task.train_ratio if task.train_ratio is not None else 5


def split_for(cfg: RunConfig, task: Task, embedder=None) -> Split:
    """The run's split of `task` (static set, rotating pool, training episodes), as its settings say."""
    ev = cfg.evolution
    embedder = embedder or make_embedder(ev.embed_model, ev.embed_cache_dir)
    return make_split(task, embedder, static_size=ev.static_size, rotating_size=ev.rotating_size,
                      train_ratio=train_ratio(cfg, task), seed=ev.split_seed)

"""Which items a run uses: the static set, the rotating pool and the training episodes.

    embed.py      sentence embeddings for choosing subsets (MiniLM when installed, else hashing);
                  which model programs' chroma collections get (program_embeddings)
    apart.py      the split's embeddings computed in a child process (the engine keeps no model)
    served.py     those embeddings served to programs by the engine, and their memo (bounded in
                  bytes, released with each session)
    kmeans.py     static set: k-means over question embeddings, one item per cluster
    facility.py   training episodes: greedy facility location over episode/question similarity
    make.py       `make_split(task, ...)` -> `Split`; the per-iteration rotating minibatch
    for_run.py    `split_for(cfg, task)`: a run's split, its settings applied (and its train ratio)
    checks.py     `split_warnings(split, task)`: splits too small to work with, and what to change
"""
from mstar.split.make import Split, SplitConfig, make_split, rotating_batch

__all__ = ["Split", "SplitConfig", "make_split", "rotating_batch"]

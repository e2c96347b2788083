"""Splits that leave the loop little to work with, said before the run spends anything.

A small custom task can end with every validation item in the static set (the reflector then
gets no fresh rotating batch and sees the static set's cases again), with a static set of one or
two items (every score a step of 1/2 or 1, the best decided by one answer), or with a test split
too small for the paired interval to tell a realistic gain from noise. `split_warnings` returns
one line per such problem, each saying what it costs and what to change; the run goes on.
"""
from __future__ import annotations

import math

MIN_STATIC = 3        # below this a static score moves in steps of a third or more
MIN_TEST = 30         # below this a paired 95% interval is wider than about +-0.18


def resolvable_gain(n: int, spread: float = 0.5) -> float:
    """About the smallest mean gain a paired 95% interval tells from zero on `n` items, when the
    item-by-item differences spread with standard deviation `spread` (0.5: many items change,
    some up, some down): 1.96 * spread / sqrt(n)."""
    return 1.96 * spread / math.sqrt(n) if n > 0 else math.inf


def split_warnings(split, task) -> list[str]:
    """The problems of `split` (mstar.split.Split) for `task`, one line each, without the
    'mstar: warning:' prefix the caller adds."""
    out = []
    n_val, static, pool = len(task.validation), len(split.static), len(split.rotating_pool)
    batch = split.config.rotating_size
    if pool == 0:
        out.append(f"rotating pool 0: all {n_val} validation items are in the static set, so the reflector "
                   "sees the static set's cases again instead of a fresh batch each iteration; give "
                   f"--static-size {_smaller(n_val, batch)} or fewer (or the task more validation items)")
    elif pool < batch:
        out.append(f"rotating pool {pool} is smaller than a rotating batch ({batch}): the reflector sees the "
                   f"same {pool} item{'s' if pool != 1 else ''} every iteration; give --static-size "
                   f"{max(1, n_val - 4 * batch)} or fewer (or the task more validation items)")
    if 0 < static < MIN_STATIC:
        out.append(f"static set of {static} item{'s' if static != 1 else ''}: every static score is a step of "
                   f"{1 / static:.2f}, and which program is best turns on one answer; give --static-size 10 or "
                   f"more (the paper uses 25) and the task at least {10 + 2 * batch} validation items")
    n_test = len(task.test)
    if n_test == 0:
        out.append("no test items: the run ends without a held-out score for its champion; give the task a "
                   "test split (docs/tasks.md)")
    elif n_test < MIN_TEST:
        out.append(f"test split of {n_test} item{'s' if n_test != 1 else ''}: only a gain over the best seed of "
                   f"about {resolvable_gain(n_test):+.2f} or more can be told from noise, smaller ones end as "
                   f"'no difference can be told'; give the task {MIN_TEST} or more test items (docs/tasks.md)")
    return out


def _smaller(n_val: int, batch: int) -> int:
    """A static size that leaves at least one rotating batch (and a third of the items) to rotate."""
    return max(1, min(n_val * 2 // 3, n_val - batch))

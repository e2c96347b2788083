"""Records shared by the offline reflector's mutation catalogue and its model."""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Edit:
    """What one mutation did to a program: the new source and the commit message parts."""
    source: str
    title: str       # "<key>: <detail>" -- the key lets later rounds recognise the change
    diagnosis: str   # the root cause this change addresses
    change: str      # what was changed, in one sentence


@dataclass(frozen=True)
class Mutation:
    name: str                                             # TUNING key, e.g. "top_k_up"
    key: str                                              # title stem, e.g. "Raise top-k"
    applies: Callable[[str], bool]
    apply: Callable[[str, random.Random], Edit | None]    # None when it cannot apply after all

"""One lock around the engine's own uses of the `ast` module.

CPython 3.11 keeps the recursion depth of its AST constructors in per-interpreter state; two
threads building syntax trees at once can corrupt it ("SystemError: AST constructor recursion
depth mismatch"). The engine parses in many threads now -- JSON repair in the task agent's
replies, the offline reflector's source edits while several iterations are in flight, each
evaluation's look at whether write() reads its item (mstar/evaluation/item_use.py) -- so those
paths take this lock. (The sandbox's worker parses program text single-threaded.)
"""
from __future__ import annotations

from sandbox.contract.ast_lock import AST_LOCK

__all__ = ["AST_LOCK"]

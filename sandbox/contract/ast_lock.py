"""One lock around building syntax trees with `ast` in a process that has threads.

CPython 3.11 keeps the recursion depth of its AST constructors in per-interpreter state; two
threads building trees at once can corrupt it ("SystemError: AST constructor recursion depth
mismatch", cpython gh-106905), for instance when a collection runs Python code in the middle of
a parse. The engine parses in many threads, and a sandbox worker's concurrent reads build their
Query through field_types. Here, in the contract package, because both the sandbox and the
engine import it (the engine's name for it: mstar.ast_guard.AST_LOCK).
"""
from __future__ import annotations

import threading

AST_LOCK = threading.RLock()

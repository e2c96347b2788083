"""Which programs build the same knowledge base -- so that a child whose patch changed only what the
task agent is told reads its parent's, instead of writing every episode again.

Why: reflectors often change only the instructions the engine puts into prompts (INSTRUCTION_QUERY,
INSTRUCTION_RESPONSE, ALWAYS_ON_KNOWLEDGE). The knowledge base such a child builds -- its worker,
its writes, its chroma adds -- is the parent's, byte for byte; building it again cost a worker
and, for a vector-search parent of the 30-session LoCoMo workload, ~0.6 s of writes on the
iteration's critical path (and, without the response cache, every extraction call again).

Two program texts have the same identity when they differ only in top-level assignments of a
literal (a str, number, bool or None) to a name that

  - is not INSTRUCTION_KNOWLEDGE_ITEM (the extraction prompt: it decides what is written);
  - is bound nowhere else and named nowhere else in the module: no load, `global`, attribute or
    string of that name (`globals()["X"]`), so neither write() nor read() can see its value.

The engine reads the contract constants among those (the query, answer and always-on prompts)
from the program's own text, never from the worker that built the knowledge base
(`with_own_constants`). Everything else is compared as parsed, with line and column numbers
counted from the start of each top-level statement, and the lines between two statements kept
equal unless a left-out assignment sits between them: a prompt rewritten over five lines above
the classes moves them down five lines, and nothing else may move. A shared worker's error names
a line of the program that built it; `relocate` moves it to the same statement in the child's
text, so the reflector reads the line it would have read from the child's own worker.

A program whose read() may change its state (mstar.evaluation.read_state) never shares: its
reads on a parent's knowledge base would see what the parent's reads changed. Nor does a text
that does not parse. Either way its identity is its text, as before.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
from typing import NamedTuple

from mstar.ast_guard import AST_LOCK
from mstar.evaluation.read_state import read_changes_state
from sandbox.contract.interface import CONSTANT_NAMES

WRITE_SIDE = "INSTRUCTION_KNOWLEDGE_ITEM"     # the one contract constant the knowledge base depends on
_LITERALS = (str, int, float, bool, type(None))


@functools.lru_cache(maxsize=256)   # asked for every evaluation, prestart and kept-session lookup
def knowledge_identity(source: str) -> str:
    """A digest that two programs share exactly when they build the same knowledge base and read
    it the same way (module docstring)."""
    h = hashlib.sha256()
    layout = _layout(source)
    if layout is None:
        h.update(b"text\x00" + source.encode("utf-8", "surrogatepass"))
    else:
        h.update(b"ast\x00" + layout.identity.encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def own_constants(source: str) -> dict[str, str]:
    """The contract constants left out of `source`'s identity, with the values its text gives them."""
    layout = _layout(source)
    return dict(layout.values) if layout is not None else {}


def with_own_constants(info, source: str):
    """`info` (a LoadInfo of the program that built a knowledge base) with `source`'s own prompt
    constants: what the engine's prompts for `source` are built from."""
    own = own_constants(source)
    if not own or all(info.constants.get(k) == v for k, v in own.items()):
        return info
    return dataclasses.replace(info, constants={**info.constants, **own})


def relocate(line: int, built_by: str, source: str) -> int:
    """`line` of `built_by` as the same line of `source`, a text of the same knowledge identity:
    shifted as the top-level statement holding it was (unchanged outside any statement)."""
    if built_by == source:
        return line
    a, b = _layout(built_by), _layout(source)
    if a is None or b is None or len(a.spans) != len(b.spans):
        return line
    for (start, end), (start_b, _) in zip(a.spans, b.spans):
        if start <= line <= end:
            return line + start_b - start
    return line


class _Layout(NamedTuple):
    identity: str                          # what two texts of one knowledge identity share
    values: tuple[tuple[str, str], ...]    # the contract constants left out, with their last values
    spans: tuple[tuple[int, int], ...]     # (first, last) line of each statement kept, in order


@functools.lru_cache(maxsize=256)
def _layout(source: str) -> _Layout | None:
    """`source` without its answer-side literals, or None when it may not share (module docstring)."""
    try:
        with AST_LOCK:
            tree = ast.parse(source)
        return None if read_changes_state(source) else _without_literals(tree)
    except (SyntaxError, ValueError, RecursionError, MemoryError):   # a text built to break parsers
        return None


def _without_literals(tree: ast.Module) -> _Layout:
    literal: dict[str, list[ast.stmt]] = {}
    for stmt in tree.body:
        name, value = _literal_binding(stmt)
        if name is not None:
            literal.setdefault(name, []).append(stmt)
    names, strings, bound = _mentions(tree)
    free = {n for n, stmts in literal.items()
            if n != WRITE_SIDE and names.get(n, 0) == len(stmts) and n not in strings and n not in bound}
    values: dict[str, str] = {}
    for name in sorted(free & set(CONSTANT_NAMES)):
        last = _literal_binding(literal[name][-1])[1]
        if not isinstance(last, str):
            free.discard(name)   # the loader refuses a non-str constant: the program's own load says so
        else:
            values[name] = last
    parts, spans, previous_end, skipped = [], [], None, False
    for stmt in tree.body:
        if _literal_binding(stmt)[0] in free:
            skipped = True
            continue
        start, end = stmt.lineno, stmt.end_lineno
        if previous_end is not None and not skipped:   # nothing left out between: the gap stays
            parts.append(f"gap {start - previous_end}")
        ast.increment_lineno(stmt, 1 - start)   # counted from its own first line (the tree is this call's)
        with AST_LOCK:
            parts.append(ast.dump(stmt, include_attributes=True))
        spans.append((start, end))
        previous_end, skipped = end, False
    return _Layout("\n".join(parts), tuple(sorted(values.items())), tuple(spans))


def _literal_binding(stmt: ast.stmt) -> tuple[str | None, object]:
    """(name, value) when `stmt` is `NAME = <literal>` or `NAME: T = <literal>`, else (None, None)."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target, value = stmt.targets[0], stmt.value
    elif isinstance(stmt, ast.AnnAssign) and stmt.simple and stmt.value is not None:
        target, value = stmt.target, stmt.value
    else:
        return None, None
    if isinstance(target, ast.Name) and isinstance(value, ast.Constant) and isinstance(value.value, _LITERALS):
        return target.id, value.value
    return None, None


def _mentions(tree: ast.Module) -> tuple[dict[str, int], set[str], set[str]]:
    """How often each name occurs as a Name; every str constant; every name an attribute, a
    `global`/`nonlocal`, an import or a def/class binds or reads -- a way to reach a module
    constant other than by its plain name."""
    names: dict[str, int] = {}
    strings: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names[node.id] = names.get(node.id, 0) + 1
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.add(node.value)
        elif isinstance(node, ast.Attribute):
            bound.add(node.attr)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    return names, strings, bound

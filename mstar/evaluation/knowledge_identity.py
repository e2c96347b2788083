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

A child whose patch changed read() too builds the same knowledge base: its `writer_identity` is
the knowledge identity with the body of KnowledgeBase.read left out. It may then run its own
read() in the parent's worker (sandbox.worker.loader.load_reader: compiled there, bound to the
parent's module), which asks more of the text: the class is the module's last statement kept, so
no code but read() moves with read()'s length; read() is the class's last statement, plain (no
decorator, no default, no other binding of the name), and uses no super() or __class__; and
every constant read() names is the parent's too (it runs with the parent's module as its
globals). The worker moves read()'s lines by `reader_line_shift`, so that `relocate` (open-ended
for the last statement) gives every line an error names there as the child's own worker would.
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


def writer_identity(source: str) -> str:
    """A digest that two programs share when they build the same knowledge base, however they read
    it: their knowledge identity with KnowledgeBase.read left out, where the worker that built one
    can run the other's read() in its place (`_reader_layout`); else the knowledge identity."""
    layout = _reader_layout(source)
    if layout is None:
        return knowledge_identity(source)
    return hashlib.sha256(b"writer\x00" + layout.encode("utf-8", "surrogatepass")).hexdigest()


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
    for i, ((start, end), (start_b, _)) in enumerate(zip(a.spans, b.spans)):
        # The last statement kept is open-ended: a read() run in place of the builder's may be longer.
        if start <= line <= end or (i == len(a.spans) - 1 and line > end):
            return line + start_b - start
    return line


def reader_line_shift(built_by: str, source: str) -> int:
    """How many lines `source`'s KnowledgeBase class starts above `built_by`'s: what the worker adds to
    the lines of `source`'s read() when it runs it on `built_by`'s knowledge base, so that every line
    an error names there is one of `built_by`'s and `relocate` maps it back to `source`."""
    a, b = _layout(built_by), _layout(source)
    return a.spans[-1][0] - b.spans[-1][0] if a is not None and b is not None else 0


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


@functools.lru_cache(maxsize=256)
def _reader_layout(source: str) -> str | None:
    """`source`'s layout with the body of KnowledgeBase.read left out, or None when another
    program's worker could not run this read() in place of its own (module docstring): the class
    must be the last statement kept (so that no code moves with read()'s length) and end with a plain
    `def read`, and read() may use nothing but the module's names (no super(), no __class__)."""
    if _layout(source) is None:
        return None
    with AST_LOCK:
        tree = ast.parse(source)
    mentions = _mentions(tree)   # read()'s names too: a constant it uses is the builder's, so must agree
    cls = _reader_class(tree)
    if cls is None:
        return None
    read = cls.body[-1]
    cls.body[-1] = ast.Pass(lineno=read.lineno, col_offset=read.col_offset,
                            end_lineno=read.lineno, end_col_offset=read.col_offset)
    cls.end_lineno, cls.end_col_offset = read.lineno, read.col_offset
    start = cls.lineno   # before _without_literals counts each statement's lines from its own start
    layout = _without_literals(tree, mentions)
    if layout.spans[-1][0] != start:   # code after the class would move with read()'s length
        return None
    return layout.identity


def _reader_class(tree: ast.Module) -> ast.ClassDef | None:
    """The module's one KnowledgeBase class when its read() can be swapped (`_reader_layout`)."""
    bound = [s for s in tree.body if _binds(s, "KnowledgeBase")]
    if len(bound) != 1 or not isinstance(bound[0], ast.ClassDef) or bound[0].decorator_list:
        return None
    cls = bound[0]
    read = cls.body[-1]
    if not isinstance(read, ast.FunctionDef) or read.name != "read" or read.decorator_list \
            or read.args.defaults or any(d is not None for d in read.args.kw_defaults):
        return None
    if any(_binds(s, "read") for s in cls.body[:-1]):
        return None
    if any(isinstance(n, ast.Name) and n.id in ("super", "__class__") for n in ast.walk(read)):
        return None
    return cls


def _binds(stmt: ast.stmt, name: str) -> bool:
    """Whether a statement of a module or class body binds `name` there, or might (a `global`)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return stmt.name == name or any(isinstance(n, ast.Global) and name in n.names for n in ast.walk(stmt))
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name).split(".")[0] == name for a in stmt.names)
    return any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for n in ast.walk(stmt))


def _without_literals(tree: ast.Module, mentions=None) -> _Layout:
    literal: dict[str, list[ast.stmt]] = {}
    for stmt in tree.body:
        name, value = _literal_binding(stmt)
        if name is not None:
            literal.setdefault(name, []).append(stmt)
    names, strings, bound = mentions or _mentions(tree)
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

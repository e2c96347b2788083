"""Whether a program's write() can see the KnowledgeItem it is given -- read from its source.

Why: an evaluation writes each episode once its extraction is back. A program that stores only
the raw text (the paper's vector-search seed: ~230 chroma adds, 0.6 s of writes on LoCoMo's 30
sessions) waits for extractions it never looks at, and its writes then hold up every read. When
write() provably ignores its item, the evaluation writes at once with a placeholder item and
fills in the extracted items when they come back (mstar.evaluation.ingest): same knowledge base,
one round of latency less.

"Provably" is conservative and syntactic; anything unusual means "it may read the item":
  - `KnowledgeBase` and `KnowledgeItem` are bound once, by plain top-level classes (no bases,
    keywords or decorators -- the item class only a bare `@dataclass` from `dataclasses`);
  - write is one undecorated `def write(self, item, raw_text)` of the class, and its body --
    nested functions and lambdas included -- never names `item`;
  - nothing can swap the method or the instance's class: no assignment to a `.write` or dunder
    attribute, no `setattr` / `getattr` / `delattr` / `vars`, no `__dict__`;
  - building the placeholder runs no program code: the item class holds only field
    declarations whose defaults are literals or `field(default=<literal>, metadata=<literal>,
    default_factory=list|dict|set|tuple)`, `field` from `dataclasses`, none of those names rebound.
Parsing runs nothing: the source is never executed here.
"""
from __future__ import annotations

import ast
import functools

from mstar.ast_guard import AST_LOCK

_REFLECTION = frozenset({"setattr", "getattr", "delattr", "vars"})
_FACTORIES = frozenset({"list", "dict", "set", "tuple"})
_FIELD_KEYWORDS = frozenset({"default", "metadata", "default_factory"})


@functools.lru_cache(maxsize=256)   # asked by every evaluation of a program
def write_ignores_item(source: str) -> bool:
    """True only when write() cannot depend on its item (see the module docstring)."""
    try:
        with AST_LOCK:   # the engine parses in many threads (mstar/ast_guard.py)
            return _ignores(ast.parse(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):   # not Python, or too deep to walk
        return False


def _ignores(tree: ast.Module) -> bool:
    bindings = _bindings(tree)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    kb, item_cls = classes.get("KnowledgeBase"), classes.get("KnowledgeItem")
    if kb is None or item_cls is None or _swaps_methods(tree):
        return False
    once = {"KnowledgeBase": 1, "KnowledgeItem": 1, "dataclass": 1, "field": 1 if _imported(tree, "field") else 0}
    if any(bindings.get(name, 0) > once.get(name, 0) for name in (*once, *_FACTORIES)):
        return False
    return (_imported(tree, "dataclass") and _plain_class(kb) and _write_ignores(kb)
            and _inert_item_class(item_cls))


def _imported(tree: ast.Module, name: str) -> bool:
    """`from dataclasses import <name>` (no alias) at the top level."""
    return any(isinstance(n, ast.ImportFrom) and n.module == "dataclasses" and n.level == 0
               and any(a.name == name and a.asname is None for a in n.names) for n in tree.body)


def _bindings(tree: ast.AST) -> dict[str, int]:
    """How often each name is bound anywhere (assignments, defs, imports, globals, loop targets)."""
    counts: dict[str, int] = {}

    def bind(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bind(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                bind((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                bind(name)
        elif isinstance(node, ast.arg):
            bind(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bind(node.name)
    return counts


def _swaps_methods(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            if node.attr == "__dict__":
                return True
            if not isinstance(node.ctx, ast.Load) and (node.attr == "write" or node.attr.startswith("__")):
                return True
        if isinstance(node, ast.Name) and node.id in _REFLECTION:
            return True
    return False


def _plain_class(cls: ast.ClassDef) -> bool:
    return not cls.bases and not cls.keywords and not cls.decorator_list


def _write_ignores(kb: ast.ClassDef) -> bool:
    writes = [n for n in kb.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "write"]
    others = [n for n in kb.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
              and any(isinstance(t, ast.Name) and t.id == "write" for t in ast.walk(n))]
    if len(writes) != 1 or others or not isinstance(writes[0], ast.FunctionDef):
        return False
    fn = writes[0]
    params = [*fn.args.posonlyargs, *fn.args.args]
    if fn.decorator_list or fn.args.vararg or fn.args.kwarg or len(params) != 3:
        return False
    name = params[1].arg
    return not any(isinstance(n, ast.Name) and n.id == name for stmt in fn.body for n in ast.walk(stmt))


def _inert_item_class(cls: ast.ClassDef) -> bool:
    # Only a bare @dataclass: its options (init=False, ...) change what building an item runs.
    dec = cls.decorator_list
    if cls.bases or cls.keywords or len(dec) != 1 or not (isinstance(dec[0], ast.Name) and dec[0].id == "dataclass"):
        return False
    for i, stmt in enumerate(cls.body):
        if i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue   # docstring
        if isinstance(stmt, ast.Pass):
            continue
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            return False
        if stmt.value is not None and not _inert_default(stmt.value):
            return False
    return True


def _inert_default(value: ast.expr) -> bool:
    if _literal(value):
        return True
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "field"):
        return False
    if value.args:
        return False
    for kw in value.keywords:
        if kw.arg not in _FIELD_KEYWORDS:
            return False
        if kw.arg == "default_factory":
            if not (isinstance(kw.value, ast.Name) and kw.value.id in _FACTORIES):
                return False
        elif not _literal(kw.value):
            return False
    return True


def _literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True

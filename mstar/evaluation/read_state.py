"""Whether a program's read() may change its own state -- read from its source.

Why: an evaluation's reads run at once (up to `SandboxLimits.parallel_reads`, each on a thread of
the worker), so that their toolkit LLM calls wait together. A read() that keeps something on the
knowledge base while it waits (`self.current = query.text` before its LLM call) or adds to a table
another read is scanning sees the other reads half-way: with 32 reads at once, 18-29 of 32
answers named another read's question and 3-13 reads raised "dictionary changed size during
iteration" (issue 30). The interface spec says reads are concurrent, and that a read() which
changes state gets its reads run one at a time; this module decides which.

"Changes state", syntactically, in read() and in every method of KnowledgeBase it calls as
`self.name(...)`, and theirs in turn:
  - an assignment, augmented assignment or `del` whose target is rooted at `self`, at a
    module-level name, or at a local alias of either (`index = self.index` ... `index[k] = v`,
    `for row in self.rows: row["hits"] += 1`);
  - a call of a mutating method (append, update, setdefault, pop, add, ...) on such an expression
    -- chroma's add / upsert / update / delete included;
  - a database write: execute / executemany / executescript whose SQL is not, as written, a
    SELECT (or a WITH ... SELECT without INSERT, UPDATE, DELETE, REPLACE), or commit();
  - `global` / `nonlocal`, or anything that cannot be parsed.
A change hidden from this (a module-level helper that mutates its argument) is the program's own
race: the spec tells it reads overlap. Parsing runs nothing: the source is never executed here.

`read_may_ask_llm` says whether a read() may ask the toolkit's LLM (a held-out test shares a kept
knowledge base only when none does: mstar/execution/local.py says why).
"""
from __future__ import annotations

import ast
import functools
import re

from mstar.ast_guard import AST_LOCK

MUTATORS = frozenset({
    "append", "extend", "insert", "remove", "pop", "popitem", "clear", "update", "setdefault", "add",
    "discard", "sort", "reverse", "appendleft", "extendleft", "popleft", "rotate", "move_to_end",
    "subtract", "difference_update", "intersection_update", "symmetric_difference_update",
    "upsert", "delete", "create_collection", "delete_collection", "commit", "executescript",
})
SQL_CALLS = frozenset({"execute", "executemany"})
_GETTERS = frozenset({"get", "values", "items", "keys", "get_collection", "get_or_create_collection"})  # still the state
_WRITE_WORDS = re.compile(r"\b(INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER|VACUUM|REINDEX|ATTACH|PRAGMA)\b", re.I)


@functools.lru_cache(maxsize=256)   # asked by every evaluation of a program
def read_changes_state(source: str) -> bool:
    """True when read() may change the knowledge base's state (see the module docstring)."""
    try:
        with AST_LOCK:   # the engine parses in many threads (mstar/ast_guard.py)
            tree = ast.parse(source)
            return _changes(tree)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True


@functools.lru_cache(maxsize=256)
def read_may_ask_llm(source: str) -> bool:
    """True unless no code a read() can run names the LLM: no name, attribute, argument or string
    with "llm" in it (`toolkit.llm_completion`, a helper `ask_llm`) anywhere in the module but
    KnowledgeBase's __init__ and write() and docstrings. Conservative on purpose; a text that does
    not parse may."""
    try:
        with AST_LOCK:
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    methods = _kb_methods(tree) or {}
    writes = {id(methods[name]) for name in ("__init__", "write") if name in methods}
    todo: list[ast.AST] = [tree]
    while todo:
        node = todo.pop()
        if id(node) in writes or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            continue
        text = (node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute)
                else node.arg if isinstance(node, (ast.arg, ast.keyword)) else node.name
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else
                node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None)
        if text and "llm" in text.lower():
            return True
        todo.extend(ast.iter_child_nodes(node))
    return False


def _kb_methods(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None:
    """KnowledgeBase's methods by name (the last definition of each), or None without the class."""
    kb = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "KnowledgeBase"), None)
    return None if kb is None else {n.name: n for n in kb.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _changes(tree: ast.Module) -> bool:
    methods = _kb_methods(tree)
    if methods is None or "read" not in methods:
        return True
    module_names = _module_names(tree)
    todo, seen = ["read"], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in methods:
            continue
        seen.add(name)
        changes, calls = _method_changes(methods[name], module_names)
        if changes:
            return True
        todo += calls
    return False


def _module_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else (
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
        for target in targets:
            names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _method_changes(fn: ast.FunctionDef | ast.AsyncFunctionDef, module_names: set[str]) -> tuple[bool, list[str]]:
    """(does this method change state itself, the names of the self-methods it calls)."""
    params = [*fn.args.posonlyargs, *fn.args.args]
    if not params:
        return True, []
    me = params[0].arg
    local = {a.arg for a in [*params, *fn.args.kwonlyargs, fn.args.vararg, fn.args.kwarg] if a is not None}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local.add(node.id)
    roots = {me} | (module_names - local)      # names whose objects are the program's state
    aliases = _aliases(fn, roots)
    state = roots | aliases
    calls: list[str] = []
    for node in ast.walk(fn):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            return True, []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            if any(not isinstance(t, ast.Name) and _root(t) in state for t in _flat(targets)):
                return True, []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr, owner = node.func.attr, node.func.value
            if isinstance(owner, ast.Name) and owner.id == me:
                calls.append(attr)                   # self.helper(...): looked at in its turn
            elif attr in MUTATORS and _root(owner) in state:
                return True, []
            elif attr in SQL_CALLS and not _reads_only(node, fn):
                return True, []
    return False, calls


def _aliases(fn: ast.AST, roots: set[str]) -> set[str]:
    """Local names bound to (a part of) the state: `x = self.a[k]`, `x = self.a.get(k)`,
    `for x in self.rows` / `.values()` / `.items()`. Bound in any order, so repeated to a fixpoint."""
    found: set[str] = set()
    while True:
        state, before = roots | found, len(found)
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and _refers(node.value, state):
                found |= {t.id for t in _flat(node.targets) if isinstance(t, ast.Name)}
            elif isinstance(node, (ast.For, ast.comprehension)) and _refers(node.iter, state):
                found |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
            elif isinstance(node, ast.withitem) and node.optional_vars is not None and _refers(node.context_expr, state):
                found |= {n.id for n in ast.walk(node.optional_vars) if isinstance(n, ast.Name)}
        if len(found) == before:
            return found


def _refers(value: ast.expr, state: set[str]) -> bool:
    """Does `value` evaluate to an object of the state (not a copy of it)?"""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _GETTERS:
        value = value.func.value
    if isinstance(value, (ast.Tuple, ast.List)):
        return any(_refers(v, state) for v in value.elts)
    return isinstance(value, (ast.Attribute, ast.Subscript, ast.Name)) and _root(value) in state


def _root(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _flat(targets: list[ast.expr]) -> list[ast.expr]:
    out: list[ast.expr] = []
    for t in targets:
        out += _flat(list(t.elts)) if isinstance(t, (ast.Tuple, ast.List)) else [t]
    return out


def _reads_only(call: ast.Call, fn: ast.AST) -> bool:
    """The SQL of an execute()/executemany() call, as written, only reads."""
    if not call.args:
        return False
    text = _sql_text(call.args[0], fn)
    if text is None:
        return False
    words = re.sub(r"--[^\n]*|/\*.*?\*/", " ", text, flags=re.S).split()
    first = words[0].upper() if words else ""
    return first in ("SELECT", "WITH", "EXPLAIN") and not _WRITE_WORDS.search(text)


def _sql_text(node: ast.expr, fn: ast.AST, depth: int = 0) -> str | None:
    """The literal text of SQL built from literals, f-strings and `+` (values stand in as "?"),
    following a local name assigned exactly once; None when it cannot be known."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else "?"
                       for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _sql_text(node.left, fn, depth)
        return None if left is None else left + (_sql_text(node.right, fn, depth) or "?")
    if isinstance(node, ast.Name) and depth < 3:
        bound = [n.value for n in ast.walk(fn) if isinstance(n, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == node.id for t in n.targets)]
        if len(bound) == 1:
            return _sql_text(bound[0], fn, depth + 1)
    return None

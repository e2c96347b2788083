"""L1 static gate: what a memory program may say, decided on its AST before any of it runs.

Checks (docs/sandbox.md, L1):
- the source itself: size cap, no NUL bytes;
- imports: `import M` with M exactly an allowed module (no dotted submodules),
  `from M import n` with n in that module's proxy allowlist, no relative imports
  -- anywhere in the tree, imports inside functions too; the one exception is an
  optional import of a pure-computation library (numpy, heapq, ...; OPTIONAL_IMPORTS)
  guarded by `try/except ImportError`: the import hook refuses it at run time and
  the program's fallback runs; `from __future__ import
  annotations` (and the Python 2 no-ops) is accepted and then removed from the tree
  by `strip_future_imports`, so annotations stay real objects for dataclasses;
  `M.attr` on an imported module must name an export too (`typing.sys` fails here);
- denied names (`eval`, `open`, `__import__`, ...) as names, definitions or import aliases;
- annotation shapes: names, non-underscore attributes, subscripts, tuples, None,
  `X | Y`; no calls; no strings in variable annotations (a string annotation is
  evaluated by `typing`/`dataclasses` outside the guards).

The interface shape (classes, methods, constants) is `sandbox.contract.check_interface`,
which the loader runs right after this gate. Every violation carries a line number.
"""
from __future__ import annotations

import ast
from typing import Iterable, Sequence

from sandbox.contract import Violation
from sandbox.worker.proxies import NEVER_ALLOWED, module_exports

DEFAULT_MAX_SOURCE_BYTES = 65_536

# `from __future__ import X` features a program may name. `annotations` is what real models
# write; the rest are no-ops on Python 3. All are removed before compiling (see
# strip_future_imports): PEP 563 would turn every annotation into a string, which dataclasses
# and typing then evaluate outside the guards.
ACCEPTED_FUTURE_FEATURES = frozenset({
    "annotations", "print_function", "division", "absolute_import", "unicode_literals",
    "generators", "nested_scopes", "with_statement", "generator_stop",
})

DENIED_NAMES = frozenset({
    "eval", "exec", "compile", "open", "globals", "locals", "vars", "breakpoint", "input",
    "help", "exit", "quit", "memoryview", "__import__",
})


def check_source(source: str, max_source_bytes: int = DEFAULT_MAX_SOURCE_BYTES) -> list[Violation]:
    """Checks on the raw text, before parsing (parsing huge or binary input is itself a risk)."""
    if not isinstance(source, str):
        return [Violation("not_text", f"program source must be str, got {type(source).__name__}",
                          None, "source")]
    out = []
    size = len(source.encode("utf-8", "surrogatepass"))
    if size > max_source_bytes:
        out.append(Violation("source_too_large", f"program source is {size} bytes; the limit is "
                             f"{max_source_bytes}", None, "source"))
    if "\x00" in source:
        line = source.count("\n", 0, source.index("\x00")) + 1
        out.append(Violation("nul_byte", "program source contains a NUL byte", line, "source"))
    return out


def parse_program(source: str, filename: str = "<program>") -> ast.Module:
    """ast.parse that turns parser blow-ups (deep nesting) into SyntaxError."""
    try:
        return ast.parse(source, filename=filename, mode="exec")
    except SyntaxError:
        raise
    except (RecursionError, MemoryError, ValueError) as exc:
        raise SyntaxError(f"the parser gave up ({type(exc).__name__}): the program is nested "
                          "too deeply or is not valid text") from None


def _exports_or_none(module: str) -> tuple[str, ...] | None:
    try:
        return module_exports(module)
    except Exception:  # a user-allowed module that is not installed, or one never allowed
        return None


def _unavailable(module: str, line: int) -> Violation:
    if module in NEVER_ALLOWED:
        return Violation("import_never_allowed", f"module {module} can never be used by memory "
                         "programs, even when configured as allowed", line, "imports")
    return Violation("import_unavailable", f"module {module} is allowed but not installed",
                     line, "imports")


_IMPORT_ERROR_NAMES = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type
    if kinds is None:  # bare except:
        return True
    names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
    return any(isinstance(n, ast.Name) and n.id in _IMPORT_ERROR_NAMES for n in names)


def _optional_imports(nodes: Sequence[ast.AST]) -> set[int]:
    """ids of import nodes run directly in a `try:` body whose handlers catch ImportError.

    Real programs write `try: import numpy as np / except ImportError: np = None`. The import
    hook refuses such a module at run time with ImportError (it serves proxies only), so the
    fallback branch runs; refusing the program statically would only be over-blocking. Imports
    inside functions defined in the try body are not guarded by it, so they are not included.
    """
    found: set[int] = set()

    def collect(node: ast.AST) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.add(id(node))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return
        for child in ast.iter_child_nodes(node):
            collect(child)

    for node in nodes:
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            for stmt in node.body:
                collect(stmt)
    return found


# Pure-computation libraries that real programs import inside `try/except ImportError` with a
# fallback. Only these may be named by a guarded import (the hook still refuses them at run
# time unless configured); anything else -- os, socket, urllib, requests -- stays a static
# refusal, guard or not.
OPTIONAL_IMPORTS = frozenset({
    "numpy", "scipy", "sklearn", "nltk", "rank_bm25", "rapidfuzz", "Levenshtein", "jellyfish",
    "heapq", "itertools", "bisect", "statistics", "difflib", "unicodedata", "random", "time",
    "_strptime",
})


def _optional_module(name: str, guarded: bool) -> bool:
    """May a guarded import name this module without a static refusal? See OPTIONAL_IMPORTS."""
    top = name.split(".")[0]
    return guarded and top in OPTIONAL_IMPORTS and top not in NEVER_ALLOWED


def _check_imports(nodes: Sequence[ast.AST], allowed: Sequence[str]) -> Iterable[Violation]:
    allowed_set = set(allowed)
    listed = ", ".join(allowed)
    optional = _optional_imports(nodes)
    for node in nodes:
        guarded = id(node) in optional
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name not in allowed_set and _optional_module(alias.name, guarded):
                    continue  # refused at run time with ImportError, which the program handles
                if alias.name not in allowed_set:
                    hint = (f"import the top-level module {alias.name.split('.')[0]!r} instead"
                            if "." in alias.name else f"allowed modules: {listed}")
                    yield Violation("import_not_allowed", f"import {alias.name} is not allowed; "
                                    f"{hint}", node.lineno, "imports")
                elif _exports_or_none(alias.name) is None:
                    yield _unavailable(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                yield Violation("relative_import", "relative imports are not allowed "
                                f"(from {'.' * node.level}{module} import ...)", node.lineno, "imports")
                continue
            if module == "__future__":
                for alias in node.names:
                    if alias.name not in ACCEPTED_FUTURE_FEATURES:
                        yield Violation("future_import", f"from __future__ import {alias.name} is "
                                        "not supported; only 'annotations' is accepted (and "
                                        "ignored)", node.lineno, "imports")
                continue
            if module not in allowed_set and _optional_module(module, guarded):
                continue
            if module not in allowed_set:
                yield Violation("import_not_allowed", f"from {module} import ... is not allowed; "
                                f"allowed modules: {listed}", node.lineno, "imports")
                continue
            exports = _exports_or_none(module)
            if exports is None:
                yield _unavailable(module, node.lineno)
                continue
            for alias in node.names:
                if alias.name == "*":
                    yield Violation("star_import", f"from {module} import * is not allowed; name "
                                    "what you use", node.lineno, "imports")
                elif alias.name not in exports:
                    yield Violation("import_name_not_allowed", f"from {module} import {alias.name}"
                                    f": {alias.name!r} is not available in the sandbox; {module} "
                                    f"offers: {', '.join(exports) or 'nothing'}",
                                    node.lineno, "imports")


def strip_future_imports(tree: ast.Module) -> set[str]:
    """Replace every `from __future__ import ...` by `pass`; return the features it named.

    Without the import, annotations are evaluated when the class is created, as dataclasses
    and our contract check need; `pass` keeps a body that held only the import valid.
    """
    features: set[str] = set()
    for node in ast.walk(tree):
        for name, value in ast.iter_fields(node):
            if not isinstance(value, list):
                continue
            for i, child in enumerate(value):
                if isinstance(child, ast.ImportFrom) and child.module == "__future__" \
                        and not child.level:
                    features.update(alias.name for alias in child.names)
                    value[i] = ast.copy_location(ast.Pass(), child)
    return features


def _check_module_attributes(nodes: Sequence[ast.AST], allowed: Sequence[str],
                             never_run: set[int]) -> Iterable[Violation]:
    """`typing.sys`, `json.codecs`: attributes of an imported module that its proxy lacks.

    Only names bound by an import and never rebound are followed, so a local variable that
    happens to be called `json` is not mistaken for the module.
    """
    modules: dict[str, str] = {}
    rebound: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in allowed and "." not in alias.name:
                    modules[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom):
            rebound.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            rebound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            rebound.add(node.name)
        elif isinstance(node, ast.arg):
            rebound.add(node.arg)
    followed = {name: mod for name, mod in modules.items() if name not in rebound}
    if not followed:
        return
    for node in nodes:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in followed and id(node) not in never_run:
            module = followed[node.value.id]
            exports = _exports_or_none(module)
            if exports is not None and node.attr not in exports:
                yield Violation("module_attribute_not_allowed", f"{node.value.id}.{node.attr}: "
                                f"{node.attr!r} is not available in the sandbox; {module} offers: "
                                f"{', '.join(exports) or 'nothing (use the toolkit)'}",
                                node.lineno, "imports")


def _never_evaluated_annotations(tree: ast.Module) -> Iterable[ast.AST]:
    """Nodes inside annotations that never run: signatures (the restricted compiler erases
    them), annotated assignments in function bodies, and `self.x: T = v` (becomes `self.x = v`).
    So `def __init__(self, db: sqlite3.Connection)` is no reason to reject a program."""
    roots: list[ast.AST] = []
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]   # (node, inside a function body)
    while stack:   # iterative: a recursive generator was a third of the static gate's time
        node, in_function = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            for arg in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                if arg is not None and arg.annotation is not None:
                    roots.append(arg.annotation)
            if getattr(node, "returns", None) is not None:
                roots.append(node.returns)
            in_function = True
        elif isinstance(node, ast.ClassDef):
            in_function = False
        elif isinstance(node, ast.AnnAssign) and (in_function or not isinstance(node.target, ast.Name)):
            roots.append(node.annotation)
        stack.extend((child, in_function) for child in ast.iter_child_nodes(node))
    for root in roots:
        yield from ast.walk(root)


def _check_denied_names(nodes: Sequence[ast.AST]) -> Iterable[Violation]:
    def denied(name: str | None, node: ast.AST, what: str) -> Violation | None:
        if name in DENIED_NAMES:
            return Violation("denied_name", f"{what} {name!r} is not allowed in memory programs",
                             getattr(node, "lineno", None), "names")
        return None

    for node in nodes:
        found = None
        if isinstance(node, ast.Name):
            found = denied(node.id, node, "name")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found = denied(node.name, node, "definition")
        elif isinstance(node, ast.alias) and node.asname:
            found = denied(node.asname, node, "import alias")
        elif isinstance(node, ast.arg):
            found = denied(node.arg, node, "parameter")
        if found:
            yield found


def annotation_problem(node: ast.AST, *, allow_strings: bool, in_literal: bool = False) -> str | None:
    """Why an annotation expression has a forbidden shape, or None if it is fine."""
    if isinstance(node, ast.Name):
        return None
    if isinstance(node, ast.Constant):
        if node.value is None or node.value is Ellipsis:
            return None
        if isinstance(node.value, str) and (allow_strings or in_literal):
            return None
        if isinstance(node.value, str):
            return (f"string annotation {node.value!r}: write the type itself, unquoted "
                    "(string annotations are evaluated outside the sandbox guards)")
        if in_literal and isinstance(node.value, (int, bool)):
            return None
        return f"constant {node.value!r} is not a type"
    if isinstance(node, ast.Attribute):
        if node.attr.startswith("_"):
            return f"attribute {node.attr!r} starts with '_'"
        return annotation_problem(node.value, allow_strings=allow_strings)
    if isinstance(node, ast.Subscript):
        head = node.value
        # Literal["a", 1] and Annotated[T, "metadata"] hold values, not types; typing never
        # evaluates them (only a bare string annotation goes through eval-like paths).
        literal = isinstance(head, (ast.Name, ast.Attribute)) and \
            (head.id if isinstance(head, ast.Name) else head.attr) in ("Literal", "Annotated")
        return (annotation_problem(head, allow_strings=allow_strings)
                or annotation_problem(node.slice, allow_strings=allow_strings, in_literal=literal))
    if isinstance(node, (ast.Tuple, ast.List)):
        for elt in node.elts:
            problem = annotation_problem(elt, allow_strings=allow_strings, in_literal=in_literal)
            if problem:
                return problem
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return (annotation_problem(node.left, allow_strings=allow_strings)
                or annotation_problem(node.right, allow_strings=allow_strings))
    if isinstance(node, ast.Call):
        return "calls are not allowed in annotations"
    return f"{type(node).__name__} expressions are not allowed in annotations"


def _check_annotations(nodes: Sequence[ast.AST], never_run: set[int]) -> Iterable[Violation]:
    for node in nodes:
        if isinstance(node, ast.AnnAssign):
            # Variable annotations run at class/module level and reach dataclasses; those in
            # function bodies and on `self.x: T = v` never run, so a quoted type is fine there.
            problem = annotation_problem(node.annotation, allow_strings=id(node.annotation) in never_run)
            if problem:
                yield Violation("annotation", f"annotation of {ast.unparse(node.target)}: "
                                f"{problem}", node.lineno, "annotations")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            # Signature annotations are erased by the restricted compiler, so quoted
            # forward references ("KnowledgeItem") are harmless there.
            args = node.args
            params = args.posonlyargs + args.args + args.kwonlyargs + \
                [a for a in (args.vararg, args.kwarg) if a is not None]
            shown = [(a.annotation, a.arg, a.lineno) for a in params if a.annotation is not None]
            if getattr(node, "returns", None) is not None:
                shown.append((node.returns, "return", node.lineno))
            for ann, what, line in shown:
                problem = annotation_problem(ann, allow_strings=True)
                if problem:
                    yield Violation("annotation", f"annotation of {what}: {problem}", line,
                                    "annotations")


def check_tree(tree: ast.Module, allowed_imports: Sequence[str]) -> list[Violation]:
    """Every static-gate violation in the parsed program, in source order."""
    # One walk and one annotation pass, shared by the checks: each used to walk the tree itself
    # (seven passes, half of a worker's load time for a 7 kB program).
    nodes = list(ast.walk(tree))
    never_run = {id(n) for n in _never_evaluated_annotations(tree)}
    found = [*_check_imports(nodes, allowed_imports),
             *_check_module_attributes(nodes, allowed_imports, never_run),
             *_check_denied_names(nodes), *_check_annotations(nodes, never_run)]
    return sorted(found, key=lambda v: (v.line or 0))

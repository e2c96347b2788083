"""L1 static gate: what a memory program may say, decided on its AST before any of it runs.

Checks (sandbox spec L1):
- the source itself: size cap, no NUL bytes;
- imports: `import M` with M exactly an allowed module (no dotted submodules),
  `from M import n` with n in that module's proxy allowlist, no relative or
  `__future__` imports -- anywhere in the tree, imports inside functions too;
  `M.attr` on an imported module must name an export too (`typing.sys` fails here);
- denied names (`eval`, `open`, `__import__`, ...) as names, definitions or import aliases;
- annotation shapes: names, non-underscore attributes, subscripts, tuples, None,
  `X | Y`; no calls; no strings in variable annotations (a string annotation is
  evaluated by `typing`/`dataclasses` outside the guards).

The interface shape (classes, methods, constants) is `mstar.contract.check_interface`,
which the loader runs right after this gate. Every violation carries a line number.
"""
from __future__ import annotations

import ast
from typing import Iterable, Sequence

from mstar.contract import Violation
from sandbox.proxies import NEVER_ALLOWED, module_exports

DEFAULT_MAX_SOURCE_BYTES = 65_536

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


def _check_imports(tree: ast.Module, allowed: Sequence[str]) -> Iterable[Violation]:
    allowed_set = set(allowed)
    listed = ", ".join(allowed)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
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
                yield Violation("future_import", "from __future__ imports are not allowed; remove "
                                "the line (annotations must be real types, not strings)",
                                node.lineno, "imports")
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


def _check_module_attributes(tree: ast.Module, allowed: Sequence[str]) -> Iterable[Violation]:
    """`typing.sys`, `json.codecs`: attributes of an imported module that its proxy lacks.

    Only names bound by an import and never rebound are followed, so a local variable that
    happens to be called `json` is not mistaken for the module.
    """
    modules: dict[str, str] = {}
    rebound: set[str] = set()
    for node in ast.walk(tree):
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
    skipped = {id(n) for n in _never_evaluated_annotations(tree)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in followed and id(node) not in skipped:
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
    def annotations(node: ast.AST, in_function: bool) -> Iterable[ast.AST]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            for arg in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                if arg is not None and arg.annotation is not None:
                    yield arg.annotation
            if getattr(node, "returns", None) is not None:
                yield node.returns
            in_function = True
        elif isinstance(node, ast.ClassDef):
            in_function = False
        elif isinstance(node, ast.AnnAssign) and (in_function or not isinstance(node.target, ast.Name)):
            yield node.annotation
        for child in ast.iter_child_nodes(node):
            yield from annotations(child, in_function)

    for root in annotations(tree, False):
        yield from ast.walk(root)


def _check_denied_names(tree: ast.Module) -> Iterable[Violation]:
    def denied(name: str | None, node: ast.AST, what: str) -> Violation | None:
        if name in DENIED_NAMES:
            return Violation("denied_name", f"{what} {name!r} is not allowed in memory programs",
                             getattr(node, "lineno", None), "names")
        return None

    for node in ast.walk(tree):
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
        literal = isinstance(head, (ast.Name, ast.Attribute)) and \
            (head.id if isinstance(head, ast.Name) else head.attr) == "Literal"
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


def _check_annotations(tree: ast.Module) -> Iterable[Violation]:
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign):
            # Variable annotations run at class/module level and reach dataclasses.
            problem = annotation_problem(node.annotation, allow_strings=False)
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
    found = [*_check_imports(tree, allowed_imports),
             *_check_module_attributes(tree, allowed_imports),
             *_check_denied_names(tree), *_check_annotations(tree)]
    return sorted(found, key=lambda v: (v.line or 0))

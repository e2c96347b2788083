"""The memory-program contract (paper Appendix G.2, "Interface specification").

A memory program is a module with two dataclasses (`KnowledgeItem`, `Query`),
a `KnowledgeBase(toolkit)` class with `write(item, raw_text)` / `read(query)`,
and four string constants. This module says what that means, in two places:

- `check_interface(tree)` looks at the *source* (an `ast.Module`) before any
  program code runs, so every violation carries a line number;
- `describe_dataclass(cls)` looks at a *loaded* dataclass and turns its fields
  into `FieldSpec` records -- the schema the task agent fills as JSON.

Pure: no sandbox, no I/O. Every violation names the part that is missing or
wrong, because the reflector reads the message to fix the program.
"""
from __future__ import annotations

import ast
import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from sandbox.contract import field_types
from sandbox.protocol import json_depth

KNOWLEDGE_ITEM = "KnowledgeItem"
QUERY = "Query"
KNOWLEDGE_BASE = "KnowledgeBase"
CLASS_NAMES = (KNOWLEDGE_ITEM, QUERY, KNOWLEDGE_BASE)
DATACLASS_NAMES = (KNOWLEDGE_ITEM, QUERY)

CONSTANT_NAMES = (
    "INSTRUCTION_KNOWLEDGE_ITEM",
    "INSTRUCTION_QUERY",
    "INSTRUCTION_RESPONSE",
    "ALWAYS_ON_KNOWLEDGE",
)

# KnowledgeBase methods and the positional parameters the engine passes.
METHOD_PARAMS: dict[str, tuple[str, ...]] = {
    "__init__": ("self", "toolkit"),
    "write": ("self", "item", "raw_text"),
    "read": ("self", "query"),
}

# Field types: the grammar in sandbox.contract.field_types (scalars, Any, list/dict of them, Optional).

# Size caps. The constants, descriptions and defaults go into every task-agent prompt (and the
# schema crosses the sandbox pipe), so an unbounded one would bypass the read() output cap and
# multiply the engine's LLM cost; real programs stay far below these.
MAX_CONSTANT_CHARS = 10_000
MAX_DESCRIPTION_CHARS = 2_000
MAX_DEFAULT_JSON_CHARS = 2_000
# Lists and dicts nested in a default. The engine copies every default into each item it builds,
# its records and its reports, recursively; 2,000 characters of `[[[...]]]` nest 940 deep and
# overflowed those copies (issue 30). The field-type grammar nests containers at most twice, so
# a real default never comes near this.
MAX_DEFAULT_DEPTH = 8
MAX_FIELDS = 40
_TYPES_HINT = field_types.HINT

DEFAULT_ALLOWED_IMPORTS = (
    "json", "re", "math", "hashlib", "collections", "dataclasses", "typing",
    "datetime", "textwrap", "sqlite3", "chromadb",
)


@dataclass(frozen=True)
class Violation:
    """One way a program breaks the contract or a gate rule."""

    rule: str
    message: str
    line: int | None = None
    gate: str = "interface"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class FieldSpec:
    """One dataclass field as the task agent sees it (crosses the sandbox pipe as JSON)."""

    name: str
    type: str
    description: str
    default: Any = None
    required: bool = False

    def to_dict(self) -> dict:
        return {"name": self.name, "type": self.type, "description": self.description,
                "default": self.default, "required": self.required}

    @classmethod
    def from_dict(cls, data: dict) -> "FieldSpec":
        if not isinstance(data, dict):
            raise ValueError(f"field spec must be a dict, got {type(data).__name__}")
        missing = [k for k in ("name", "type", "description") if k not in data]
        if missing:
            raise ValueError(f"field spec {data!r} lacks {', '.join(missing)}")
        try:
            canonical = field_types.parse(data["type"]).name
        except ValueError as exc:
            raise ValueError(f"field {data['name']!r}: {exc}") from None
        return cls(name=str(data["name"]), type=canonical,
                   description=str(data["description"]),
                   default=data.get("default"), required=bool(data.get("required", False)))


def render_schema_for_prompt(specs: list[FieldSpec] | list[dict]) -> str:
    """The `<schema>` section of the extraction / query prompts: a JSON list of field dicts."""
    rows = [s.to_dict() if isinstance(s, FieldSpec) else FieldSpec.from_dict(s).to_dict()
            for s in specs]
    return json.dumps(rows, indent=2, ensure_ascii=False)


# ----------------------------------------------------------------------------------------
# Field types, named the same way from the AST (static check) and from live types (runtime).

def annotation_type_name(node: ast.AST) -> str | None:
    """The canonical field type name of an annotation AST, or None if it is not a field type."""
    ft = field_types.from_annotation(node)
    return ft.name if ft is not None else None


def runtime_type_name(tp: Any) -> str | None:
    """The canonical field type name of a live annotation, or None.

    Uses typing.get_origin/get_args only: they read attributes, they never
    evaluate strings (unlike get_type_hints, which must not touch program objects).
    """
    ft = field_types.from_runtime(tp)
    return ft.name if ft is not None else None


def _annotation_text(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # unparse of odd trees: name the node kind instead
        return type(node).__name__


# ----------------------------------------------------------------------------------------
# Static interface check.

def _dataclass_aliases(tree: ast.Module) -> tuple[set[str], set[str]]:
    """Names bound to `dataclasses.dataclass` / to the `dataclasses` module by imports."""
    deco_names, module_names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "dataclasses":
            for alias in node.names:
                if alias.name == "dataclass":
                    deco_names.add(alias.asname or "dataclass")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "dataclasses":
                    module_names.add(alias.asname or "dataclasses")
    return deco_names, module_names


def _is_dataclass_decorator(node: ast.AST, deco_names: set[str], module_names: set[str]) -> bool:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id in deco_names
    if isinstance(node, ast.Attribute) and node.attr == "dataclass":
        return isinstance(node.value, ast.Name) and node.value.id in module_names
    return False


def _field_call_metadata(value: ast.AST) -> tuple[bool, ast.AST | None, bool]:
    """For `x: T = <value>`: (is a field(...) call, its metadata node, init=False)."""
    if not isinstance(value, ast.Call):
        return False, None, False
    name = field_types.dotted_name(value.func)
    if name not in ("field", "dataclasses.field"):
        return False, None, False
    metadata, init_false = None, False
    for kw in value.keywords:
        if kw.arg == "metadata":
            metadata = kw.value
        if kw.arg == "init" and isinstance(kw.value, ast.Constant) and kw.value.value is False:
            init_false = True
    return True, metadata, init_false


def _check_dataclass_fields(cls: ast.ClassDef) -> list[Violation]:
    out: list[Violation] = []
    for stmt in cls.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        name = f"{cls.name}.{stmt.target.id}"
        _, _, init_false = (_field_call_metadata(stmt.value)
                            if stmt.value is not None else (False, None, False))
        if init_false:
            continue  # not filled by the task agent, so neither typed nor described for it
        if stmt.target.id.startswith("_"):
            out.append(Violation("field_name", f"{name}: field names must not start with '_' "
                                 "(the task agent fills every field by name)", stmt.lineno))
        if annotation_type_name(stmt.annotation) is None:
            out.append(Violation(
                "field_type", f"{name}: type {_annotation_text(stmt.annotation)} is not "
                f"JSON-compatible; {_TYPES_HINT}", stmt.lineno))
        # A field without metadata={"description": ...} is accepted, as the paper's engine does
        # (the description is shown to the task model when present); the engine warns about it
        # (sandbox.engine.received), so the reflector still hears that one is missing.
    return out


def _check_method(cls: ast.ClassDef, method: str, params: tuple[str, ...]) -> list[Violation]:
    defs = [s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == method]
    where = f"{cls.name}.{method}"
    wanted = f"def {method}({', '.join(params)})"
    if not defs:
        if cls.bases:  # may be inherited; the runtime check decides
            return []
        return [Violation("missing_method", f"{where} is missing; expected {wanted}", cls.lineno)]
    fn = defs[-1]
    return [Violation("wrong_arity", f"{where}: {msg}; expected {wanted}", fn.lineno)
            for msg in _arity_problems(fn.args, len(params))]


def _arity_problems(args: ast.arguments, n: int) -> list[str]:
    positional = list(args.posonlyargs) + list(args.args)
    required = len(positional) - len(args.defaults)
    required_kwonly = [a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is None]
    problems = []
    if required > n:
        problems.append(f"takes {required} required positional parameters, the engine passes {n}")
    if len(positional) < n and args.vararg is None:
        problems.append(f"takes {len(positional)} positional parameters, the engine passes {n}")
    if required_kwonly:
        problems.append(f"requires keyword-only parameters {', '.join(required_kwonly)}")
    return problems


def check_interface(tree: ast.Module) -> list[Violation]:
    """Check the contract on the parsed source. Only module-level statements count."""
    out: list[Violation] = []
    classes: dict[str, ast.ClassDef] = {}
    constants: dict[str, ast.AST] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            classes[stmt.name] = stmt  # a later definition wins, as in Python
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Name):
                    constants[target.id] = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
            constants[stmt.target.id] = stmt.value

    for name in CLASS_NAMES:
        if name not in classes:
            kind = "@dataclass class" if name in DATACLASS_NAMES else "class"
            out.append(Violation("missing_class", f"{kind} {name} is missing at module level"))

    deco_names, module_names = _dataclass_aliases(tree)
    for name in DATACLASS_NAMES:
        cls = classes.get(name)
        if cls is None:
            continue
        if not any(_is_dataclass_decorator(d, deco_names, module_names) for d in cls.decorator_list):
            out.append(Violation("not_dataclass", f"{name} must be decorated with @dataclass "
                                 "(from dataclasses import dataclass, field)", cls.lineno))
        out.extend(_check_dataclass_fields(cls))

    kb = classes.get(KNOWLEDGE_BASE)
    if kb is not None:
        for method, params in METHOD_PARAMS.items():
            out.extend(_check_method(kb, method, params))

    for name in CONSTANT_NAMES:
        if name not in constants:
            out.append(Violation("missing_constant",
                                 f"module-level string constant {name} is missing"))
            continue
        value = constants[name]
        if isinstance(value, ast.Constant) and not isinstance(value.value, str):
            out.append(Violation("constant_not_str", f"{name} must be a str, got "
                                 f"{type(value.value).__name__}", value.lineno))
        elif isinstance(value, (ast.List, ast.Dict, ast.Set, ast.Tuple, ast.ListComp,
                                ast.DictComp, ast.SetComp, ast.Lambda)):
            out.append(Violation("constant_not_str", f"{name} must be a str, got a "
                                 f"{type(value).__name__.lower()} expression", value.lineno))
    return out


# ----------------------------------------------------------------------------------------
# Runtime: live dataclasses -> FieldSpecs.

# Factories whose result is a plain JSON value and that run no program code.
_SAFE_FACTORIES = (list, dict, str, int, float, bool, tuple)


def _json_default(value: Any) -> tuple[Any, int]:
    """(a plain JSON copy of value, or None if it is not JSON; size of its JSON text).

    The copy is decoded from the very text that was measured: a program's dict subclass may
    serialise small once and large the next time (its `items` is program code), so the object
    itself must never be sent on after measuring it (issue 16; the engine re-measures too)."""
    try:
        text = json.dumps(value)
        return json.loads(text), len(text)
    except (TypeError, ValueError, RecursionError):
        return None, 0


class ContractError(ValueError):
    """A loaded class breaks the contract; `.violations` says how."""

    def __init__(self, violations: list[Violation]):
        self.violations = list(violations)
        super().__init__("; ".join(v.message for v in self.violations))


def describe_dataclass(cls: type) -> list[FieldSpec]:
    """Fields of a loaded dataclass as FieldSpecs; raises ContractError on any violation."""
    specs, violations = inspect_dataclass(cls)
    if violations:
        raise ContractError(violations)
    return specs


def inspect_dataclass(cls: type) -> tuple[list[FieldSpec], list[Violation]]:
    """Fields of a loaded dataclass as FieldSpecs, plus every contract violation found.

    Fields with init=False are left out: the task agent cannot fill them.
    """
    name = getattr(cls, "__name__", "?")
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        return [], [Violation("not_dataclass", f"{name} must be decorated with @dataclass")]
    specs: list[FieldSpec] = []
    violations: list[Violation] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        where = f"{name}.{f.name}"
        type_name = runtime_type_name(f.type)
        if type_name is None:
            shown = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", None) or repr(f.type)
            violations.append(Violation("field_type", f"{where}: type {shown} is not "
                                        f"JSON-compatible; {_TYPES_HINT}"))
        description = f.metadata.get("description") if f.metadata else None
        if description is None:
            description = ""  # optional, as in the paper's engine; the engine warns about it
        elif isinstance(description, str):
            description = str.__str__(description)  # the characters, not a subclass's methods
        else:
            violations.append(Violation(
                "description_not_str", f'{where}: the description is a {type(description).__name__}; '
                'write field(default=..., metadata={"description": "..."}) with a str'))
            description = ""
        if f.name.startswith("_"):
            violations.append(Violation("field_name", f"{where}: field names must not start "
                                        "with '_' (the task agent fills every field by name)"))
        if len(description) > MAX_DESCRIPTION_CHARS:
            violations.append(Violation("description_too_long", f"{where}: the description has "
                                        f"{len(description)} characters; the limit is "
                                        f"{MAX_DESCRIPTION_CHARS}"))
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        default, size = None, 0
        if f.default is not dataclasses.MISSING:
            default, size = _json_default(f.default)
        elif f.default_factory in _SAFE_FACTORIES:
            default, size = _json_default(f.default_factory())
        if size > MAX_DEFAULT_JSON_CHARS:
            violations.append(Violation("default_too_large", f"{where}: the default is {size} "
                                        f"characters as JSON; the limit is {MAX_DEFAULT_JSON_CHARS}"))
            default = None
        elif json_depth(default, MAX_DEFAULT_DEPTH) > MAX_DEFAULT_DEPTH:
            violations.append(Violation("default_too_deep", f"{where}: the default nests lists or dicts more "
                                        f"than {MAX_DEFAULT_DEPTH} deep"))
            default = None
        specs.append(FieldSpec(name=f.name, type=type_name or "str", description=description,
                               default=default, required=required))
    if len(specs) > MAX_FIELDS:
        violations.append(Violation("too_many_fields", f"{name} has {len(specs)} fields; the "
                                    f"limit is {MAX_FIELDS}"))
    if not specs:
        violations.append(Violation("no_fields", f"{name} has no fields the task agent can fill; "
                                    'add e.g. text: str = field(default="", metadata='
                                    '{"description": "..."})'))
    return specs, violations

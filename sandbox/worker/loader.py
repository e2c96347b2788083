"""Program source -> checked, loaded classes (runs inside the worker process).

    load_program = source checks -> parse -> static gate + interface check
                   -> drop `from __future__` imports -> restricted compile
                   -> exec in a fresh guarded namespace
                   -> runtime contract check (classes, methods, constants, schemas, sizes)

Every refusal is a `ProgramRejected` carrying stage ("static" | "compile" |
"import"), gate, rule, message and line, so the reflector and the user read the
same reason. `build_instance` turns the task agent's JSON into a dataclass
instance with light, predictable coercion.
"""
import ast
import inspect
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from sandbox import contract
from sandbox.contract import field_types
from sandbox.contract import FieldSpec, Violation
from sandbox.worker import static_gate
from sandbox.worker.runtime import build_namespace
from sandbox.worker.restricted import FILENAME, PolicyError, compile_program


class ProgramRejected(Exception):
    """A program failed to load. `violations` lists every problem found at that stage."""

    def __init__(self, stage: str, gate: str, rule: str, message: str, line: int | None = None,
                 violations: Sequence[Violation] = ()):
        self.stage, self.gate, self.rule, self.message, self.line = stage, gate, rule, message, line
        self.violations = list(violations)
        where = f" (line {line})" if line else ""
        super().__init__(f"{stage}/{gate}/{rule}{where}: {message}")

    @classmethod
    def from_violations(cls, stage: str, violations: Sequence[Violation]) -> "ProgramRejected":
        first = violations[0]
        lines = [f"line {v.line}: {v.message}" if v.line else v.message for v in violations]
        return cls(stage, first.gate, first.rule, "\n".join(lines), first.line, violations)

    def to_dict(self) -> dict:
        return {"stage": self.stage, "gate": self.gate, "rule": self.rule,
                "message": self.message, "line": self.line}


@dataclass
class LoadedProgram:
    knowledge_item_cls: type
    query_cls: type
    kb_cls: type
    constants: dict[str, str]
    knowledge_item_schema: list[dict]
    query_schema: list[dict]
    module_name: str = ""
    namespace: dict = field(default_factory=dict, repr=False)


def _program_line(tb: types.TracebackType | None) -> int | None:
    """The innermost traceback line that lies in the program's own source."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _static_checks(source: str, allowed_imports: Sequence[str], max_source_bytes: int):
    found = static_gate.check_source(source, max_source_bytes)
    if found:
        raise ProgramRejected.from_violations("static", found)
    try:
        tree = static_gate.parse_program(source, FILENAME)
    except SyntaxError as exc:
        raise ProgramRejected("compile", "syntax", "syntax_error",
                              f"{exc.msg}" + (f": {exc.text.strip()}" if exc.text else ""),
                              exc.lineno) from None
    try:
        found = static_gate.check_tree(tree, allowed_imports) + contract.check_interface(tree)
    except RecursionError:
        found = [Violation("too_deep", "the program is nested too deeply to check", None, "source")]
    if found:
        raise ProgramRejected.from_violations("static", found)
    return tree


def _compile(tree):
    try:
        return compile_program(tree, FILENAME)
    except PolicyError as exc:
        violations = [Violation("restricted_syntax", msg, line, "restricted")
                      for line, msg in exc.problems]
        raise ProgramRejected.from_violations("static", violations) from None
    except SyntaxError as exc:
        raise ProgramRejected("compile", "syntax", "syntax_error", str(exc.msg), exc.lineno) from None
    except (ValueError, TypeError, RecursionError, MemoryError) as exc:
        raise ProgramRejected("compile", "syntax", "compile_error",
                              f"{type(exc).__name__}: {exc}") from None


def _signature_problem(fn: Any, n_args: int) -> str | None:
    try:
        inspect.signature(fn).bind(*([None] * n_args))
    except TypeError as exc:
        return str(exc)
    except ValueError:
        return "has no inspectable signature"
    return None


def _runtime_contract(ns, globals_: dict) -> tuple[dict[str, str], list[list[FieldSpec]]]:
    violations: list[Violation] = []
    classes = {}
    for name in contract.CLASS_NAMES:
        obj = globals_.get(name)
        if not (isinstance(obj, type) and ns.is_program_class(obj)):
            violations.append(Violation("missing_class", f"after import, {name} is not a class "
                                        "defined by the program"))
        classes[name] = obj
    kb = classes[contract.KNOWLEDGE_BASE]
    if isinstance(kb, type):
        for method, params in contract.METHOD_PARAMS.items():
            fn = getattr(kb, method, None)
            wanted = f"def {method}({', '.join(params)})"
            if not callable(fn):
                violations.append(Violation("missing_method", f"{contract.KNOWLEDGE_BASE}."
                                            f"{method} is missing; expected {wanted}"))
                continue
            problem = _signature_problem(fn, len(params))
            if problem:
                violations.append(Violation("wrong_arity", f"{contract.KNOWLEDGE_BASE}.{method}: "
                                            f"{problem}; expected {wanted}"))
    constants = {}
    for name in contract.CONSTANT_NAMES:
        value = globals_.get(name)
        if not isinstance(value, str):
            violations.append(Violation("constant_not_str", f"{name} must be a str after import, "
                                        f"got {type(value).__name__}"))
        elif len(str.__str__(value)) > contract.MAX_CONSTANT_CHARS:
            violations.append(Violation("constant_too_long", f"{name} has {len(str.__str__(value))} "
                                        f"characters; the limit is {contract.MAX_CONSTANT_CHARS} "
                                        "(it goes into every prompt)"))
        else:
            constants[name] = str.__str__(value)  # a str subclass's __str__ is program code
    schemas = []
    for name in contract.DATACLASS_NAMES:
        specs, found = (contract.inspect_dataclass(classes[name])
                        if isinstance(classes[name], type) else ([], []))
        schemas.append(specs)
        violations.extend(found)
    if violations:
        raise ProgramRejected.from_violations("import", violations)
    return constants, schemas


def load_program(source: str, allowed_imports: Sequence[str], *, log: Callable[[str], None],
                 max_source_bytes: int = static_gate.DEFAULT_MAX_SOURCE_BYTES) -> LoadedProgram:
    """Check, compile and execute a memory program; return its classes and schemas.

    Raises ProgramRejected. Program code runs here (module level, class bodies,
    decorators), so call this only inside the sandbox worker.
    """
    allowed_imports = tuple(allowed_imports)
    tree = _static_checks(source, allowed_imports, max_source_bytes)
    # No `__future__` in the text, no such import in the tree: the walk is skipped.
    future = static_gate.strip_future_imports(tree) if "__future__" in source else set()
    code = _compile(tree)
    ns = build_namespace(allowed_imports, log)
    try:
        exec(code, ns.globals)
    except BaseException as exc:  # SystemExit/KeyboardInterrupt from a program are failures too
        hint = ""
        if isinstance(exc, NameError) and "annotations" in future:
            hint = ("; note: `from __future__ import annotations` is ignored in the sandbox, so "
                    "annotations are evaluated when the class is created -- define a class "
                    "before annotating with it, or use a plainer type")
        raise ProgramRejected("import", "import", type(exc).__name__,
                              f"{type(exc).__name__} while executing the module: {exc}{hint}",
                              _program_line(exc.__traceback__)) from None
    constants, (item_specs, query_specs) = _runtime_contract(ns, ns.globals)
    return LoadedProgram(
        knowledge_item_cls=ns.globals[contract.KNOWLEDGE_ITEM],
        query_cls=ns.globals[contract.QUERY],
        kb_cls=ns.globals[contract.KNOWLEDGE_BASE],
        constants=constants,
        knowledge_item_schema=[s.to_dict() for s in item_specs],
        query_schema=[s.to_dict() for s in query_specs],
        module_name=ns.module_name,
        namespace=ns.globals,
    )


def load_reader(source: str, loaded: LoadedProgram, allowed_imports: Sequence[str], *, line_shift: int = 0,
                max_source_bytes: int = static_gate.DEFAULT_MAX_SOURCE_BYTES) -> Callable[[Any, Any], Any]:
    """Another program's KnowledgeBase.read, to run on this worker's knowledge base in place of its
    own: checked and compiled as `load_program` does, but nothing of it executed -- the function is
    made from its compiled code with the loaded program's module as its globals. The engine asks
    for it only for a program whose every other line is the loaded one's
    (mstar/evaluation/knowledge_identity.py, writer_identity), so those globals are its own.
    `line_shift` is added to read()'s lines: the engine maps the loaded program's lines to this text."""
    tree = _static_checks(source, tuple(allowed_imports), max_source_bytes)
    body = [s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == contract.KNOWLEDGE_BASE]
    if line_shift and body and body[-1].body and body[-1].body[-1].lineno + line_shift >= 1:
        ast.increment_lineno(body[-1].body[-1], line_shift)
    if "__future__" in source:
        static_gate.strip_future_imports(tree)
    code = _compile(tree)
    classes = _codes(code, contract.KNOWLEDGE_BASE)
    found = _codes(classes[0], "read") if len(classes) == 1 else []
    if len(found) != 1 or found[0].co_freevars:   # read() needing a cell (super(), __class__) is the class's
        raise ProgramRejected("import", "contract", "no reader",
                              "KnowledgeBase.read cannot be run on another program's knowledge base")
    return types.FunctionType(found[0], loaded.namespace, "read")


def _codes(code: types.CodeType, name: str) -> list[types.CodeType]:
    return [c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == name]


# ----------------------------------------------------------------------------------------
# JSON -> dataclass instance.

_OMIT = object()  # leave the field to its dataclass default


def coerce_value(value: Any, type_name: str) -> Any:
    """Coerce one JSON value to a field type (sandbox.contract.field_types); `_OMIT` when it cannot be done
    sensibly, so the field keeps its dataclass default."""
    try:
        converted, _ = field_types.coerce(value, field_types.parse(type_name))
    except ValueError:
        return _OMIT
    return converted


def build_instance(cls: type, data: dict, schema: list[dict]) -> object:
    """dict -> dataclass instance: coerce types, drop unknown keys, missing -> defaults.

    A required field that is missing or cannot be coerced gets its type's zero
    value ("" / 0 / 0.0 / False / [] / {} / None), so a sloppy extraction still yields an item.
    """
    if not isinstance(data, dict):
        raise TypeError(f"{getattr(cls, '__name__', 'item')} data must be a JSON object (dict), "
                        f"got {type(data).__name__}")
    kwargs = {}
    for raw in schema:
        spec = raw if isinstance(raw, FieldSpec) else FieldSpec.from_dict(raw)
        value = coerce_value(data[spec.name], spec.type) if spec.name in data else _OMIT
        if value is _OMIT and spec.required:
            value = field_types.parse(spec.type).zero()
        if value is not _OMIT:
            kwargs[spec.name] = value
    return cls(**kwargs)

"""Field types of KnowledgeItem and Query: one small grammar of JSON-compatible types.

The task agent fills each field from JSON, so a field type must be something JSON can carry.
Programs written by models use more than plain strings -- `Optional[bool]` flags, `list[int]`
ids, `Dict[str, Any]` metadata -- so the grammar is closed under the obvious containers:

    scalar := str | int | float | bool
    value  := scalar | Any | list[value] | dict[str, value]      (containers nest at most twice)
    type   := value | Optional[value]

A type's *name* is its canonical spelling (what schemas, prompts and run files show):
`Optional[list[str]]`, `dict[str, Any]`. `List`/`Dict`/`typing.` spellings, `X | None`,
`Union[X, None]` and bare `list`/`dict` (= `list[Any]`/`dict[str, Any]`) all map to it.

`coerce` turns a JSON value into a type, leniently (a model writes "3" for 3 and "yes" for true)
and says what it guessed; it is the one conversion the engine's agent and the sandbox's instance
builder share. Nothing here evaluates a string: annotations are read from the AST, or from live
typing objects through get_origin/get_args.
"""
from __future__ import annotations

import ast
import functools
import json
import math
import re
import types
import typing
from dataclasses import dataclass
from typing import Any

from sandbox.contract.ast_lock import AST_LOCK

SCALARS = ("str", "int", "float", "bool")
MAX_DEPTH = 2  # container nesting: list[dict[str, int]] is fine, list[list[list[str]]] is not
HINT = ("use str, int, float, bool, Any, list[...], dict[str, ...] or Optional[...] of those "
        f"(containers nested at most {MAX_DEPTH} deep)")
_NUMBER_RE = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_TRUE, _FALSE = {"true", "yes", "y", "1", "on"}, {"false", "no", "n", "0", "off", ""}


@dataclass(frozen=True)
class FieldType:
    kind: str                        # "str" "int" "float" "bool" "any" "list" "dict"
    item: "FieldType | None" = None  # element type of a list, value type of a dict
    optional: bool = False

    @property
    def name(self) -> str:
        if self.kind == "list":
            inner = f"list[{self.item.name}]"
        elif self.kind == "dict":
            inner = f"dict[str, {self.item.name}]"
        else:
            inner = "Any" if self.kind == "any" else self.kind
        return f"Optional[{inner}]" if self.optional else inner

    def zero(self) -> Any:
        """What a required field gets when the agent gave nothing usable (a fresh object)."""
        if self.optional or self.kind == "any":
            return None
        return {"str": "", "int": 0, "float": 0.0, "bool": False, "list": [], "dict": {}}[self.kind]


ANY = FieldType("any")


def _depth(ft: FieldType) -> int:
    return 0 if ft.item is None else 1 + _depth(ft.item)


def _checked(ft: FieldType | None) -> FieldType | None:
    return ft if ft is not None and _depth(ft) <= MAX_DEPTH else None


# ------------------------------------------------------------------------------ from text


def parse(name: str) -> FieldType:
    """Canonical (or any accepted) spelling -> FieldType; ValueError naming the problem."""
    return _parse(name if isinstance(name, str) else str(name))


@functools.lru_cache(maxsize=256)  # the agent and the instance builder ask for every field of every item
def _parse(name: str) -> FieldType:
    try:
        with AST_LOCK:   # the engine's threads and a worker's concurrent reads parse types
            tree = ast.parse(str(name).strip(), mode="eval").body
    except SyntaxError:
        tree = None
    ft = from_annotation(tree) if tree is not None else None
    if ft is None:
        raise ValueError(f"type {name!r} is not a field type; {HINT}")
    return ft


def is_valid(name: str) -> bool:
    try:
        parse(name)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------------------ from the AST


def dotted_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _bare(name: str | None) -> str | None:
    """`typing.List` -> `List`; other dotted names are not types we know."""
    if name and name.startswith("typing."):
        name = name[len("typing."):]
    return name if name and "." not in name else None


def _is_none(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and node.value is None) or dotted_name(node) == "None"


def from_annotation(node: ast.AST) -> FieldType | None:
    """An annotation's FieldType, or None if it is not one (strings and calls never are)."""
    return _checked(_value_or_optional(node))


def _value_or_optional(node: ast.AST) -> FieldType | None:
    members = _union_members(node)
    if members is not None:
        others = [m for m in members if not _is_none(m)]
        if len(others) != 1 or len(others) == len(members):
            return None
        inner = _value(others[0])
        return FieldType(inner.kind, inner.item, True) if inner is not None else None
    return _value(node)


def _union_members(node: ast.AST) -> list[ast.AST] | None:
    """The members of `X | None`, `Optional[X]`, `Union[X, None]`; None if not a union."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _union_members(node.left), _union_members(node.right)
        return (left or [node.left]) + (right or [node.right])
    if isinstance(node, ast.Subscript):
        head = _bare(dotted_name(node.value))
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Optional" and len(args) == 1:
            return [args[0], ast.Constant(None)]
        if head == "Union":
            return list(args)
    return None


def _value(node: ast.AST) -> FieldType | None:
    name = _bare(dotted_name(node))
    if name in SCALARS:
        return FieldType(name)
    if name == "Any":
        return ANY
    if name in ("list", "List"):
        return FieldType("list", ANY)
    if name in ("dict", "Dict"):
        return FieldType("dict", ANY)
    if isinstance(node, ast.Subscript):
        head = _bare(dotted_name(node.value))
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head in ("list", "List") and len(args) == 1:
            item = _value(args[0])
            return FieldType("list", item) if item is not None else None
        if head in ("dict", "Dict") and len(args) == 2 and _bare(dotted_name(args[0])) == "str":
            item = _value(args[1])
            return FieldType("dict", item) if item is not None else None
    return None


# ------------------------------------------------------------------------------ from live types


def from_runtime(tp: Any) -> FieldType | None:
    """A live annotation's FieldType, or None. Reads typing attributes only; never evaluates."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        others = [a for a in args if a is not type(None)]
        if len(others) != 1 or len(others) == len(args):
            return None
        inner = _runtime_value(others[0])
        return _checked(FieldType(inner.kind, inner.item, True)) if inner is not None else None
    return _checked(_runtime_value(tp))


def _runtime_value(tp: Any) -> FieldType | None:
    if tp in (str, int, float, bool):
        return FieldType(tp.__name__)
    if tp is Any:
        return ANY
    if tp in (list, typing.List):
        return FieldType("list", ANY)
    if tp in (dict, typing.Dict):
        return FieldType("dict", ANY)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list and len(args) == 1:
        item = _runtime_value(args[0])
        return FieldType("list", item) if item is not None else None
    if origin is dict and len(args) == 2 and args[0] is str:
        item = _runtime_value(args[1])
        return FieldType("dict", item) if item is not None else None
    return None


# ------------------------------------------------------------------------------ coercion


def coerce(value: Any, ft: FieldType) -> tuple[Any, str | None]:
    """(value as `ft`, note on what was guessed or None); ValueError when it cannot be done."""
    if value is None:
        if ft.optional or ft.kind == "any":
            return None, None
        raise ValueError("null is not allowed here")
    kind = ft.kind
    if kind == "any":
        return value, None
    if kind == "str":
        return _to_str(value)
    if kind in ("int", "float"):
        return _to_number(value, kind)
    if kind == "bool":
        return _to_bool(value)
    if kind == "list":
        return _to_list(value, ft.item)
    return _to_dict(value, ft.item)


def _to_str(value: Any) -> tuple[str, str | None]:
    if isinstance(value, str):
        return value, None
    if isinstance(value, bool):
        return ("true" if value else "false"), "bool turned into str"
    if isinstance(value, (int, float)):
        return str(value), "number turned into str"
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) or v is None for v in value):
        return ", ".join(str(v) for v in value if v is not None), "list joined into str"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False), f"{'object' if isinstance(value, dict) else 'list'} serialised into str"
    raise ValueError(f"cannot use {type(value).__name__} as str")


def _to_number(value: Any, kind: str) -> tuple[int | float, str | None]:
    note = None
    if isinstance(value, bool):
        value, note = int(value), "bool turned into a number"
    if isinstance(value, str):
        match = _NUMBER_RE.search(value.replace(",", ""))  # "1,234" is a thousands separator
        if not match:
            raise ValueError(f"cannot read {value!r} as {kind}")
        value, note = float(match.group(0)), f"str {value!r} read as {kind}"
    if not isinstance(value, (int, float)):
        raise ValueError(f"cannot use {type(value).__name__} as {kind}")
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a finite number")
    if kind == "float":
        return float(value), note
    if float(value).is_integer():
        return int(value), note or (None if isinstance(value, int) else "float turned into int")
    return round(value), note or "float rounded to int"


def _to_bool(value: Any) -> tuple[bool, str | None]:
    if isinstance(value, bool):
        return value, None
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value), "number turned into bool"
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE, f"str {value!r} read as bool"
    raise ValueError(f"cannot read {value!r} as bool")


def _to_list(value: Any, item: FieldType) -> tuple[list, str | None]:
    if isinstance(value, str) and item.kind == "str":
        return ([value] if value.strip() else []), "str wrapped into a list"
    if not isinstance(value, (list, tuple)):
        if isinstance(value, dict):
            raise ValueError(f"cannot use an object as list[{item.name}]")
        converted, _ = _to_list([value], item)
        return converted, f"{type(value).__name__} wrapped into a list"
    out, notes = [], set()
    for element in value:
        if element is None and not item.optional and item.kind != "any":
            notes.add("null items dropped")
            continue
        try:
            converted, note = coerce(element, item)
        except ValueError:
            notes.add(f"items that are not {item.name} dropped")
            continue
        out.append(converted)
        if note:
            notes.add(f"items converted ({note})")
    return out, "; ".join(sorted(notes)) or None


def _to_dict(value: Any, item: FieldType) -> tuple[dict, str | None]:
    note = None
    if isinstance(value, str):
        try:
            value, note = json.loads(value), "str parsed as a JSON object"
        except ValueError:
            value = None
    if not isinstance(value, dict):
        raise ValueError(f"cannot use {type(value).__name__} as dict[str, {item.name}]")
    out, notes = {}, {note} if note else set()
    for key, element in value.items():
        try:
            converted, element_note = coerce(element, item)
        except ValueError:
            notes.add(f"entries that are not {item.name} dropped")
            continue
        out[str(key)] = converted
        if element_note:
            notes.add(f"entries converted ({element_note})")
    return out, "; ".join(sorted(notes)) or None

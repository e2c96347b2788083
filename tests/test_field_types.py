"""Field types beyond plain text: the grammar, lenient coercion from model JSON, and the way a
typed value reaches a program in a real worker."""
from __future__ import annotations

import ast

import pytest

from sandbox.contract import field_types
from mstar.agent import fill_fields
from sandbox.contract.field_types import FieldType, coerce, parse
from sandbox.engine.session import ProgramSession, SandboxLimits


@pytest.mark.parametrize("spelling,canonical", [
    ("str", "str"), ("Optional[bool]", "Optional[bool]"), ("bool | None", "Optional[bool]"),
    ("typing.Optional[int]", "Optional[int]"), ("List[int]", "list[int]"), ("list", "list[Any]"),
    ("Dict[str, Any]", "dict[str, Any]"), ("dict", "dict[str, Any]"), ("Any", "Any"),
    ("List[Dict[str, str]]", "list[dict[str, str]]"), ("Optional[list[float]]", "Optional[list[float]]"),
    ("Union[None, dict[str, int]]", "Optional[dict[str, int]]"),
])
def test_spellings_map_to_one_canonical_name_which_parses_to_itself(spelling, canonical):
    ft = parse(spelling)
    assert ft.name == canonical and parse(canonical) == ft


@pytest.mark.parametrize("bad", ["set[str]", "tuple[str, int]", "dict[int, str]", "Union[str, int]",
                                 "list[list[list[str]]]", "Optional[None]", "bytes", "datetime",
                                 "'str'", "list[", "Callable[[str], str]", "Optional[Optional[str]]"])
def test_types_json_cannot_carry_are_refused_with_the_hint(bad):
    with pytest.raises(ValueError, match="is not a field type; use str, int, float, bool, Any"):
        parse(bad)


def test_zero_values_are_fresh_objects():
    a, b = parse("dict[str, int]").zero(), parse("dict[str, int]").zero()
    a["x"] = 1
    assert b == {} and parse("list[str]").zero() == [] and parse("Optional[list[str]]").zero() is None
    assert [parse(t).zero() for t in ("str", "int", "float", "bool", "Any")] == ["", 0, 0.0, False, None]


@pytest.mark.parametrize("type_name,value,expected,noted", [
    ("Optional[bool]", None, None, False),
    ("Optional[bool]", "yes", True, True),
    ("Optional[bool]", 0, False, True),
    ("list[int]", ["1", None, 2.0, "many", 3], [1, 2, 3], True),
    ("list[int]", 7, [7], True),
    ("list[str]", "solo", ["solo"], True),
    ("list[float]", ["1,234.5"], [1234.5], True),
    ("dict[str, int]", '{"a": "3", "b": 4, "c": "x"}', {"a": 3, "b": 4}, True),
    ("dict[str, Any]", {"k": [1, {"deep": None}]}, {"k": [1, {"deep": None}]}, False),
    ("list[dict[str, str]]", [{"who": "Jon", "n": 2}, "not an object"], [{"who": "Jon", "n": "2"}], True),
    ("Any", {"anything": True}, {"anything": True}, False),
    ("Optional[float]", "about 0.75", 0.75, True),
    ("int", True, 1, True),
])
def test_coercion_is_lenient_and_says_what_it_guessed(type_name, value, expected, noted):
    converted, note = coerce(value, parse(type_name))
    assert converted == expected
    assert bool(note) == noted, note


@pytest.mark.parametrize("type_name,value", [
    ("bool", None), ("bool", "perhaps"), ("int", "many"), ("float", float("inf")),
    ("dict[str, int]", "not json"), ("dict[str, int]", [1, 2]), ("list[int]", {"a": 1}),
])
def test_what_cannot_be_read_raises(type_name, value):
    with pytest.raises(ValueError):
        coerce(value, parse(type_name))


def test_the_agent_fills_typed_fields_with_one_warning_per_guess():
    schema = [
        {"name": "is_plan", "type": "Optional[bool]", "description": "d", "default": None},
        {"name": "lines", "type": "list[int]", "description": "d", "default": []},
        {"name": "attrs", "type": "dict[str, Any]", "description": "d", "default": {}},
        {"name": "meta", "type": "dict[str, str]", "description": "d", "default": {"k": "v"}},
    ]
    item, warnings = fill_fields({"is_plan": None, "lines": ["2", 3], "attrs": {"mood": "calm", "n": 1}}, schema)
    assert item == {"is_plan": None, "lines": [2, 3], "attrs": {"mood": "calm", "n": 1}, "meta": {"k": "v"}}
    assert any("'lines'" in w for w in warnings) and not any("'is_plan'" in w for w in warnings)
    item["meta"]["k"] = "changed"  # a default handed out is a copy
    assert fill_fields({}, schema)[0]["meta"] == {"k": "v"}


def test_annotations_of_other_shapes_are_not_types():
    for text in ("f(x)", "x.y.z", "1", "[str]"):
        assert field_types.from_annotation(ast.parse(text, mode="eval").body) is None
    assert FieldType("list", FieldType("int")).name == "list[int]"


PROGRAM = '''
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

INSTRUCTION_KNOWLEDGE_ITEM = "x"
INSTRUCTION_QUERY = "x"
INSTRUCTION_RESPONSE = "x"
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    important: Optional[bool] = field(default=None, metadata={"description": "flag"})
    turn_ids: List[int] = field(default_factory=list, metadata={"description": "turns"})
    extra: Dict[str, Any] = field(default_factory=dict, metadata={"description": "other"})


@dataclass
class Query:
    need_numeric: Optional[bool] = field(default=None, metadata={"description": "numeric?"})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.seen = []

    def write(self, item, raw_text):
        self.seen.append(f"{type(item.important).__name__}:{item.important} {item.turn_ids} {sorted(item.extra.items())}")

    def read(self, query):
        return f"{query.need_numeric} | " + " | ".join(self.seen)
'''


def test_typed_values_reach_the_program_in_a_worker():
    with ProgramSession(PROGRAM, limits=SandboxLimits(call_timeout_s=10)) as session:
        info = session.start()
        assert [(f["name"], f["type"]) for f in info.knowledge_item_schema] == [
            ("important", "Optional[bool]"), ("turn_ids", "list[int]"), ("extra", "dict[str, Any]")]
        session.write({"important": "yes", "turn_ids": ["1", 2], "extra": {"k": 1}}, "raw")
        session.write({"important": None}, "raw")
        out = session.read({"need_numeric": "false"}).output
    assert out == "False | bool:True [1, 2] [('k', 1)] | NoneType:None [] []"

"""sandbox.contract: the interface check on source, field schemas from live dataclasses."""
import ast
import json
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox import contract
from sandbox.contract import (
    ContractError,
    FieldSpec,
    annotation_type_name,
    check_interface,
    describe_dataclass,
    inspect_dataclass,
    render_schema_for_prompt,
    runtime_type_name,
)

SEEDS = sorted((Path(__file__).resolve().parent.parent / "seeds").glob("[a-z]*.py"))

GOOD = '''
from dataclasses import dataclass, field
from typing import Optional

INSTRUCTION_KNOWLEDGE_ITEM = "extract"
INSTRUCTION_QUERY = "query " + "it"
INSTRUCTION_RESPONSE = f"answer {1}"
ALWAYS_ON_KNOWLEDGE = ""

@dataclass
class KnowledgeItem:
    text: str = field(default="", metadata={"description": "the text"})
    tags: list[str] = field(default_factory=list, metadata={"description": "tags"})

@dataclass
class Query:
    q: Optional[str] = field(default=None, metadata={"description": "the query"})

class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
    def write(self, item, raw_text):
        pass
    def read(self, query):
        return ""
'''


def rules(source: str) -> list[str]:
    return [v.rule for v in check_interface(ast.parse(source))]


def test_good_program_and_seeds_have_no_violations():
    assert check_interface(ast.parse(GOOD)) == []
    assert SEEDS, "seeds directory is empty"
    for path in SEEDS:
        assert check_interface(ast.parse(path.read_text())) == [], path.name


@pytest.mark.parametrize("old,new,rule,needle", [
    ("class Query:", "class Questions:", "missing_class", "Query is missing"),
    ("@dataclass\nclass Query:", "class Query:", "not_dataclass", "Query must be decorated"),
    ("def read(self, query):", "def read(self):", "wrong_arity", "KnowledgeBase.read"),
    ("def write(self, item, raw_text):", "def write(self, item, raw_text, extra):",
     "wrong_arity", "KnowledgeBase.write"),
    ("def write(self, item, raw_text):", "def put(self, item, raw_text):", "missing_method",
     "KnowledgeBase.write is missing"),
    ("def __init__(self, toolkit):", "def __init__(self, toolkit, *, size):", "wrong_arity",
     "keyword-only"),
    ('ALWAYS_ON_KNOWLEDGE = ""', "ALWAYS_ON_KNOWLEDGE = None", "constant_not_str",
     "ALWAYS_ON_KNOWLEDGE must be a str"),
    ('ALWAYS_ON_KNOWLEDGE = ""', "ALWAYS_ON_KNOWLEDGE = ['a']", "constant_not_str", "list"),
    ('INSTRUCTION_QUERY = "query " + "it"', "", "missing_constant", "INSTRUCTION_QUERY is missing"),
    ('tags: list[str]', "tags: dict[int, str]", "field_type",
     "KnowledgeItem.tags: type dict[int, str] is not JSON-compatible; use str, int, float, bool, "
     "Any, list[...], dict[str, ...] or Optional[...]"),
])
def test_each_violation_names_the_part(old, new, rule, needle):
    assert old in GOOD
    violations = check_interface(ast.parse(GOOD.replace(old, new)))
    assert [v.rule for v in violations] == [rule], violations
    assert needle in violations[0].message


@pytest.mark.parametrize("old,new", [
    ('text: str = field(default="", metadata={"description": "the text"})', 'text: str = ""'),
    ('metadata={"description": "the query"}', 'metadata={"help": "x"}'),
    ('tags: list[str] = field(default_factory=list, metadata={"description": "tags"})',
     "tags: list[str] = field(default_factory=list)"),
])
def test_a_field_without_a_description_is_accepted(old, new):
    """The paper's engine treats the description as optional; the sandbox's engine warns instead
    (sandbox.engine.received, tests/test_sandbox_received.py)."""
    assert old in GOOD
    assert check_interface(ast.parse(GOOD.replace(old, new))) == []


def test_violation_lines_point_at_the_source():
    source = GOOD.replace("def read(self, query):", "def read(self):")
    (violation,) = check_interface(ast.parse(source))
    assert source.splitlines()[violation.line - 1].strip() == "def read(self):"


def test_accepted_variants():
    variants = GOOD.replace("@dataclass\nclass Query:", "@dataclasses.dataclass(frozen=True)\nclass Query:")
    variants = "import dataclasses\n" + variants
    variants = variants.replace("def __init__(self, toolkit):", "def __init__(self, toolkit, size=10, *args):")
    variants = variants.replace("Optional[str]", "str | None")
    assert rules(variants) == []
    # A method may come from a base class; only the runtime check can see it.
    inherited = GOOD.replace("class KnowledgeBase:", "class KnowledgeBase(Base):").replace(
        "    def read(self, query):\n        return \"\"\n", "")
    assert rules(inherited) == []


@pytest.mark.parametrize("text,expected", [
    ("str", "str"), ("int", "int"), ("float", "float"), ("bool", "bool"),
    ("list[str]", "list[str]"), ("List[str]", "list[str]"), ("typing.List[str]", "list[str]"),
    ("Optional[str]", "Optional[str]"), ("typing.Optional[str]", "Optional[str]"),
    ("str | None", "Optional[str]"), ("None | str", "Optional[str]"),
    ("Union[str, None]", "Optional[str]"),
    ("list", "list[Any]"), ("dict", "dict[str, Any]"), ("list[int]", "list[int]"),
    ("Optional[int]", "Optional[int]"), ("Optional[bool]", "Optional[bool]"), ("bool | None", "Optional[bool]"),
    ("Dict[str, Any]", "dict[str, Any]"), ("typing.Dict[str, float]", "dict[str, float]"),
    ("List[Dict[str, str]]", "list[dict[str, str]]"), ("Optional[List[int]]", "Optional[list[int]]"),
    ("Any", "Any"), ("typing.Any", "Any"),
    ("list[list[list[str]]]", None), ("dict[int, str]", None), ("Union[str, int]", None),
    ("Optional[None]", None), ("set[str]", None), ("datetime", None), ("tuple[str, str]", None),
    ("'str'", None), ("os.PathLike", None), ("Optional[str](1)", None),
])
def test_annotation_type_names(text, expected):
    assert annotation_type_name(ast.parse(text, mode="eval").body) == expected


@pytest.mark.parametrize("tp,expected", [
    (str, "str"), (int, "int"), (float, "float"), (bool, "bool"), (list[str], "list[str]"),
    (List[str], "list[str]"), (Optional[str], "Optional[str]"), (str | None, "Optional[str]"),
    (typing.Union[None, str], "Optional[str]"), (list, "list[Any]"), (dict, "dict[str, Any]"),
    (list[int], "list[int]"), (Optional[int], "Optional[int]"), (Optional[bool], "Optional[bool]"),
    (typing.Dict[str, typing.Any], "dict[str, Any]"), (list[dict[str, int]], "list[dict[str, int]]"),
    (typing.Union[str, int], None), (list[list[list[str]]], None), (set[str], None), ("str", None),
    (bytes, None),
])
def test_runtime_type_names(tp, expected):
    assert runtime_type_name(tp) == expected


def test_describe_dataclass_reads_fields_defaults_and_required():
    @dataclass
    class Item:
        text: str = field(metadata={"description": "body"})
        tags: list[str] = field(default_factory=list, metadata={"description": "labels"})
        when: Optional[str] = field(default=None, metadata={"description": "date"})
        n: int = field(default=3, metadata={"description": "count"})
        hidden: int = field(default=0, init=False)

    specs = describe_dataclass(Item)
    assert [s.to_dict() for s in specs] == [
        {"name": "text", "type": "str", "description": "body", "default": None, "required": True},
        {"name": "tags", "type": "list[str]", "description": "labels", "default": [], "required": False},
        {"name": "when", "type": "Optional[str]", "description": "date", "default": None, "required": False},
        {"name": "n", "type": "int", "description": "count", "default": 3, "required": False},
    ]


def test_describe_dataclass_violations():
    @dataclass
    class Bad:
        a: set = field(default_factory=set, metadata={"description": "x"})
        b: str = ""
        c: str = field(default="", metadata={"description": "   "})
        d: str = field(default="", metadata={"description": 42})

    specs, violations = inspect_dataclass(Bad)
    assert [(v.rule, v.message.split(":")[0]) for v in violations] == [
        ("field_type", "Bad.a"), ("description_not_str", "Bad.d")]
    assert "use str, int, float, bool, Any, list[...], dict[str, ...] or Optional[...]" in violations[0].message
    # No description, or a blank one: accepted as it is (the engine warns about both).
    assert [(s.name, s.description) for s in specs] == [("a", "x"), ("b", ""), ("c", "   "), ("d", "")]
    with pytest.raises(ContractError) as info:
        describe_dataclass(Bad)
    assert len(info.value.violations) == 2

    class Plain:
        pass

    assert [v.rule for v in inspect_dataclass(Plain)[1]] == ["not_dataclass"]

    @dataclass
    class Empty:
        pass

    assert [v.rule for v in inspect_dataclass(Empty)[1]] == ["no_fields"]


field_specs = st.builds(
    FieldSpec, name=st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True),
    type=st.sampled_from(("str", "int", "float", "bool", "Any", "list[str]", "Optional[str]", "Optional[bool]",
                           "list[int]", "dict[str, Any]", "list[dict[str, str]]", "Optional[list[float]]")),
    description=st.text(max_size=30),
    default=st.one_of(st.none(), st.text(max_size=5), st.integers(), st.lists(st.text(max_size=3))),
    required=st.booleans())


@given(st.lists(field_specs, max_size=5))
def test_fieldspec_roundtrip_and_schema_rendering(specs):
    for spec in specs:
        assert FieldSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    rendered = json.loads(render_schema_for_prompt(specs))
    assert rendered == [s.to_dict() for s in specs]
    assert json.loads(render_schema_for_prompt([s.to_dict() for s in specs])) == rendered


def test_fieldspec_from_dict_rejects_bad_input():
    with pytest.raises(ValueError, match="lacks description"):
        FieldSpec.from_dict({"name": "a", "type": "str"})
    with pytest.raises(ValueError, match="field 'a': type 'set' is not a field type"):
        FieldSpec.from_dict({"name": "a", "type": "set", "description": "x"})
    # any accepted spelling is stored canonically
    assert FieldSpec.from_dict({"name": "a", "type": "Dict[str, Any]", "description": "x"}).type == "dict[str, Any]"
    with pytest.raises(ValueError, match="must be a dict"):
        FieldSpec.from_dict(["a"])


def test_contract_constants():
    assert contract.DEFAULT_ALLOWED_IMPORTS == ("json", "re", "math", "hashlib", "collections",
                                                "dataclasses", "typing", "datetime", "textwrap",
                                                "sqlite3", "chromadb")
    assert contract.METHOD_PARAMS["write"] == ("self", "item", "raw_text")
    assert len(contract.CONSTANT_NAMES) == 4

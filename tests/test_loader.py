"""sandbox.worker.loader (+ static gate, restricted policy, namespace, proxies), in process.

The real isolation is the worker process (tests/test_gates.py goes through it); here we
check the language layer directly: what loads, what is refused, at which stage, and why.
"""
from pathlib import Path
from typing import Optional

import pytest

from sandbox.contract import DEFAULT_ALLOWED_IMPORTS
from sandbox.worker.loader import LoadedProgram, ProgramRejected, build_instance, load_program
from sandbox.worker.toolkit import LogSink, OpClock, make_toolkit
from sandbox.worker.toolkit_db import make_database

ROOT = Path(__file__).resolve().parent.parent
SEEDS = sorted((ROOT / "seeds").glob("[a-z]*.py"))
RICH = (Path(__file__).parent / "programs" / "rich_memory_program.py").read_text()
BASE = (ROOT / "seeds" / "experience_learner.py").read_text()


class FakeCollection:
    """Word-overlap stand-in for a chroma collection (chromadb itself is exercised via the gates)."""

    def __init__(self):
        self.docs = {}

    def add(self, ids, documents=None, metadatas=None, embeddings=None):
        self.docs.update(zip(ids, documents))

    def query(self, query_texts, n_results=10, **_):
        words = set(query_texts[0].lower().split())
        ranked = sorted(self.docs.values(), key=lambda d: -len(words & set(d.lower().split())))
        return {"documents": [ranked[:n_results]], "ids": [[]]}


class FakeChroma:
    __slots__ = ("cols",)

    def __init__(self):
        self.cols = {}

    def get_or_create_collection(self, name, **_):
        return self.cols.setdefault(name, FakeCollection())


def make_kit(replies=("a summary",)):
    sink, answers = LogSink(64_000), list(replies)
    kit = make_toolkit(make_database(OpClock()), FakeChroma(), sink,
                       lambda messages: {"ok": True, "text": answers.pop(0)} if answers
                       else {"ok": False, "kind": "budget", "error": "budget"})
    return kit, sink


def load(source: str, allowed=DEFAULT_ALLOWED_IMPORTS) -> tuple[LoadedProgram, list[str]]:
    logs: list[str] = []
    return load_program(source, allowed, log=logs.append), logs


def rejection(source: str, allowed=DEFAULT_ALLOWED_IMPORTS) -> ProgramRejected:
    with pytest.raises(ProgramRejected) as info:
        load(source, allowed)
    return info.value


# ---------------------------------------------------------------------------------- accepted

@pytest.mark.parametrize("path", SEEDS, ids=lambda p: p.stem)
def test_seeds_load_write_and_read(path):
    program, _ = load(path.read_text())
    assert set(program.constants) == {"INSTRUCTION_KNOWLEDGE_ITEM", "INSTRUCTION_QUERY",
                                      "INSTRUCTION_RESPONSE", "ALWAYS_ON_KNOWLEDGE"}
    assert program.query_schema[0]["name"] == "query_text"
    kit, sink = make_kit()
    kb = program.kb_cls(kit)
    item = {"topic": "pets", "content": "Alice's cat is Tom", "lesson_learned": "cats purr",
            "fact_to_remember": "Tom is a cat", "unknown_key": 1}
    kb.write(build_instance(program.knowledge_item_cls, item, program.knowledge_item_schema),
             "Alice has a cat named Tom.\nTom likes fish.")
    out = kb.read(build_instance(program.query_cls, {"query_text": "cat"}, program.query_schema))
    assert isinstance(out, str) and 0 < len(out) <= 3000
    assert "Tom" in out or out == "a summary"


def test_rich_program_loads_and_works():
    program, _ = load(RICH)
    types = {f["name"]: f["type"] for f in program.knowledge_item_schema}
    assert types == {"summary": "str", "facts": "list[str]", "people": "list[str]",
                     "session_date": "Optional[str]", "importance": "int", "confidence": "float",
                     "is_update": "bool"}
    assert {f["name"]: f["type"] for f in program.query_schema}["person"] == "Optional[str]"
    kit, sink = make_kit()
    kb = program.kb_cls(kit)
    first = {"summary": "Caroline went to a support group", "people": ["Caroline", "Melanie"],
             "facts": ["Caroline attended an LGBTQ support group.", "Melanie painted a sunrise."],
             "importance": "4", "is_update": "no"}
    kb.write(build_instance(program.knowledge_item_cls, first, program.knowledge_item_schema),
             "Session on 2023-05-08.")
    dup = {"facts": ["Caroline attended an LGBTQ support group."], "people": "Caroline"}
    kb.write(build_instance(program.knowledge_item_cls, dup, program.knowledge_item_schema), "x")
    assert kb.stats == {"duplicates": 1, "facts": 3}       # d[k] += 1 on a dict attribute
    assert kb.n_writes == 2                                # self.n += 1
    assert kb._person_counts["caroline"] == 2              # Counter item += 1
    out = kb.read(build_instance(program.query_cls, {"keywords": "support group", "top_k": 2},
                                 program.query_schema))
    assert out.splitlines()[0] == "Known people: caroline, melanie"
    assert "1. Caroline attended an LGBTQ support group. (2023-05-08)" in out
    assert any("write #2: 1 facts" in line for line in sink.take())


def test_augmented_assignment_evaluates_the_target_once():
    program, _ = load(BASE + '''
calls = []
class Box:
    def __init__(self):
        self.n = 1
        self.items = {"k": [1]}
box = Box()
def get_box():
    calls.append("box")
    return box
def key():
    calls.append("key")
    return "k"
get_box().n += 41
get_box().items[key()] += [2]
nums = [1, 2, 3, 4]
nums[1:3] *= 2
''')
    ns = program.namespace
    assert ns["box"].n == 42 and ns["box"].items == {"k": [1, 2]}
    assert ns["calls"] == ["box", "box", "key"]
    assert ns["nums"] == [1, 2, 3, 2, 3, 4]


def test_private_names_print_super_and_dataclass_variants():
    program, logs = load(BASE + '''
from dataclasses import dataclass, field
from collections import namedtuple
P = namedtuple("P", "a b")
class _Helper(dict):
    def __init__(self):
        super().__init__()
        self._hits = 0
    def _bump(self):
        self._hits += 1
        return self._hits
    def __repr__(self):
        return "Helper(" + str(self._hits) + ")"
@dataclass(slots=True)
class Slotted:
    x: int = 0
h = _Helper()
h._bump()
s = Slotted()
s.x = 5
print("helper", h, P(1, 2)._asdict(), __name__.startswith("memory_program"))
label = "{} has {n} hits".format("h", n=h._bump())
''')
    ns = program.namespace
    assert logs == ["helper Helper(1) {'a': 1, 'b': 2} True"]
    assert ns["label"] == "h has 2 hits"
    assert ns["s"].x == 5


def test_future_annotations_strptime_and_strftime():
    """Real programs start with `from __future__ import annotations` and parse dates with
    strptime (CPython imports _strptime and time through the calling frame's __import__)."""
    program, _ = load("from __future__ import annotations\n" + BASE + '''
import datetime
from typing import Optional
@dataclass
class Event:
    when: Optional[str] = None
    parsed: Optional[datetime.datetime] = field(default=None, init=False)
    def __post_init__(self) -> None:
        if self.when:
            self.parsed = datetime.datetime.strptime(self.when, "%Y-%m-%d")
E = Event("2023-05-08")
DAY = E.parsed.strftime("%A %d %B")
LABEL = f"{E.parsed:%Y/%m}"
TODAY = datetime.date.today().year > 2000
''')
    ns = program.namespace
    assert (ns["DAY"], ns["LABEL"], ns["TODAY"]) == ("Monday 08 May", "2023/05", True)
    # Annotations are real objects (the future import was dropped), so dataclasses work and
    # the schema sees real types.
    assert ns["Event"].__annotations__["when"] == Optional[str]
    assert program.knowledge_item_schema[0]["type"] == "str"
    rej = rejection("from __future__ import annotations\n" + BASE + "\nclass Node:\n    kids: Later = None\n")
    assert rej.rule == "NameError" and "from __future__ import annotations` is ignored" in rej.message


def test_program_cannot_import_time_itself():
    """`time` is served to C code only (datetime.strftime); a guarded program import fails."""
    program, _ = load(BASE + '''
try:
    import time
    GOT = "time"
except ImportError as exc:
    GOT = "refused: " + str(exc)
''')
    assert program.namespace["GOT"].startswith("refused: import of 'time' is not allowed")


def test_python_features_real_programs_use():
    program, logs = load(BASE + '''
import datetime
try:
    import numpy as np
except ImportError:
    np = None
class Store(dict):
    __slots__ = ()
    def __missing__(self, key):
        return 0
    def __setitem__(self, key, value):
        super().__setitem__(key, value * 2)
class Scorer:
    __slots__ = ("weight", "_calls")
    def __init__(self, weight):
        self.weight = weight
        self._calls = 0
    def __call__(self, x):
        self._calls += 1
        return x * self.weight
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return False
    def __repr__(self):
        return f"{self.__class__.__name__}(weight={self.weight})"
class Cache:
    def __init__(self):
        self.__items = {}
    def __key(self, text):
        return text.lower()
    def put(self, text):
        self.__items[self.__key(text)] = len(self.__items)
        return self.__items
    def snapshot(self):
        return dict(self.__dict__)
def counter():
    n = 0
    def bump():
        nonlocal n
        n += 1
        return n
    return bump
store = Store()
store["a"] = 2
with Scorer(3) as scorer:
    SCORED = scorer(2)
bump = counter()
bump()
CACHE = Cache()
CACHE.put("A")
RESULT = (store["a"], store["zz"], SCORED, repr(scorer), bump(), CACHE.snapshot(), np,
          type(scorer).__name__, FileNotFoundError.__name__, sorted(dir(Scorer(1)))[-2:])
''')
    assert program.namespace["RESULT"] == (4, 0, 6, "Scorer(weight=3)", 2, {"_Cache__items": {"a": 0}},
                                           None, "Scorer", "FileNotFoundError", ["_calls", "weight"])


def test_typing_dataclass_and_textwrap_extras():
    program, _ = load(BASE + '''
from typing import ClassVar, Generator, Counter as TCounter, Final, TypeVar, Annotated
from dataclasses import InitVar, KW_ONLY
import textwrap, hashlib
T = TypeVar("T")
LIMIT: Final = 3
@dataclass
class Cfg:
    limit: ClassVar[int] = 5
    seed: InitVar[int] = 0
    _: KW_ONLY
    name: Annotated[str, "display name"] = "x"
    def __post_init__(self, seed):
        self.rand = seed * 2
def gen() -> Generator[int, None, None]:
    yield 1
RESULT = (Cfg(seed=2).rand, Cfg.limit, list(gen()), textwrap.TextWrapper(width=10).wrap("hello world again"),
          hashlib.new("sha256", b"x").hexdigest()[:6])
''')
    assert program.namespace["RESULT"] == (4, 5, [1], ["hello", "world", "again"], "2d7116")
    for name in ("NamedTuple", "TypedDict", "get_type_hints", "ForwardRef", "final", "overload"):
        assert rejection(f"from typing import {name}\n" + BASE).rule == "import_name_not_allowed"


def test_row_factory_is_the_only_writable_toolkit_attribute():
    program, _ = load(BASE.replace("self.lessons = []", '''self.lessons = []
        import sqlite3
        toolkit.db.row_factory = sqlite3.Row
        row = toolkit.db.execute("SELECT 1 AS one").fetchone()
        self.one = row["one"]'''))
    kit, _ = make_kit()
    assert program.kb_cls(kit).one == 1
    program, _ = load(BASE.replace("self.lessons = []", "toolkit.db.isolation_level = None"))
    with pytest.raises(AttributeError):
        program.kb_cls(make_kit()[0])
    program, _ = load(BASE.replace("self.lessons = []", "toolkit.logger.debug = print"))
    with pytest.raises(TypeError, match="cannot modify Logger"):
        program.kb_cls(make_kit()[0])


# ---------------------------------------------------------------------------------- refused

BAD_PROGRAMS = [
    # (id, transform of the base program, stage, gate, rule, text in the message)
    ("missing class", lambda s: s.replace("class Query:", "class Question:"),
     "static", "interface", "missing_class", "Query is missing"),
    ("wrong arity", lambda s: s.replace("def read(self, query: Query)", "def read(self)"),
     "static", "interface", "wrong_arity", "KnowledgeBase.read"),
    ("set field type", lambda s: s.replace("fact_to_remember: str", "fact_to_remember: set[str]"),
     "static", "interface", "field_type", "KnowledgeItem.fact_to_remember: type set[str]"),
    ("description not str", lambda s: s.replace(
        'metadata={"description": "A search query for the knowledge base"}', "metadata=META")
     .replace("@dataclass\nclass Query", 'META = {"description": 7}\n@dataclass\nclass Query'),
     "import", "interface", "description_not_str", "Query.query_text: the description is a int"),
    ("constant not str", lambda s: s + "\nALWAYS_ON_KNOWLEDGE = 3 * 1\n",
     "import", "interface", "constant_not_str", "ALWAYS_ON_KNOWLEDGE must be a str"),
    ("import os", lambda s: "import os\n" + s, "static", "imports", "import_not_allowed",
     "import os is not allowed"),
    ("import inside function", lambda s: s.replace("self.lessons = []", "import subprocess"),
     "static", "imports", "import_not_allowed", "import subprocess"),
    ("from typing import sys", lambda s: "from typing import sys\n" + s, "static", "imports",
     "import_name_not_allowed", "'sys' is not available"),
    ("typing.sys", lambda s: "import typing\n" + s + "\nX = typing.sys.modules\n",
     "static", "imports", "module_attribute_not_allowed", "typing.sys"),
    ("json.codecs", lambda s: "import json\n" + s + "\nX = json.codecs\n",
     "static", "imports", "module_attribute_not_allowed", "json.codecs"),
    ("aliased module pivot", lambda s: "import json\n" + s + "\nj = json\nX = j.codecs\n",
     "import", "import", "AttributeError", "'codecs' is not available"),
    ("dotted import", lambda s: "import os.path\n" + s, "static", "imports", "import_not_allowed",
     "import os.path"),
    ("unknown future feature", lambda s: "from __future__ import braces\n" + s, "static", "imports",
     "future_import", "from __future__ import braces is not supported"),
    ("guarded import os", lambda s: s.replace("self.lessons = []", "try:\n            import os\n"
     "        except ImportError:\n            os = None\n        self.lessons = []"),
     "static", "imports", "import_not_allowed", "import os is not allowed"),
    ("guarded from-import of an internal", lambda s: "try:\n    from json import codecs\n"
     "except ImportError:\n    codecs = None\n" + s, "static", "imports", "import_name_not_allowed",
     "from json import codecs"),
    ("__class__ of a host object", lambda s: "import json\n" + s + "\nm = json\nX = m.__class__\n",
     "import", "import", "AttributeError", '"__class__" of a json object'),
    ("__dict__ of a class", lambda s: s + "\nX = KnowledgeBase.__dict__\n", "import", "import",
     "AttributeError", "only on instances of the program's own classes"),
    ("__doc__", lambda s: s + "\nX = KnowledgeBase.__doc__\n", "static", "restricted",
     "restricted_syntax", '"__doc__"'),
    ("__format__ method", lambda s: s.replace("class KnowledgeBase:", "class KnowledgeBase:\n"
     "    def __format__(self, spec):\n        return spec"), "static", "restricted",
     "restricted_syntax", '"__format__"'),
    ("nonlocal guard name", lambda s: s + "\ndef f():\n    def g():\n        nonlocal _getattr_\n"
     "    return g\n", "static", "restricted", "restricted_syntax", "_getattr_"),
    ("match statement", lambda s: s + "\nmatch 1:\n    case int(real=r):\n        pass\n", "static",
     "restricted", "restricted_syntax", "Match statements are not allowed"),
    ("__import__", lambda s: s + "\nX = __import__('os')\n", "static", "names", "denied_name",
     "'__import__'"),
    ("eval", lambda s: s + "\nX = eval('1+1')\n", "static", "names", "denied_name", "'eval'"),
    ("open", lambda s: s.replace("self.lessons = []", "self.lessons = open('/etc/passwd')"),
     "static", "names", "denied_name", "'open'"),
    ("dunder attribute", lambda s: s + "\nX = ().__class__.__bases__\n", "static", "restricted",
     "restricted_syntax", '"__bases__"'),
    ("dunder via getattr", lambda s: s + "\nX = getattr(tuple, '__ba' + 'ses__')\n", "import", "import",
     "AttributeError", '"__bases__"'),
    ("str.format traversal", lambda s: s + "\nX = '{0.__class__}'.format(1)\n", "import", "import",
     "ValueError", "format field {0.__class__} is not allowed"),
    ("format_map traversal", lambda s: s + "\nX = '{a.real}'.format_map({'a': 1})\n", "import",
     "import", "ValueError", "{a.real}"),
    ("nested format spec", lambda s: s + "\nX = '{0:{1.__class__}}'.format(1, 2)\n", "import",
     "import", "ValueError", "{1.__class__}"),
    ("getattr method", lambda s: s.replace("class KnowledgeBase:", "class KnowledgeBase:\n"
     "    def __getattr__(self, name):\n        return name"), "static", "restricted",
     "restricted_syntax", '"__getattr__"'),
    ("rebind a guard", lambda s: s + "\n_write_ = None\n", "static", "restricted",
     "restricted_syntax", '"_write_" is reserved'),
    ("frame attribute", lambda s: s + "\ndef g():\n    yield 1\nX = g().gi_frame\n", "static",
     "restricted", "restricted_syntax", '"gi_frame"'),
    ("exception .obj", lambda s: s + "\ntry:\n    (1).nope\nexcept AttributeError as e:\n    X = e.obj\n",
     "import", "import", "AttributeError", '"obj" of an exception'),
    ("type() of a host object", lambda s: s + "\nimport json\nX = type(json)\n", "import", "import",
     "TypeError", "type() of a json object"),
    ("metaclass base", lambda s: s + "\nclass M(type):\n    pass\n", "import", "import",
     "TypeError", "may not inherit from type"),
    ("modify a module", lambda s: "import json\n" + s + "\njson.dumps = None\n", "import", "import",
     "TypeError", "cannot modify json"),
    ("string annotation", lambda s: s.replace("lesson_learned: str", "lesson_learned: 'str'"),
     "static", "annotations", "annotation", "string annotation"),
    ("exit at import", lambda s: s + "\nraise SystemExit(0)\n", "import", "import", "SystemExit",
     "SystemExit"),
    ("syntax error", lambda s: s + "\ndef broken(:\n", "compile", "syntax", "syntax_error", ""),
    ("return outside function", lambda s: s + "\nreturn 1\n", "compile", "syntax", "syntax_error",
     "outside function"),
    ("NUL byte", lambda s: s + "\n# \x00\n", "static", "source", "nul_byte", "NUL"),
    ("too large", lambda s: s + "#" * 70_000, "static", "source", "source_too_large", "the limit is 65536"),
]


@pytest.mark.parametrize("transform,stage,gate,rule,needle",
                         [case[1:] for case in BAD_PROGRAMS], ids=[case[0] for case in BAD_PROGRAMS])
def test_bad_programs_are_rejected_with_stage_and_rule(transform, stage, gate, rule, needle):
    source = transform(BASE)
    assert source != BASE
    rej = rejection(source)
    assert (rej.stage, rej.gate, rej.rule) == (stage, gate, rule), rej
    assert needle in rej.message
    if stage in ("static", "compile") and rule not in ("missing_class", "source_too_large"):
        assert rej.line is not None
    if stage == "import" and gate == "import":  # the line of the failing statement
        assert rej.line is not None and rej.line > BASE.count("\n")


def test_static_rejection_lists_every_violation():
    rej = rejection("import os\nimport subprocess\n" + BASE.replace("class Query:", "class Q:"))
    assert [v.rule for v in rej.violations] == ["import_not_allowed", "import_not_allowed",
                                                "missing_class"]
    assert rej.message.splitlines()[0].startswith("line 1: import os")


def test_extra_modules_only_when_allowed():
    heap = "import heapq\n" + BASE + "\nh = []\nheapq.heappush(h, 2)\n"
    assert rejection(heap).rule == "import_not_allowed"
    program, _ = load(heap, DEFAULT_ALLOWED_IMPORTS + ("heapq",))
    assert program.namespace["h"] == [2]
    # Some modules are never served, whatever the configuration says.
    assert rejection("import os\n" + BASE, DEFAULT_ALLOWED_IMPORTS + ("os",)).rule == "import_never_allowed"
    missing = DEFAULT_ALLOWED_IMPORTS + ("no_such_module_xyz",)
    assert load(BASE, missing)[0].kb_cls.__name__ == "KnowledgeBase"
    assert rejection("import no_such_module_xyz\n" + BASE, missing).rule == "import_unavailable"


def test_annotations_that_never_run_may_name_anything():
    program, logs = load((Path(__file__).parent / "programs" / "typed_memory_program.py").read_text())
    kb = program.kb_cls(make_kit()[0])
    kb.write(build_instance(program.knowledge_item_cls, {"text": "hi"}, program.knowledge_item_schema), "")
    assert kb.read(program.query_cls()) == "hi2024"
    assert logs == []  # the __main__ block did not run


def test_deeply_nested_source_is_refused_cleanly():
    rej = rejection(BASE + "\nX = 1" + " + 1" * 2000 + "\n")
    assert rej.stage in ("static", "compile") and "nested too deeply" in rej.message


def test_runtime_guards_inside_methods():
    program, _ = load(BASE.replace(
        "        return f\"Lessons:", "        return getattr(query, query.query_text)\n        return f\"Lessons:"))
    kb = program.kb_cls(make_kit()[0])
    kb.lessons.append("x")
    query = build_instance(program.query_cls, {"query_text": "__reduce_ex__"}, program.query_schema)
    with pytest.raises(AttributeError, match="__reduce_ex__"):
        kb.read(query)
    query = build_instance(program.query_cls, {"query_text": "query_text"}, program.query_schema)
    assert kb.read(query) == "query_text"


FORMAT_ROUTES = {
    # Each reached the real str.format before issue 16; each must meet the template check now.
    "super() in a str subclass": "class U(str):\n    def go(self, v):\n        return super().format(v)\n"
                                 "X = U('{0.__class__}').go(1)",
    "two-argument super": "X = super(T, T('{0.__class__}')).format(1)",
    "super bound to the class": "X = super(T, T).format('{0.__class__}', 1)",
    "format_map through super": "X = super(T, T('{a.__class__}')).format_map({'a': 1})",
    "getattr on super": "X = getattr(super(T, T('{0.__class__}')), 'form' + 'at')(1)",
    "typing alias forwarding": "from typing import Annotated\nX = Annotated[str, 0].format('{0.__class__}', 1)",
    "alias of a program subclass": "import typing\nX = typing.Annotated[T, 0].format(T('{0.__class__}'), 1)",
    "super in a classmethod": "class V(str):\n    @classmethod\n    def f(cls):\n        return super(V, cls).format\n"
                              "X = V.f()('{0.__class__}', 1)",
}


@pytest.mark.parametrize("route", sorted(FORMAT_ROUTES))
def test_every_route_to_str_format_meets_the_template_check(route):
    rej = rejection(BASE + "\n\nclass T(str):\n    pass\n\n" + FORMAT_ROUTES[route] + "\n")
    assert (rej.stage, rej.rule) == ("import", "ValueError"), rej
    assert "format field {0.__class__} is not allowed" in rej.message or "{a.__class__}" in rej.message


def test_plain_formatting_still_works_on_every_route():
    program, _ = load(BASE + "\n\nclass T(str):\n    def go(self, v):\n        return super().format(v)\n\n"
                      "A = super(T, T('{0}-{n}')).format(1, n=2)\n"
                      "B = T('<{0}>').go('b')\nC = str.format('{0:>3}', 7)\nD = '{k}'.format_map({'k': 'v'})\n")
    ns = program.namespace
    assert (ns["A"], ns["B"], ns["C"], ns["D"]) == ("1-2", "<b>", "  7", "v")


def test_guard_result_screens_by_value():
    import operator
    import string

    from sandbox.worker.formatting import guard_result

    class Sub(str):
        pass

    for raw in ("{0.real}".format, Sub("{0.real}").format, super(Sub, Sub("{0.real}")).format):
        with pytest.raises(ValueError, match="format field"):
            guard_result(raw, "format")(1)
    with pytest.raises(ValueError, match="format field"):
        guard_result(str.format, "format")("{0.real}", 1)
    with pytest.raises(ValueError, match="format field"):
        guard_result("{a.real}".format_map, "format_map")({"a": 1})
    assert guard_result("{0}".format, "format")(3) == "3"
    for walker in (string.Formatter(), string.Formatter, string.Formatter().vformat,
                   operator.attrgetter("a"), operator.methodcaller("a")):
        with pytest.raises(AttributeError):
            guard_result(walker, "x")
    assert guard_result(len, "len") is len and guard_result("abc".upper, "upper")() == "ABC"


def test_fields_without_descriptions_load_with_empty_descriptions():
    source = BASE.replace('field(default="", metadata={"description": "A search query for the knowledge base"})',
                          '""')
    program, _ = load(source)
    assert program.query_schema[0]["description"] == ""


def test_a_default_is_sent_as_the_copy_that_was_measured():
    """tests/hostile/h170: a dict subclass whose items() grows after the first call."""
    program, _ = load((Path(__file__).parent / "hostile" / "h170_schema_default_grows.py").read_text())
    [extra] = [s for s in program.knowledge_item_schema if s["name"] == "extra"]
    assert type(extra["default"]) is dict and extra["default"] == {"k": "small"}


# ---------------------------------------------------------------------------------- build_instance

SCHEMA = [
    {"name": "text", "type": "str", "description": "t", "default": None, "required": True},
    {"name": "tags", "type": "list[str]", "description": "t", "default": [], "required": False},
    {"name": "n", "type": "int", "description": "t", "default": 3, "required": False},
    {"name": "x", "type": "float", "description": "t", "default": 0.5, "required": False},
    {"name": "ok", "type": "bool", "description": "t", "default": False, "required": False},
    {"name": "when", "type": "Optional[str]", "description": "t", "default": None, "required": False},
]


@pytest.fixture(scope="module")
def item_cls():
    program, _ = load(BASE.replace(
        'class KnowledgeItem:\n', 'class KnowledgeItem:\n'
        '    text: str = field(metadata={"description": "t"})\n'
        '    tags: list[str] = field(default_factory=list, metadata={"description": "t"})\n'
        '    n: int = field(default=3, metadata={"description": "t"})\n'
        '    x: float = field(default=0.5, metadata={"description": "t"})\n'
        '    ok: bool = field(default=False, metadata={"description": "t"})\n'
        '    when: Optional[str] = field(default=None, metadata={"description": "t"})\n')
        .replace("from dataclasses import", "from typing import Optional\nfrom dataclasses import"))
    assert [f["name"] for f in program.knowledge_item_schema][:6] == [s["name"] for s in SCHEMA]
    return program.knowledge_item_cls


@pytest.mark.parametrize("data,expected", [
    ({"text": "a", "tags": ["x", None, 2], "n": "7", "x": "1,5", "ok": "yes", "when": "2024"},
     {"text": "a", "tags": ["x", "2"], "n": 7, "x": 15.0, "ok": True, "when": "2024"}),
    ({"text": ["a", "b"], "tags": "solo", "n": 2.9, "x": True, "ok": 0, "when": None},
     {"text": "a, b", "tags": ["solo"], "n": 3, "x": 1.0, "ok": False, "when": None}),  # 2.9 rounds
    ({"text": {"k": 1}, "n": "many", "x": None, "ok": "perhaps", "junk": 1},
     {"text": '{"k": 1}', "tags": [], "n": 3, "x": 0.5, "ok": False, "when": None}),
    ({}, {"text": "", "tags": [], "n": 3, "x": 0.5, "ok": False, "when": None}),
    ({"text": 5, "tags": "  ", "when": 12}, {"text": "5", "tags": [], "n": 3, "x": 0.5, "ok": False,
                                             "when": "12"}),
])
def test_build_instance_coerces(item_cls, data, expected):
    obj = build_instance(item_cls, data, SCHEMA)
    assert {k: getattr(obj, k) for k in expected} == expected


def test_build_instance_rejects_non_dict(item_cls):
    with pytest.raises(TypeError, match="must be a JSON object"):
        build_instance(item_cls, ["a"], SCHEMA)

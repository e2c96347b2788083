"""Tests for mstar.agent: prompt building, lenient JSON parsing, schema filling, answer cleaning."""
import json
from dataclasses import dataclass

import pytest
from hypothesis import given, settings, strategies as st

from mstar.agent import (build_answer_messages, build_extraction_messages, build_query_messages,
                         clean_answer, fill_fields, parse_json_object)
from mstar.offline.task_model import OfflineTaskModel

ITEM_SCHEMA = [
    {"name": "topic", "type": "str", "description": "What the text is about", "default": "",
     "required": False},
    {"name": "session_date", "type": "str", "description": "When the conversation happened",
     "default": "", "required": False},
    {"name": "people", "type": "list[str]", "description": "Who takes part", "default": None,
     "required": True},
    {"name": "facts", "type": "list[str]", "description": "Facts worth remembering",
     "default": None, "required": True},
    {"name": "session_number", "type": "int", "description": "", "default": 0, "required": False},
    {"name": "importance", "type": "float", "description": "", "default": 0.5, "required": False},
    {"name": "resolved", "type": "bool", "description": "", "default": False, "required": False},
    {"name": "lesson", "type": "Optional[str]", "description": "A general lesson",
     "default": None, "required": False},
]
QUERY_SCHEMA = [
    {"name": "query_text", "type": "str", "description": "A search query", "default": "",
     "required": False},
    {"name": "keywords", "type": "list[str]", "description": "Words to match", "default": None,
     "required": True},
    {"name": "speaker", "type": "Optional[str]", "description": "Person asked about",
     "default": None, "required": False},
]
EPISODE = (
    "[3:10 pm on 14 March, 2024] Session 2 — Maya and Tom\n"
    "Maya: Guess what, I adopted a rescue greyhound called Biscuit last week!\n"
    "Tom: That is wonderful news. I started cello lessons with my neighbour Clara.\n"
    "Maya: Biscuit sleeps on the sofa all day."
)


def _only_message(messages):
    assert isinstance(messages, list) and len(messages) == 1
    assert messages[0]["role"] == "user"
    return messages[0]["content"]


# ---------------------------------------------------------------- prompts

def test_extraction_prompt_has_tags_on_their_own_lines_in_order():
    text = _only_message(build_extraction_messages("Keep dates exact.", EPISODE, ITEM_SCHEMA))
    lines = text.splitlines()
    assert lines[0] == "<task>extract_knowledge_item</task>"
    for tag in ("instruction", "text", "schema"):
        assert f"<{tag}>" in lines and f"</{tag}>" in lines
    order = [lines.index(f"<{tag}>") for tag in ("instruction", "text", "schema")]
    assert order == sorted(order)
    assert "Keep dates exact." in text and "Biscuit sleeps on the sofa" in text
    schema_text = text.split("<schema>")[1].split("</schema>")[0]
    assert json.loads(schema_text) == ITEM_SCHEMA
    assert "JSON object" in lines[-1]


def test_query_prompt_has_question_and_schema():
    text = _only_message(build_query_messages("Use names.", "Who is Clara?", QUERY_SCHEMA))
    assert text.splitlines()[0] == "<task>formulate_query</task>"
    assert "<question>\nWho is Clara?\n</question>" in text
    assert "<instruction>\nUse names.\n</instruction>" in text
    assert json.loads(text.split("<schema>")[1].split("</schema>")[0]) == QUERY_SCHEMA


def test_answer_prompt_puts_always_on_in_front_of_retrieved():
    text = _only_message(build_answer_messages("RULE LINE", "memory body", "Q?", "Be brief."))
    assert text.splitlines()[0] == "<task>answer</task>"
    assert "<retrieved_memory>\nRULE LINE\nmemory body\n</retrieved_memory>" in text
    assert text.index("<retrieved_memory>") < text.index("<question>") < text.index("<instruction>")
    empty = _only_message(build_answer_messages("", "memory body", "Q?", "Be brief."))
    assert "<retrieved_memory>\nmemory body\n</retrieved_memory>" in empty


def test_schema_may_be_fieldspec_dataclasses():
    @dataclass
    class FieldSpec:  # local fake of sandbox.contract.FieldSpec
        name: str
        type: str
        description: str
        default: object
        required: bool

    specs = [FieldSpec("query_text", "str", "A search query", "", False)]
    text = _only_message(build_query_messages("i", "q", specs))
    assert json.loads(text.split("<schema>")[1].split("</schema>")[0])[0]["name"] == "query_text"


def test_bad_schema_is_a_clear_error():
    with pytest.raises(ValueError, match="'when'.*type 'datetime' is not a field type"):
        build_extraction_messages("i", "t", [{"name": "when", "type": "datetime"}])
    with pytest.raises(ValueError, match="schema entry 0"):
        build_query_messages("i", "q", [{"type": "str"}])


def test_prompts_round_trip_through_the_offline_task_model():
    model = OfflineTaskModel()
    reply = model.complete(build_extraction_messages("Keep dates.", EPISODE, ITEM_SCHEMA))
    obj, warning = parse_json_object(reply)
    item, warnings = fill_fields(obj, ITEM_SCHEMA)
    assert warning is None and warnings == []
    assert item["session_date"] == "14 March, 2024"
    assert {"Maya", "Tom"} <= set(item["people"])
    assert item["session_number"] == 2

    reply = model.complete(build_query_messages("Use names.", "What did Tom start?", QUERY_SCHEMA))
    query, warnings = fill_fields(parse_json_object(reply)[0], QUERY_SCHEMA)
    assert warnings == [] and query["query_text"] == "What did Tom start?"
    assert query["speaker"] == "Tom" and "start" in query["keywords"]

    reply = model.complete(build_answer_messages("", EPISODE, "What lessons did Tom start?",
                                                 "Be brief."))
    assert "cello" in clean_answer(reply).lower()


# ---------------------------------------------------------------- JSON parsing

@pytest.mark.parametrize("reply, expected, warned", [
    ('{"a": 1, "b": "x"}', {"a": 1, "b": "x"}, False),
    ('```json\n{"a": 1}\n```', {"a": 1}, True),
    ('Sure, here you go:\n{"a": "brace } inside"}\nLet me know!', {"a": "brace } inside"}, True),
    ('{"a": [1, 2,], "b": 3,}', {"a": [1, 2], "b": 3}, True),
    ("{'a': 'Maya\\'s dog', 'b': true, 'c': null}", {"a": "Maya's dog", "b": True, "c": None},
     True),
    ("{'a': True, 'b': None}", {"a": True, "b": None}, True),
    ('[{"a": 1}]', {"a": 1}, True),
    ('I think {"a": {"b": 2}} is it', {"a": {"b": 2}}, True),
])
def test_parse_json_object_is_lenient(reply, expected, warned):
    obj, warning = parse_json_object(reply)
    assert obj == expected
    assert (warning is not None) == warned


@pytest.mark.parametrize("reply, reason", [
    ("", "empty"),
    ("I could not find anything.", "not JSON"),
    ('{"a": "unterminated', "not JSON"),
    ("[1, 2, 3]", "list, not an object"),
])
def test_parse_json_object_failures_carry_a_reason(reply, reason):
    obj, warning = parse_json_object(reply)
    assert obj is None and reason in warning


def test_parse_json_object_never_executes_code():
    obj, warning = parse_json_object("{'a': __import__('os').getcwd()}")
    assert obj is None and warning


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=10)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=10), json_values, max_size=5),
       st.sampled_from(["", "Here it is: ", "```json\n"]))
def test_parse_json_object_recovers_any_dumped_object(obj, prefix):
    reply = prefix + json.dumps(obj) + ("\n```" if prefix.startswith("```") else "")
    parsed, warning = parse_json_object(reply)
    assert parsed == obj
    assert (warning is None) == (prefix == "")


# ---------------------------------------------------------------- schema filling

def test_fill_fields_coerces_to_declared_types():
    obj = {"topic": ["pets", "music"], "session_date": 2024, "people": "Maya",
           "facts": ["a", None, "b"], "session_number": "3", "importance": "0.9",
           "resolved": "yes", "lesson": None}
    item, warnings = fill_fields(obj, ITEM_SCHEMA)
    assert item == {"topic": "pets, music", "session_date": "2024", "people": ["Maya"],
                    "facts": ["a", "b"], "session_number": 3, "importance": 0.9,
                    "resolved": True, "lesson": None}
    joined = "\n".join(warnings)
    for name in ("topic", "session_date", "people", "facts", "session_number", "importance",
                 "resolved"):
        assert f"'{name}'" in joined
    assert "'lesson'" not in joined  # None is a valid Optional[str]


def test_fill_fields_defaults_and_unknown_keys():
    item, warnings = fill_fields({"topic": "x", "extra": 1, "session_number": "many"},
                                 ITEM_SCHEMA)
    assert item["people"] == [] and item["importance"] == 0.5 and item["session_number"] == 0
    assert "field 'people' missing; used default []" in warnings
    assert "unknown field 'extra' dropped" in warnings
    assert any("'session_number'" in w and "used default 0" in w for w in warnings)


def test_fill_fields_without_a_reply_uses_defaults_with_one_warning():
    item, warnings = fill_fields(None, QUERY_SCHEMA)
    assert item == {"query_text": "", "keywords": [], "speaker": None}
    assert warnings == ["reply was not JSON; used defaults"]


def test_fill_fields_returns_fresh_default_lists():
    schema = [{"name": "tags", "type": "list[str]", "default": ["x"], "required": False}]
    first, _ = fill_fields({}, schema)
    first["tags"].append("y")
    second, _ = fill_fields({}, schema)
    assert second["tags"] == ["x"] and schema[0]["default"] == ["x"]


def test_fill_fields_rejects_non_dict():
    with pytest.raises(ValueError, match="dict or None"):
        fill_fields(["a"], QUERY_SCHEMA)


# ---------------------------------------------------------------- answers

@pytest.mark.parametrize("reply, expected", [
    ("  Paris \n", "Paris"),
    ("Answer: 7 May 2023", "7 May 2023"),
    ("**Answer:** the cello", "the cello"),
    ("Final answer: Biscuit", "Biscuit"),
    ("```\nAnswer: Clara\n```", "Clara"),
    ('"Biscuit"', "Biscuit"),
    ("Answers vary by source", "Answers vary by source"),
    ("Line one\nLine two", "Line one\nLine two"),
])
def test_clean_answer(reply, expected):
    assert clean_answer(reply) == expected

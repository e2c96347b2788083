"""The task agent's side of the memory-program contract: its three prompts and reply parsing.

A memory program steers the task agent only through its four string constants; the prompt
structure is fixed here (paper Appendix G.1). Each prompt is ONE user message whose sections are
XML-like tags on their own lines, so that an LLM and the offline task model
(mstar/offline/task_model.py) read the same thing:
    extraction: <task>extract_knowledge_item</task> <instruction> <text> <schema> + closing line
    query:      <task>formulate_query</task>        <instruction> <question> <schema> + closing
    answer:     <task>answer</task> <retrieved_memory> <question> <instruction> + closing line
With the "paper" wording (mstar.prompts) the three prompts are the paper's templates instead
(mstar/prompts/paper_agent.py); every builder takes `style=None` = mstar.prompts.current().
Everything is pure: building prompts, digging a JSON object out of a chatty reply, and turning
that object into a complete, correctly-typed record for the sandbox — with a warning for every
guess, because the reflector needs to see when the agent and the schema disagree.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import re

from mstar import prompts
from mstar.ast_guard import AST_LOCK
from mstar.program import field_types



# ---------------------------------------------------------------- prompts

def _schema_dicts(schema: list) -> list[dict]:
    """Field specs as plain dicts (FieldSpec dataclasses are accepted too), checked."""
    out = []
    for i, spec in enumerate(schema):
        if dataclasses.is_dataclass(spec) and not isinstance(spec, type):
            spec = dataclasses.asdict(spec)
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise ValueError(f"schema entry {i} is not a field spec with a 'name': {spec!r}")
        try:
            field_types.parse(spec.get("type", "str"))
        except ValueError as exc:
            raise ValueError(f"schema field {spec['name']!r}: {exc}") from None
        out.append(spec)
    return out


def _block(tag: str, body: str) -> str:
    return f"<{tag}>\n{body.strip()}\n</{tag}>"


def _user(*parts: str) -> list[dict]:
    return [{"role": "user", "content": "\n".join(parts)}]


def _paper():
    from mstar.prompts import paper_agent
    return paper_agent


def build_extraction_messages(instruction: str, raw_text: str, schema: list[dict], *,
                              style: str | None = None) -> list[dict]:
    """Prompt that turns one raw episode into a KnowledgeItem JSON object."""
    if prompts.resolve(style) == "paper":
        return _paper().extraction_messages(instruction, raw_text, _schema_dicts(schema))
    fields = json.dumps(_schema_dicts(schema), indent=1, ensure_ascii=False)
    return _user(
        "<task>extract_knowledge_item</task>",
        "You are filling in a memory record from a piece of text. Follow the instruction, "
        "read the text, and put what it asks for into the fields described by the schema.",
        _block("instruction", instruction),
        _block("text", raw_text),
        _block("schema", fields),
        "Reply with one JSON object whose keys are exactly the schema's field names, with "
        "values of the declared types. Do not add explanations, comments or code fences.",
    )


def build_query_messages(instruction: str, question: str, schema: list[dict], *,
                         style: str | None = None) -> list[dict]:
    """Prompt that turns a question into a Query JSON object for KnowledgeBase.read()."""
    if prompts.resolve(style) == "paper":
        return _paper().query_messages(instruction, question, _schema_dicts(schema))
    fields = json.dumps(_schema_dicts(schema), indent=1, ensure_ascii=False)
    return _user(
        "<task>formulate_query</task>",
        "You are preparing a lookup in a memory store so that a question can be answered. "
        "Follow the instruction and fill the fields described by the schema.",
        _block("instruction", instruction),
        _block("question", question),
        _block("schema", fields),
        "Reply with one JSON object whose keys are exactly the schema's field names. "
        "Nothing else: no prose, no code fences.",
    )



def formulation_messages(info, queries) -> list[list[dict]]:
    """The query-formulation prompt of each query (QueryItem) for a loaded program (LoadInfo
    `info`): they depend only on its INSTRUCTION_QUERY and query schema, so a coming
    evaluation's prompts can be asked ahead (mstar/iteration/rotating_prefetch.py)."""
    return [build_query_messages(info.constants["INSTRUCTION_QUERY"], q.question, info.query_schema)
            for q in queries]


def build_answer_messages(always_on: str, retrieved: str, question: str,
                          instruction: str, *, query_turns: list[dict] | None = None,
                          style: str | None = None) -> list[dict]:
    """Prompt that answers a question from what read() returned (ALWAYS_ON text in front).
    `query_turns` (the query prompt and the agent's reply) are used by the paper's wording, whose
    answer turn continues that conversation; the last message is always the answer turn."""
    if prompts.resolve(style) == "paper":
        return _paper().answer_messages(always_on, retrieved, question, instruction, query_turns)
    memory = f"{always_on}\n{retrieved}" if always_on.strip() else retrieved
    return _user(
        "<task>answer</task>",
        "Below is what your memory returned for a question. Use it to answer.",
        _block("retrieved_memory", memory),
        _block("question", question),
        _block("instruction", instruction),
        "Reply with the answer itself, without restating the question.",
    )


# ---------------------------------------------------------------- JSON replies

_FENCE_RE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.S)
_TRAILING_COMMA_RE = re.compile(r",\s*([}\]])")


def _balanced_objects(text: str, limit: int = 20):
    """Substrings that start at a '{' and end at its matching '}', in order of start.

    String-aware for both quote kinds so braces inside values do not count; an unbalanced
    start (truncated reply) yields the text up to the last '}' instead.
    """
    starts = [m.start() for m in re.finditer(r"\{", text)][:limit]
    for start in starts:
        depth, quote, escaped = 0, None, False
        for i in range(start, len(text)):
            ch = text[i]
            if quote:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == quote:
                    quote = None
            elif ch in "\"'":
                quote = ch
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    yield text[start:i + 1]
                    break
        else:
            end = text.rfind("}")
            if end > start:
                yield text[start:end + 1]


def _loads_repaired(candidate: str) -> tuple[object, str | None]:
    """json.loads, then with trailing commas removed, then as a Python literal (single quotes,
    True/False/None). Raises ValueError when nothing works."""
    try:
        return json.loads(candidate), None
    except json.JSONDecodeError:
        pass
    fixed = _TRAILING_COMMA_RE.sub(r"\1", candidate)
    try:
        return json.loads(fixed), "removed trailing commas"
    except json.JSONDecodeError:
        pass
    try:
        return _python_literal(fixed), "read single-quoted / Python-style JSON"
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise ValueError("not parseable") from None


class _JsonNames(ast.NodeTransformer):
    """Maps the bare names true/false/null to constants, so mixed JSON/Python literals parse."""
    _VALUES = {"true": True, "false": False, "null": None}

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in self._VALUES:
            return ast.copy_location(ast.Constant(self._VALUES[node.id]), node)
        return node


def _python_literal(text: str) -> object:
    """A Python literal (dict/list/str/number/bool/None) — never code: literal_eval refuses
    anything else."""
    with AST_LOCK:
        tree = _JsonNames().visit(ast.parse(text.strip(), mode="eval"))
        return ast.literal_eval(tree)


def parse_json_object(reply: str) -> tuple[dict | None, str | None]:
    """The JSON object in an LLM reply, leniently: (object, warning) or (None, reason).

    Accepts code fences, prose around the object, trailing commas and single quotes when the
    result is still unambiguous (i.e. it parses). The warning says what had to be repaired.
    """
    text = (reply or "").strip()
    if not text:
        return None, "reply was empty"
    notes: list[str] = []
    candidates: list[tuple[str, str | None]] = [(text, None)]
    candidates += [(block.strip(), "took the JSON from a code fence")
                   for block in _FENCE_RE.findall(text)]
    candidates += [(obj, "ignored text around the JSON object")
                   for obj in _balanced_objects(text)]
    for candidate, how in candidates:
        try:
            value, repair = _loads_repaired(candidate)
        except ValueError:
            continue
        if isinstance(value, list) and len(value) == 1 and isinstance(value[0], dict):
            value, how = value[0], "reply was a list holding one object; used the object"
        if not isinstance(value, dict):
            notes.append(f"reply JSON is a {type(value).__name__}, not an object")
            continue
        if not all(isinstance(k, str) for k in value):
            continue
        warning = "; ".join(w for w in (how, repair) if w) or None
        return value, warning
    return None, notes[0] if notes else "reply was not JSON"


# ---------------------------------------------------------------- schema filling

def field_default(spec: dict):
    """The value a missing field gets: its declared default, else the zero of its type."""
    default = spec.get("default")
    ft = field_types.parse(spec.get("type", "str"))
    if default is None and not ft.optional:
        return ft.zero()
    return json.loads(json.dumps(default)) if isinstance(default, (list, dict)) else default  # a fresh copy


def fill_fields(obj: dict | None, schema: list[dict]) -> tuple[dict, list[str]]:
    """A record with every schema field, of its declared type, plus one warning per guess."""
    specs = _schema_dicts(schema)
    warnings: list[str] = []
    failed = obj is None
    if failed:
        warnings.append("reply was not JSON; used defaults")
        obj = {}
    elif not isinstance(obj, dict):
        raise ValueError(f"fill_fields needs a dict or None, got {type(obj).__name__}")
    out: dict = {}
    for spec in specs:
        name, ftype = spec["name"], spec.get("type", "str")
        default = field_default(spec)
        shown = json.dumps(default, ensure_ascii=False)
        if name not in obj:
            if not failed:  # when the whole reply failed, one warning says it all
                warnings.append(f"field {name!r} missing; used default {shown}")
            out[name] = default
            continue
        ft = field_types.parse(ftype)
        if obj[name] is None and not (ft.optional or ft.kind == "any"):
            warnings.append(f"field {name!r} was null; used default {shown}")
            out[name] = default
            continue
        try:
            out[name], note = field_types.coerce(obj[name], ft)
        except ValueError as exc:
            warnings.append(f"field {name!r}: {exc}; used default {shown}")
            out[name] = default
            continue
        if note:
            warnings.append(f"field {name!r}: {note}")
    known = {spec["name"] for spec in specs}
    for key in obj:
        if key not in known:
            warnings.append(f"unknown field {key!r} dropped")
    return out, warnings


# ---------------------------------------------------------------- answers

_ANSWER_PREFIX_RE = re.compile(r"^\s*(?:\*\*|__)?\s*(?:final\s+)?answer\s*(?:\*\*|__)?\s*[:：-]"
                               r"\s*(?:\*\*|__)?\s*", re.I)


def clean_answer(reply: str) -> str:
    """The answer text of a reply: stripped, without code fences or 'Answer:' prefixes."""
    text = (reply or "").strip()
    fenced = re.fullmatch(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?```", text, re.S)
    if fenced:
        text = fenced.group(1).strip()
    previous = None
    while previous != text:
        previous = text
        text = _ANSWER_PREFIX_RE.sub("", text, count=1).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'" and text.count(text[0]) == 2:
        text = text[1:-1].strip()
    return text

"""Engine side: what a worker sends about its program, checked again as untrusted data.

The worker measures a program's schema and constants before it sends them, but it runs program
code, so what it measured need not be what arrives. A program's hashable dict subclass used as a
field default serialised to a few bytes when the loader measured it and to 3.5 MB when the reply
was encoded, and the engine put that default into every extraction and query prompt (issue 16).
A worker a program has subverted could send any JSON at all. So the engine checks the JSON it
actually received, with the contract's own caps (sandbox.contract), before any of it reaches a
prompt, a run file or a terminal:

    check_load_reply(reply)          the load reply's schemas and constants; returns
                                     ReceivedLoad(knowledge_item_schema, query_schema, constants,
                                     warnings) with clean copies, or raises SandboxError (stage
                                     import, gate interface, the loader's own rule names)
    check_logs(lines, limits)        one op's log lines: cut to the caps, never refused
    check_str_list(value)            short lists of short strings (layer names, layer warnings)
    read_output_problem(output, n)   what is wrong with a read's output (not a str, too long), or None

A field without a description is accepted (the paper's engine treats it as optional) and named
in `warnings`, each starting "contract:", for the reflector. Pure functions, no I/O.
"""
from __future__ import annotations

import json
import math
from typing import Any, NamedTuple

from sandbox.contract import (CONSTANT_NAMES, KNOWLEDGE_ITEM, MAX_CONSTANT_CHARS, MAX_DEFAULT_DEPTH,
                              MAX_DEFAULT_JSON_CHARS, MAX_DESCRIPTION_CHARS, MAX_FIELDS, QUERY, field_types)
from sandbox.protocol import SandboxError, SandboxLimits, Verdict, json_depth

# The worker's per-op line cap (sandbox.worker.toolkit.MAX_LOG_LINES; the engine does not import
# worker code, a test keeps the two equal).
MAX_LOG_LINES = 2000
MAX_FIELD_NAME_CHARS = 200
LOG_SLACK_CHARS = 200  # the worker's own "[cut ...]" and "[n more dropped]" notes
WARNING_PREFIX = "contract:"
_SPEC_KEYS = ("name", "type", "description", "default", "required")


class ReceivedLoad(NamedTuple):
    knowledge_item_schema: list[dict]
    query_schema: list[dict]
    constants: dict[str, str]
    warnings: list[str]  # "contract: ..." notes for the reflector (e.g. a field without a description)


def check_load_reply(reply: dict[str, Any]) -> ReceivedLoad:
    """Re-validate a successful load reply against the contract's caps (the same for every
    session). Everything returned is a fresh plain copy holding only the keys the engine uses.
    Raises SandboxError listing every problem found."""
    problems: list[tuple[str, str]] = []  # (rule, message)
    warnings: list[str] = []
    schemas = [_check_schema(reply.get(key), cls, problems, warnings)
               for key, cls in (("knowledge_item_schema", KNOWLEDGE_ITEM), ("query_schema", QUERY))]
    constants = _check_constants(reply.get("constants"), problems)
    if problems:
        rule = problems[0][0]
        message = "\n".join(f"{text} (as received by the engine)" for _, text in problems)
        raise SandboxError(Verdict(False, "import", "interface", rule, message[:4000]))
    return ReceivedLoad(schemas[0], schemas[1], constants, warnings)


def _json_size(value: Any) -> int | None:
    """Characters of `value` as JSON, measured the way the loader measures (json.dumps defaults)."""
    try:
        return len(json.dumps(value))
    except (TypeError, ValueError, RecursionError):
        return None


def _check_schema(value: Any, cls: str, problems: list, warnings: list) -> list[dict]:
    if not isinstance(value, list):
        problems.append(("bad_schema", f"{cls}: the schema is a {type(value).__name__}, not a list"))
        return []
    if not value:
        problems.append(("no_fields", f"{cls} has no fields the task agent can fill"))
    if len(value) > MAX_FIELDS:
        problems.append(("too_many_fields", f"{cls} has {len(value)} fields; the limit is {MAX_FIELDS}"))
        return []
    out, seen = [], set()
    for i, spec in enumerate(value):
        clean = _check_field(spec, f"{cls} field {i}", cls, problems, warnings)
        if clean is None:
            continue
        if clean["name"] in seen:
            problems.append(("bad_schema", f"{cls}.{clean['name']}: the field appears twice"))
            continue
        seen.add(clean["name"])
        out.append(clean)
    return out


def _check_field(spec: Any, label: str, cls: str, problems: list, warnings: list) -> dict | None:
    if not isinstance(spec, dict):
        problems.append(("bad_schema", f"{label}: a {type(spec).__name__}, not a field spec"))
        return None
    name = spec.get("name")
    if not (isinstance(name, str) and name.isidentifier() and len(name) <= MAX_FIELD_NAME_CHARS):
        shown = repr(name)[:60] if isinstance(name, str) else type(name).__name__
        problems.append(("field_name", f"{label}: the name {shown} is not a short identifier"))
        return None
    where = f"{cls}.{name}"
    if name.startswith("_"):
        problems.append(("field_name", f"{where}: field names must not start with '_'"))
    ok = True
    try:
        type_name = field_types.parse(spec.get("type")).name if isinstance(spec.get("type"), str) else None
    except ValueError:
        type_name = None
    if type_name is None:
        problems.append(("field_type", f"{where}: the type {str(spec.get('type'))[:80]!r} is not a field type; "
                         f"{field_types.HINT}"))
        ok = False
    description = spec.get("description", "")
    if not isinstance(description, str):
        problems.append(("description_not_str", f"{where}: the description is a {type(description).__name__}"))
        ok = False
    elif len(description) > MAX_DESCRIPTION_CHARS:
        problems.append(("description_too_long", f"{where}: the description has {len(description)} "
                         f"characters; the limit is {MAX_DESCRIPTION_CHARS}"))
        ok = False
    elif not description.strip():
        warnings.append(f'{WARNING_PREFIX} {where} has no description, so the task model sees only its name and '
                        'type; add field(..., metadata={"description": "..."}) saying what goes in it')
    required = spec.get("required", False)
    if type(required) is not bool:
        problems.append(("bad_schema", f"{where}: 'required' is a {type(required).__name__}, not a bool"))
        ok = False
    default = spec.get("default")
    size = _json_size(default)
    if size is None:
        problems.append(("default_too_large", f"{where}: the default cannot be measured as JSON"))
        ok = False
    elif size > MAX_DEFAULT_JSON_CHARS:
        problems.append(("default_too_large", f"{where}: the default is {size} characters as JSON; "
                         f"the limit is {MAX_DEFAULT_JSON_CHARS}"))
        ok = False
    elif json_depth(default, MAX_DEFAULT_DEPTH) > MAX_DEFAULT_DEPTH:
        problems.append(("default_too_deep", f"{where}: the default nests lists or dicts more than "
                         f"{MAX_DEFAULT_DEPTH} deep"))
        ok = False
    if not ok:
        return None
    return {"name": name, "type": type_name, "description": description,
            "default": json.loads(json.dumps(default)), "required": required}


def _check_constants(value: Any, problems: list) -> dict[str, str]:
    if not isinstance(value, dict):
        problems.append(("constant_not_str", f"the constants are a {type(value).__name__}, not a dict"))
        return {}
    out = {}
    for name in CONSTANT_NAMES:
        text = value.get(name)
        if name not in value:
            problems.append(("missing_constant", f"module-level string constant {name} is missing"))
        elif not isinstance(text, str):
            problems.append(("constant_not_str", f"{name} must be a str, got {type(text).__name__}"))
        elif len(text) > MAX_CONSTANT_CHARS:
            problems.append(("constant_too_long", f"{name} has {len(text)} characters; the limit is "
                             f"{MAX_CONSTANT_CHARS} (it goes into every prompt)"))
        else:
            out[name] = text
    return out


def check_logs(lines: Any, limits: SandboxLimits) -> list[str]:
    """One op's log lines as received, cut to the caps the worker's LogSink promises: at most
    MAX_LOG_LINES lines plus one note, and `limits.max_log_chars` characters (plus room for the
    worker's own notes). Non-str entries are dropped. Never raises: logs are diagnostics."""
    if not isinstance(lines, list):
        return []
    budget = limits.max_log_chars + LOG_SLACK_CHARS
    out: list[str] = []
    used = dropped = 0
    for line in lines:
        if type(line) is not str:
            dropped += 1
            continue
        if len(out) > MAX_LOG_LINES or used >= budget:  # the worker's own note may be line MAX_LOG_LINES + 1
            dropped += 1
            continue
        if len(line) > budget - used:
            line = line[:budget - used] + " [cut by the engine]"
            used = budget
        else:
            used += len(line)
        out.append(line)
    if dropped:
        out = out[:MAX_LOG_LINES]
        out.append(f"[engine: {dropped} more log lines dropped: the worker sent more than the per-op caps]")
    return out


def check_str_list(value: Any, max_items: int = 64, max_chars: int = 500) -> list[str]:
    """A short list of short strings (a worker's layer names or layer warnings), cut to size."""
    if not isinstance(value, list):
        return []
    return [v[:max_chars] for v in value if type(v) is str][:max_items]


def reported_cpu(value: Any, seconds: float) -> float:
    """The CPU seconds a worker reports for one op, kept within what is possible: a finite number
    between 0 and the op's wall time (one thread cannot use more); anything else counts as 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0.0
    return min(max(float(value), 0.0), max(seconds, 0.0))


def read_output_problem(output: Any, limit: int) -> Verdict | None:
    if type(output) is not str:
        return Verdict(False, "read", "contract", "read output not str", f"read() returned {type(output).__name__}, not str")
    if len(output) > limit:
        return Verdict(False, "read", "limits", "read output too long",
                       f"read() returned {len(output)} characters; the limit is {limit}")
    return None

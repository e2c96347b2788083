"""sandbox.engine.received: the engine checks what a worker sends as untrusted data (issue 16).

Directly: crafted load replies and log lists, as a subverted worker could send them. End to end:
the growing schema default (tests/hostile/h170) through a real worker, prompt sizes measured on
the prompts mstar's task agent would build; a fake worker that sends a 3.5 MB default; a program
without field descriptions, accepted with a warning.

WIRING: `start_checked` below applies `check_load_reply` to what `ProgramSession.start()` returned,
exactly as start() will once it calls it on the reply itself. Applying it twice is harmless (the
check is idempotent), so these tests hold before and after the wiring; once wired, `start_checked`
can become plain `session.start()`.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mstar.agent import build_extraction_messages, build_query_messages
from sandbox.contract import CONSTANT_NAMES, MAX_DEFAULT_JSON_CHARS, MAX_DESCRIPTION_CHARS, MAX_FIELDS
from sandbox.engine import received
from sandbox.engine.gates import run_gates
from sandbox.engine.launch import ENGINE_ROOT
from sandbox.engine.received import check_load_reply, check_logs, check_str_list
from sandbox.engine.session import ProgramSession, SandboxError, SandboxLimits
from sandbox.worker import toolkit

HERE = Path(__file__).parent
GROWS = (HERE / "hostile" / "h170_schema_default_grows.py").read_text()
LIMITS = SandboxLimits(call_timeout_s=20.0)
CONSTANTS = {name: f"{name.lower()} text" for name in CONSTANT_NAMES}


def spec(name="text", type="str", description="the text", default="", required=False, **extra):
    return {"name": name, "type": type, "description": description, "default": default,
            "required": required, **extra}


def reply(item=None, query=None, constants=None, **extra):
    return {"op": "result", "ok": True, "knowledge_item_schema": [spec()] if item is None else item,
            "query_schema": [spec("q")] if query is None else query,
            "constants": dict(CONSTANTS) if constants is None else constants, **extra}


def refusal(data) -> tuple[str, str]:
    with pytest.raises(SandboxError) as err:
        check_load_reply(data)
    v = err.value.verdict
    assert (v.ok, v.stage, v.gate) == (False, "import", "interface")
    assert "as received by the engine" in v.message
    return v.rule, v.message


def start_checked(session: ProgramSession):
    """WIRING: session.start() with the engine-side check applied to what it received."""
    info = session.start()
    checked = check_load_reply({"knowledge_item_schema": info.knowledge_item_schema,
                                "query_schema": info.query_schema, "constants": info.constants})
    info.knowledge_item_schema, info.query_schema, info.constants = checked[:3]
    info.warnings = list(dict.fromkeys([*info.warnings, *checked.warnings]))
    return info


# ------------------------------------------------------------------------ the load reply, directly

def test_a_good_reply_comes_back_as_clean_copies():
    data = reply(item=[spec(default={"k": [1, 2]}, smuggled="x" * 100_000)])
    data["constants"]["EXTRA"] = "y" * 100_000
    checked = check_load_reply(data)
    assert checked.knowledge_item_schema == [spec(default={"k": [1, 2]})]  # unknown keys dropped
    assert checked.constants == CONSTANTS and checked.warnings == []
    assert checked.knowledge_item_schema[0]["default"] is not data["knowledge_item_schema"][0]["default"]
    assert check_load_reply(checked._asdict()) == checked  # idempotent: safe to apply twice


def test_a_default_grown_to_megabytes_is_refused_on_the_bytes_received():
    big = {"k": "x" * 3_500_000}  # what h170's dict subclass serialised to the second time
    rule, message = refusal(reply(item=[spec(), spec("extra", "dict[str, Any]", default=big)]))
    assert rule == "default_too_large"
    assert f"KnowledgeItem.extra: the default is 3500009 characters as JSON; the limit is {MAX_DEFAULT_JSON_CHARS}" in message
    assert len(message) < 1000  # the verdict names the size, it does not carry the default


@pytest.mark.parametrize("data,rule,needle", [
    (reply(item=[spec(description="d" * (MAX_DESCRIPTION_CHARS + 1))]), "description_too_long", "KnowledgeItem.text"),
    (reply(query=[spec("q", description=["not", "str"])]), "description_not_str", "Query.q"),
    (reply(item=[spec(type="set[str]")]), "field_type", "KnowledgeItem.text: the type 'set[str]'"),
    (reply(item=[spec(type=7)]), "field_type", "KnowledgeItem.text"),
    (reply(item=[spec(name="_hidden")]), "field_name", "must not start with '_'"),
    (reply(item=[spec(name="two words")]), "field_name", "not a short identifier"),
    (reply(item=[spec(name="n" * 500)]), "field_name", "not a short identifier"),
    (reply(item=[spec(), spec()]), "bad_schema", "KnowledgeItem.text: the field appears twice"),
    (reply(item=[spec(required="yes")]), "bad_schema", "'required' is a str"),
    (reply(item=["text"]), "bad_schema", "a str, not a field spec"),
    (reply(item={"name": "text"}), "bad_schema", "KnowledgeItem: the schema is a dict"),
    (reply(item=[]), "no_fields", "KnowledgeItem has no fields"),
    (reply(item=[spec(f"f{i}") for i in range(MAX_FIELDS + 1)]), "too_many_fields", f"limit is {MAX_FIELDS}"),
    (reply(constants={**CONSTANTS, "ALWAYS_ON_KNOWLEDGE": "z" * 10_001}), "constant_too_long", "ALWAYS_ON_KNOWLEDGE has 10001"),
    (reply(constants={**CONSTANTS, "INSTRUCTION_QUERY": 3}), "constant_not_str", "INSTRUCTION_QUERY must be a str"),
    (reply(constants={k: v for k, v in CONSTANTS.items() if k != "INSTRUCTION_RESPONSE"}), "missing_constant",
     "INSTRUCTION_RESPONSE is missing"),
    (reply(constants="all of them"), "constant_not_str", "the constants are a str"),
])
def test_every_malformed_or_oversize_part_is_refused(data, rule, needle):
    got, message = refusal(data)
    assert got == rule and needle in message, message


def test_every_problem_is_listed_in_one_verdict():
    rule, message = refusal(reply(item=[spec(type="set"), spec("b", default="x" * 5000)], constants={}))
    assert rule == "field_type"
    assert "KnowledgeItem.b: the default" in message and "INSTRUCTION_QUERY is missing" in message


def test_a_field_without_a_description_is_accepted_with_a_warning():
    checked = check_load_reply(reply(item=[spec(description=""), spec("tags", "list[str]", description="   ")],
                                     query=[{"name": "q", "type": "str", "default": "", "required": False}]))
    assert [s["description"] for s in checked.knowledge_item_schema] == ["", "   "]
    assert checked.query_schema[0]["description"] == ""
    assert [w.split(" has ")[0] for w in checked.warnings] == [
        "contract: KnowledgeItem.text", "contract: KnowledgeItem.tags", "contract: Query.q"]
    assert all('metadata={"description": "..."}' in w for w in checked.warnings)


# ------------------------------------------------------------------------ logs and short lists

def test_logs_are_cut_to_the_caps_on_what_was_received():
    limits = SandboxLimits(max_log_chars=1000)
    assert check_logs(["a", "b"], limits) == ["a", "b"]
    assert check_logs("not a list", limits) == [] and check_logs(None, limits) == []
    flood = check_logs(["x" * 500] * 5, limits)  # the budget is 1000 + LOG_SLACK_CHARS = 1200
    assert [len(line) for line in flood[:2]] == [500, 500] and flood[2] == "x" * 200 + " [cut by the engine]"
    assert len(flood) == 4 and flood[3].startswith("[engine: 2 more log lines dropped")
    assert sum(map(len, flood)) <= 1000 + received.LOG_SLACK_CHARS + 120
    lines = check_logs([""] * 10_000, limits)
    assert len(lines) == received.MAX_LOG_LINES + 1 and lines[-1].startswith("[engine: 7999 more")
    mixed = check_logs(["ok", 3, {"x": 1}, None, "fine"], limits)
    assert mixed[:2] == ["ok", "fine"] and "3 more log lines dropped" in mixed[-1]


def test_a_worker_capped_log_passes_unchanged():
    """What the worker's own LogSink sends at its caps is not cut again."""
    sink = toolkit.LogSink(8000)
    for _ in range(5000):
        sink.add("")
    sent = sink.take()
    assert check_logs(sent, SandboxLimits(max_log_chars=8000)) == sent
    sink = toolkit.LogSink(8000)
    for _ in range(20):
        sink.add("y" * 1000)
    sent = sink.take()
    assert check_logs(sent, SandboxLimits(max_log_chars=8000)) == sent
    assert received.MAX_LOG_LINES == toolkit.MAX_LOG_LINES


def test_str_lists_are_short_lists_of_short_strings():
    assert check_str_list(["seccomp", 3, "x" * 900] + ["y"] * 100) == ["seccomp", "x" * 500] + ["y"] * 62
    assert check_str_list({"a": 1}) == []


# ------------------------------------------------------------------------ end to end

def test_growing_default_through_a_real_worker_leaves_prompts_small():
    """h170: the loader measures a copy and sends that copy; the engine's check passes it; the task
    agent's prompts stay small. Before the fix this schema carried 3.5 MB into every prompt."""
    with ProgramSession(GROWS, limits=LIMITS) as session:
        info = start_checked(session)
        session.write({"text": "hello", "extra": {}}, "hello")
        assert session.read({"question": "q"}).output == "notes: 1"
    [extra] = [s for s in info.knowledge_item_schema if s["name"] == "extra"]
    assert extra["default"] == {"k": "small"}
    extraction = build_extraction_messages(info.constants["INSTRUCTION_KNOWLEDGE_ITEM"], "raw text",
                                           info.knowledge_item_schema)
    query = build_query_messages(info.constants["INSTRUCTION_QUERY"], "a question", info.query_schema)
    assert sum(len(m["content"]) for m in extraction) < 3000
    assert sum(len(m["content"]) for m in query) < 3000


FAKE_WORKER = r'''
import sys
sys.path.insert(0, sys.argv[1])
from sandbox.protocol import recv_frame, send_frame
args = sys.argv[2:]
in_fd, out_fd = int(args[args.index("--in-fd") + 1]), int(args[args.index("--out-fd") + 1])
send_frame(out_fd, {"op": "ready", "layers": [], "warnings": []})
schema = [{"name": "text", "type": "str", "description": "t", "default": "", "required": False},
          {"name": "extra", "type": "dict[str, Any]", "description": "e", "default": {"k": "x" * 3_500_000},
           "required": False}]
constants = {n: "c" for n in ("INSTRUCTION_KNOWLEDGE_ITEM", "INSTRUCTION_QUERY", "INSTRUCTION_RESPONSE",
                              "ALWAYS_ON_KNOWLEDGE")}
while True:
    request = recv_frame(in_fd)
    send_frame(out_fd, {"op": "result", "id": request.get("id", 0), "ok": True, "output": "ok", "logs": [],
                        "knowledge_item_schema": schema, "query_schema": schema[:1], "constants": constants,
                        "layers": [], "warnings": []})
'''


class SubvertedWorkerLauncher:
    """A 'worker' that speaks the protocol but lies: a 3.5 MB schema default, as a subverted worker could send."""

    def launch(self, worker_args, *, env, cwd, pass_fds):
        return subprocess.Popen([sys.executable, "-I", "-c", FAKE_WORKER, ENGINE_ROOT, *worker_args],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=True, pass_fds=pass_fds)


def test_a_subverted_worker_cannot_put_megabytes_into_the_schema():
    with ProgramSession("unused", limits=LIMITS, launcher=SubvertedWorkerLauncher()) as session:
        with pytest.raises(SandboxError) as err:
            start_checked(session)
    v = err.value.verdict
    assert (v.stage, v.gate, v.rule) == ("import", "interface", "default_too_large")
    assert "KnowledgeItem.extra: the default is 3500009 characters" in v.message


NO_DESCRIPTIONS = '''
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Write down the facts."
INSTRUCTION_QUERY = "Ask for the fact."
INSTRUCTION_RESPONSE = "Answer briefly."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    content: str = ""
    tags: list[str] = field(default_factory=list)


@dataclass
class Query:
    query_text: str = field(default="")


class KnowledgeBase:
    def __init__(self, toolkit):
        self.items = []

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.items.append(item.content)

    def read(self, query: Query) -> str:
        return "\\n".join(self.items)[-2000:]
'''


def test_a_program_without_field_descriptions_passes_every_gate_with_a_warning():
    report = run_gates(NO_DESCRIPTIONS, allowed_imports=("dataclasses",), limits=LIMITS, llm=lambda m: "r")
    assert report.ok, report.error
    with ProgramSession(NO_DESCRIPTIONS, allowed_imports=("dataclasses",), limits=LIMITS) as session:
        info = start_checked(session)
    assert [s["description"] for s in info.knowledge_item_schema + info.query_schema] == ["", "", ""]
    notes = [w for w in info.warnings if w.startswith("contract:")]
    assert [w.split(" has ")[0] for w in notes] == [
        "contract: KnowledgeItem.content", "contract: KnowledgeItem.tags", "contract: Query.query_text"]
    assert json.dumps(info.knowledge_item_schema)  # plain JSON, ready for the task agent's prompt


# ------------------------------------------------------------------------ depth (issue 30, finding 1)

DEEP = HERE / "hostile" / "h172_default_nested_940_deep.py"


def nested(depth: int):
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_a_default_nested_deeper_than_the_cap_is_refused_on_what_was_received():
    from sandbox.contract import MAX_DEFAULT_DEPTH
    assert check_load_reply(reply(item=[spec(type="Any", default=nested(MAX_DEFAULT_DEPTH))]))
    rule, message = refusal(reply(item=[spec(type="Any", default=nested(MAX_DEFAULT_DEPTH + 1))]))
    assert rule == "default_too_deep" and f"more than {MAX_DEFAULT_DEPTH} deep" in message


def test_a_frame_nested_past_the_frame_cap_is_refused_as_it_is_decoded():
    from sandbox.protocol import MAX_FRAME_DEPTH, FrameError, decode_body, json_depth
    assert json_depth(nested(940)) == 940 and json_depth({"a": [1, {"b": []}]}) == 4 and json_depth("x") == 0
    ok = json.dumps({"op": "result", "x": nested(MAX_FRAME_DEPTH - 1)}).encode()
    assert decode_body(ok)["op"] == "result"
    with pytest.raises(FrameError, match="more than"):
        decode_body(json.dumps({"op": "result", "x": nested(MAX_FRAME_DEPTH)}).encode())


def test_the_checker_gives_a_json_verdict_for_a_940_deep_default(tmp_path):
    """Before: the worker and the engine passed the default, then `--json` died with a RecursionError
    in GateReport.to_dict (exit 1, a traceback, no verdict) while text mode printed `ok: True`."""
    root = HERE.parent
    proc = subprocess.run([sys.executable, "-m", "sandbox", str(DEEP), "--json"], cwd=root, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    verdict = json.loads(proc.stdout)["verdict"]
    assert (verdict["stage"], verdict["gate"], verdict["rule"]) == ("import", "interface", "default_too_deep")
    text = subprocess.run([sys.executable, "-m", "sandbox", str(DEEP)], cwd=root, capture_output=True, text=True,
                          timeout=120)
    assert text.returncode == 1 and text.stdout.startswith("ok: False"), text.stdout[:300]


def test_evolve_refuses_the_deep_default_seed_in_one_line(tmp_path):
    """Before: the seed passed the gates and `mstar evolve` died in EvalResult.to_dict."""
    proc = subprocess.run([sys.executable, "-m", "mstar.cli", "evolve", "--task", "sample", "--size", "0.3",
                           "--static-size", "4", "--seeds", str(DEEP), "--iterations", "1", "--quiet",
                           "--out", str(tmp_path / "run")], cwd=HERE.parent, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    [line] = [l for l in proc.stderr.splitlines() if l.strip()]
    assert "does not pass the sandbox's gates" in line and "default_too_deep" in line

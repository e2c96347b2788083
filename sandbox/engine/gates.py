"""The gates a child program must pass before it is scored.

    static / compile / import   sandbox.worker.loader, inside the worker (ProgramSession.start)
    init                        KnowledgeBase(toolkit), inside the worker
    smoke                       writes of mock items built from the program's own schema and a
                                small built-in corpus, then reads; each read must return a str
                                of at most read_max_chars within the time limit

`run_gates` returns a `GateReport` whatever happens (it never raises for a bad program):
`ok`, the failing `stage`, an `error` text the reflector can act on, the full `verdict`,
what the reads returned, logs and toolkit LLM calls labelled by window ("write#0", "read#1"),
per window how many calls the engine refused as over budget (`llm_refused`), and the load's
`warnings` (e.g. "contract: KnowledgeItem.text has no description ...").
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

from sandbox.contract import field_types
from sandbox.engine.session import ProgramSession, SandboxError, SandboxLimits

LLMFn = Callable[[list[dict]], str]
_PREVIEW_CHARS = 1000

# Short dated conversation snippets (invented) that exercise dates, names, and lists.
MOCK_CORPUS: tuple[dict[str, str], ...] = (
    {"date": "2023-05-08", "speakers": "Caroline, Melanie",
     "text": "[2023-05-08] Caroline: I went to a support group yesterday and it really helped.\n"
             "Melanie: That's wonderful! I painted a sunrise over the lake last weekend."},
    {"date": "2023-06-14", "speakers": "Caroline, Melanie",
     "text": "[2023-06-14] Melanie: We took the kids camping near the river.\n"
             "Caroline: Sounds fun. I started reading a book about adoption agencies."},
    {"date": "2023-07-02", "speakers": "Jon, Gina",
     "text": "[2023-07-02] Jon: I lost my job at the bank, so I'm opening a dance studio.\n"
             "Gina: Brave move! My clothing store got its first online order today."},
    {"date": "2023-08-19", "speakers": "Jon, Gina",
     "text": "[2023-08-19] Gina: The store had a pop-up at the mall on Saturday.\n"
             "Jon: The studio's first class had twelve students."},
)
MOCK_QUESTIONS = (
    "When did Caroline go to the support group?",
    "What is Jon opening after losing his job?",
    "What did Melanie paint?",
)
_DATE_WORDS = ("date", "time", "when", "day", "timestamp")


@dataclass
class GateReport:
    ok: bool
    stage: str                          # the failing stage, or "ok"
    error: str | None                   # "[stage/gate/rule] line N: message" (for the reflector)
    verdict: dict                       # ok, stage, gate, rule, message, line
    read_outputs: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    llm_calls: list[dict] = field(default_factory=list)   # window, messages (previews), reply|error
    llm_refused: list[dict] = field(default_factory=list)  # window, count: calls the engine refused
    layers: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)     # accepted, but worth a look (LoadInfo.warnings)
    seconds: float = 0.0
    load_info: Any = field(default=None, repr=False)     # the LoadInfo of the load (schemas, constants)

    def to_dict(self) -> dict:
        out = asdict(self)
        out.pop("load_info", None)   # the engine's business; the report's readers have the rest
        return out

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, **kwargs)


def _value_for(spec: dict, text: str, date: str, index: int, words: list[str]) -> Any:
    """A plausible value for one schema field: what a task agent might have extracted."""
    try:
        ft = field_types.parse(spec.get("type", "str"))
    except ValueError:
        return None
    name = str(spec.get("name", "")).lower()
    datey = any(w in name for w in _DATE_WORDS)
    return _mock_value(ft, text, date if datey else text, index, words)


def _mock_value(ft: "field_types.FieldType", text: str, str_value: str, index: int, words: list[str]) -> Any:
    kind = ft.kind  # an Optional gets a value too: the smoke test checks a program works, not its edge cases
    if kind in ("str", "any"):
        return str_value
    if kind == "int":
        return index + 1
    if kind == "float":
        return 0.5
    if kind == "bool":
        return index % 2 == 1
    if kind == "list":
        if ft.item.kind in ("str", "any"):
            return list(words)
        return [_mock_value(ft.item, text, word, i, [word]) for i, word in enumerate(words[:3])]
    return {word: _mock_value(ft.item, text, word, index, [word]) for word in words[:3]}  # dict


def mock_item(schema: list[dict], snippet: dict[str, str], index: int) -> dict:
    lines = [line.split(": ", 1)[-1] for line in snippet["text"].splitlines()]
    return {spec["name"]: _value_for(spec, " ".join(lines), snippet["date"], index,
                                     [s.strip() for s in snippet["speakers"].split(",")] + lines[:1])
            for spec in schema if isinstance(spec, dict) and "name" in spec}


def mock_query(schema: list[dict], question: str, index: int) -> dict:
    keywords = [w.strip("?") for w in question.split() if len(w) > 3]
    out = {}
    for spec in schema:
        if not (isinstance(spec, dict) and "name" in spec):
            continue
        out[spec["name"]] = (5 if spec.get("type") == "int" else
                             _value_for(spec, question, "2023-05-08", index, keywords))
    return out


def _verdict_dict(verdict: Any) -> dict:
    return {"ok": bool(verdict.ok), "stage": verdict.stage, "gate": verdict.gate,
            "rule": verdict.rule, "message": verdict.message, "line": verdict.line}


def _error_text(v: dict) -> str:
    message = str(v.get("message") or "")
    if v.get("line") and not message.startswith("line "):
        message = f"line {v['line']}: {message}"
    return f"[{v['stage']}/{v['gate']}/{v['rule']}] {message}"


def _preview(text: str) -> str:
    return text if len(text) <= _PREVIEW_CHARS else text[:_PREVIEW_CHARS] + f"... [{len(text)} chars]"


def run_gates(source: str, *, allowed_imports: Sequence[str], limits: SandboxLimits,
              llm: LLMFn | None, writes: int = len(MOCK_CORPUS),
              reads: int = len(MOCK_QUESTIONS),
              close: Callable[[ProgramSession], None] | None = None) -> GateReport:
    """Run every gate on `source` in a fresh worker; never raises for a bad program. `close`
    disposes of the worker when the gates are done (default: `session.close()` before returning;
    an engine that closes workers in the background passes its own, so that the verdict does not
    wait for the worker's kill, reap and clean-up)."""
    started = time.monotonic()
    report = GateReport(ok=False, stage="static", error=None, verdict={})
    window = ["load"]

    def recording_llm(messages: list[dict]) -> str:
        call = {"window": window[0],
                "messages": [{"role": m.get("role"), "content": _preview(str(m.get("content", "")))}
                             for m in messages]}
        report.llm_calls.append(call)
        if llm is None:
            call["error"] = "no toolkit LLM is configured"
            raise RuntimeError(call["error"])
        try:
            reply = llm(messages)
        except Exception as exc:
            call["error"] = f"{type(exc).__name__}: {exc}"
            raise
        call["reply"] = _preview(reply) if isinstance(reply, str) else repr(reply)
        return reply

    def add_logs(label: str, lines: list[str]) -> None:
        report.logs.extend(f"[{label}] {line}" for line in lines)

    def add_refused(label: str, result: Any) -> None:
        count = getattr(result, "llm_refused", 0)
        if count:  # over the per-op budget: the program got an exception, the LLM never saw them
            report.llm_refused.append({"window": label, "count": int(count)})

    session = ProgramSession(source, allowed_imports=allowed_imports, limits=limits, llm=recording_llm)
    try:
        info = session.start()
        report.layers = list(info.layers)
        report.warnings = list(info.warnings)
        report.load_info = info
        add_logs("load", info.logs)
        for i in range(writes):
            snippet = MOCK_CORPUS[i % len(MOCK_CORPUS)]
            window[0] = f"write#{i}"
            result = session.write(mock_item(info.knowledge_item_schema, snippet, i), snippet["text"])
            add_logs(window[0], result.logs)
            add_refused(window[0], result)
        for i in range(reads):
            window[0] = f"read#{i}"
            result = session.read(mock_query(info.query_schema, MOCK_QUESTIONS[i % len(MOCK_QUESTIONS)], i))
            add_logs(window[0], result.logs)
            add_refused(window[0], result)
            output = result.output
            # The session checks these too; the gate states the contract on its own.
            if type(output) is not str or len(output) > limits.read_max_chars:
                shown = type(output).__name__ if type(output) is not str else f"{len(output)} chars"
                report.verdict = {"ok": False, "stage": "read", "gate": "contract",
                                  "rule": "read output", "line": None,
                                  "message": f"read() must return a str of at most "
                                             f"{limits.read_max_chars} characters; got {shown}"}
                break
            report.read_outputs.append(output)
        else:
            report.verdict = {"ok": True, "stage": "ok", "gate": "", "rule": "", "message": "",
                              "line": None}
    except SandboxError as exc:
        report.verdict = _verdict_dict(exc.verdict)
        add_logs(window[0], list(getattr(exc, "logs", []) or []))
    finally:
        (close or ProgramSession.close)(session)
    report.ok = bool(report.verdict.get("ok"))
    report.stage = report.verdict.get("stage", "unknown")
    report.error = None if report.ok else _error_text(report.verdict)
    report.seconds = round(time.monotonic() - started, 3)
    return report

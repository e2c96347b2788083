"""Check a memory program by hand: every gate, in a real sandbox worker, no API key needed.

    python -m sandbox PROGRAM.py [--json] [--allow-import M ...] [--timeout S]
    mstar check PROGRAM.py ...        (the same, with mstar's offline toolkit model)

The toolkit LLM is served locally and deterministically: by whatever the caller passes to
`main(llm=...)` (`mstar check` passes its offline toolkit model), otherwise by echoing the last
500 characters of the prompt -- the sandbox knows nothing of the engine's models.

Output (`--json` prints the same as one JSON object): `ok`; `stage` -- the stage that failed
(static, compile, import, init, write, read) or "ok"; `error` -- "[stage/gate/rule] line N:
message" or null; `verdict` -- the same, as fields; `read_outputs`; `logs` -- logger.debug and
print lines, each prefixed with its window ("[load]", "[write#0]", "[read#1]"); `llm_calls` --
the toolkit LLM calls the engine served, each with its `window`, `messages` and `reply` or
`error`; `llm_refused` -- per window, calls the engine refused as over the budget (calls during
import/__init__ are always refused); `layers` -- the isolation layers that were active;
`warnings` -- what the engine noticed but accepted (a field without a description, a missing
isolation layer); `seconds`. Text a program wrote is printed with its control and escape sequences made visible
(sandbox.engine.terminal); the JSON is ASCII, every such character escaped.

Exit status: 0 every gate passed; 1 a gate failed; 2 bad usage or an unreadable file.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

from sandbox.contract import DEFAULT_ALLOWED_IMPORTS
from sandbox.engine.gates import GateReport, run_gates
from sandbox.engine.session import SandboxLimits
from sandbox.engine.terminal import terminal_safe


LLMFn = Callable[[list[dict]], str]


def echo_llm(messages: list[dict]) -> str:
    """The stand-alone checker's toolkit LLM: the last 500 characters of the prompt."""
    return "\n".join(str(m.get("content", "")) for m in messages)[-500:]


def _line(text: object) -> str:
    """One line of program- or worker-written text: escapes shown, newlines too."""
    return terminal_safe(text, newlines=False)


def _block(text: object, indent: str = "  ") -> str:
    """Several lines of program-written text, indented: no line of it can pose as the checker's own."""
    return "\n".join(indent + line for line in terminal_safe(text).split("\n"))


def render_text(report: GateReport, llm_name: str) -> str:
    """The report for a terminal. Everything a program or the worker wrote goes through
    `terminal_safe` (sandbox.engine.terminal): a program cannot move the cursor, retitle the
    window or fake the verdict lines above its own output."""
    error = _block(report.error, "    ").lstrip() if report.error else "-"
    lines = [f"ok: {report.ok}", f"stage: {_line(report.stage)}", f"error: {error}",
             f"seconds: {report.seconds}", f"layers: {_line(', '.join(report.layers)) or '-'}",
             f"toolkit llm: {llm_name}"]
    if report.warnings:
        lines += ["", f"warnings ({len(report.warnings)}):", *(f"- {_line(w)}" for w in report.warnings)]
    lines += ["", f"read_outputs ({len(report.read_outputs)}):"]
    for i, out in enumerate(report.read_outputs):
        lines.append(f"--- read#{i} ({len(out)} chars)")
        lines.append(_block(out))
    lines += ["", f"logs ({len(report.logs)}):", *map(_line, report.logs), "",
              f"llm_calls ({len(report.llm_calls)}):"]
    for call in report.llm_calls:
        size = sum(len(m.get("content") or "") for m in call["messages"])
        outcome = f"error: {call['error']}" if "error" in call else f"reply: {call.get('reply', '')!r}"
        lines.append(f"- {call['window']}: {len(call['messages'])} message(s), {size} chars; {_line(outcome)}")
    for refused in report.llm_refused:
        lines.append(f"- {refused['window']}: {refused['count']} more call(s) refused (over the per-op budget)")
    return "\n".join(lines)


def main(argv: list[str] | None = None, *, llm: LLMFn | None = None, llm_name: str = "",
         prog: str = "python -m sandbox") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("program", type=Path, help="the memory program (.py) to check")
    parser.add_argument("--json", action="store_true", help="print the gate report as JSON")
    parser.add_argument("--allow-import", action="append", default=[], metavar="M",
                        help="allow one more top-level module (repeatable)")
    parser.add_argument("--timeout", type=float, default=SandboxLimits().call_timeout_s, metavar="S",
                        help="wall-clock limit per load/write/read in seconds (default %(default)s)")
    args = parser.parse_args(argv)
    try:
        source = args.program.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        parser.error(f"cannot read {args.program}: {exc}")
    if args.timeout <= 0:
        parser.error("--timeout must be > 0")
    allowed = tuple(dict.fromkeys([*DEFAULT_ALLOWED_IMPORTS, *args.allow_import]))
    if llm is None:
        llm, llm_name = echo_llm, "echo of the last 500 prompt characters"
    report = run_gates(source, allowed_imports=allowed, limits=SandboxLimits(call_timeout_s=args.timeout),
                       llm=llm)
    try:
        # JSON as ASCII: json.dumps escapes C0 controls but would print C1 and bidi controls raw.
        print(json.dumps(report.to_dict(), indent=2) if args.json else render_text(report, llm_name))
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into `head`: the verdict is still the exit status
        sys.stdout = None  # nothing more can be written; keep the interpreter from retrying
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

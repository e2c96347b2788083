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
`seconds`.

Exit status: 0 every gate passed; 1 a gate failed; 2 bad usage or an unreadable file.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from sandbox.contract import DEFAULT_ALLOWED_IMPORTS
from sandbox.engine.gates import GateReport, run_gates
from sandbox.engine.session import SandboxLimits


LLMFn = Callable[[list[dict]], str]


def echo_llm(messages: list[dict]) -> str:
    """The stand-alone checker's toolkit LLM: the last 500 characters of the prompt."""
    return "\n".join(str(m.get("content", "")) for m in messages)[-500:]


def render_text(report: GateReport, llm_name: str) -> str:
    lines = [f"ok: {report.ok}", f"stage: {report.stage}", f"error: {report.error or '-'}",
             f"seconds: {report.seconds}", f"layers: {', '.join(report.layers) or '-'}",
             f"toolkit llm: {llm_name}", "", f"read_outputs ({len(report.read_outputs)}):"]
    for i, out in enumerate(report.read_outputs):
        lines.append(f"--- read#{i} ({len(out)} chars)")
        lines.append(out)
    lines += ["", f"logs ({len(report.logs)}):", *report.logs, "",
              f"llm_calls ({len(report.llm_calls)}):"]
    for call in report.llm_calls:
        size = sum(len(m.get("content") or "") for m in call["messages"])
        outcome = f"error: {call['error']}" if "error" in call else f"reply: {call.get('reply', '')!r}"
        lines.append(f"- {call['window']}: {len(call['messages'])} message(s), {size} chars; {outcome}")
    for refused in report.llm_refused:
        lines.append(f"- {refused['window']}: {refused['count']} more call(s) refused (over the per-op budget)")
    return "\n".join(lines)


def main(argv: list[str] | None = None, *, llm: LLMFn | None = None, llm_name: str = "",
         prog: str = "python -m sandbox") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
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
        print(report.to_json(indent=2) if args.json else render_text(report, llm_name))
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into `head`: the verdict is still the exit status
        sys.stdout = None  # nothing more can be written; keep the interpreter from retrying
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""From a reflection prompt to a checked child program.

Ask the reflector -> parse its reply -> apply the patch -> run the gates. When
the reply cannot be used, the patch does not apply or a gate fails, the code
and the exact error go back to the reflector (compile-fix prompt, paper G.3),
up to `attempts` more times. Every attempt and its error is recorded for the
lineage. A child whose source equals a program already in the pool is a
duplicate and is not evaluated again.
"""
from __future__ import annotations

import contextlib
import time

from dataclasses import dataclass, field
from typing import Callable

from mstar.config import SandboxConfig
from mstar.llm.router import LLMRouter
from mstar.iteration.behaviour import same_code
from mstar.iteration.lending import ReflectorLending
from mstar.evaluation.records import EndpointOutage
from mstar.llm.types import FatalLLMError, LLMError
from mstar.program.frozen import FrozenPartError, check_frozen
from mstar.patch import PatchError, apply_patch
from mstar.iteration.reflect import ReplyError, build_compile_fix_messages, parse_reply
from mstar.evaluation.pools import close_later
from mstar.evaluation.sessions import LOAD_INFO
from mstar.offline.toolkit_model import OfflineToolkitModel
from sandbox.engine.gates import run_gates
from sandbox.engine.session import SandboxLimits
from sandbox.engine.spares import SPARES


# The gates' smoke test checks mechanics -- types, sizes, the time limit, the call budget -- on a
# small invented corpus; the program's toolkit calls there are answered by the offline toolkit
# model, so a candidate costs no spend and no waiting before it is scored (the evaluation that
# follows uses the run's real toolkit model).
SMOKE_TOOLKIT = OfflineToolkitModel()


@dataclass
class MutationOutcome:
    status: str                    # "ok" | "failed" | "duplicate"
    source: str | None             # the child's source (also for failed/duplicate, when one was made)
    title: str = ""
    body: str = ""
    attempts: list[dict] = field(default_factory=list)
    gate_seconds: float = 0.0


def _normalise(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def propose_child(parent_source: str, messages: list[dict], *, router: LLMRouter, sandbox: SandboxConfig,
                  limits: SandboxLimits, attempts: int, known_sources: set[str],
                  mode: str = "all", on_candidate: Callable[[str], None] | None = None,
                  lending: ReflectorLending | None = None) -> MutationOutcome:
    """The reflector's child of `parent_source`, through its gates (with compile-fix attempts).
    `on_candidate(source)` is called as each candidate goes into its gates (the loop starts the
    candidate's evaluation worker meanwhile: mstar.evaluation.prestart). `lending` lends the calls
    in flight the run leaves idle to background work while the reflector replies."""
    base = parent_source
    title, body = "", ""
    records: list[dict] = []
    candidate: str | None = None
    known = {_normalise(s) for s in known_sources}
    gate_seconds = 0.0
    for attempt in range(attempts + 1):
        kind = "reflect" if attempt == 0 else "compile_fix"
        rec: dict = {"attempt": attempt, "kind": kind}
        records.append(rec)
        # The candidate's gates and its evaluation each take a worker: launched now, while the
        # reflector answers (sandbox.engine.spares; a no-op unless the executor keeps spares).
        SPARES.fill()
        try:
            # The calls in flight the run leaves idle meanwhile may go to background work (lending.py).
            with lending.during_reply() if lending is not None else contextlib.nullcontext():
                response = router.call("reflector", messages)
        except FatalLLMError:
            raise
        except LLMError as exc:
            # Not the program's fault, and not a finding about it: the endpoint failed after its
            # retries. The iteration is not recorded; the run stops and resumes from here.
            raise EndpointOutage(f"the reflector call failed after its retries: {exc}") from exc
        reply_text = response.text
        rec["reply_chars"] = len(reply_text)
        candidate, error = None, None
        try:
            if response.finish_reason == "length":
                # A cut-off reply may still hold a patch that applies -- half a change. Never a child.
                raise ReplyError("the reply was truncated (finish_reason=length); give a shorter, complete patch")
            reply = parse_reply(reply_text)
            if attempt == 0 or not title:
                title, body = reply.title, reply.body
            rec["title"] = reply.title
            if reply.patch is not None:
                rec["patch"] = reply.patch
                candidate = apply_patch(base, reply.patch)
            else:
                rec["full_program"] = True
                candidate = reply.full_program
            check_frozen(parent_source, candidate, mode)
        except ReplyError as exc:
            error, rec["stage"] = f"reply: {exc}", "reply"
        except PatchError as exc:
            error, rec["stage"] = f"patch: {exc}", "patch"
        except FrozenPartError as exc:
            error, rec["stage"] = f"frozen: {exc}", "frozen"
            candidate = None
        if candidate is not None:
            if _normalise(candidate) in known or same_code(candidate, list(known_sources)):
                rec.update(stage="duplicate", error="the child runs the same code as a program already in the pool "
                                                    "(it differs at most in comments and blank lines)")
                return MutationOutcome("duplicate", candidate, title, body, records, gate_seconds)
            if on_candidate is not None:
                on_candidate(candidate)
            t_gates = time.perf_counter()
            report = run_gates(candidate, allowed_imports=sandbox.allowed_imports, limits=limits,
                               llm=SMOKE_TOOLKIT.complete, close=close_later)
            gates_took = time.perf_counter() - t_gates
            gate_seconds += gates_took
            if lending is not None:
                lending.saw_gates(gates_took)
            rec["gates"] = {"ok": report.ok, "stage": report.stage, "error": report.error}
            if report.ok:
                LOAD_INFO.put(candidate, report.load_info)   # its evaluation asks its prompts at once
                rec["stage"] = "ok"
                return MutationOutcome("ok", candidate, title, body, records, gate_seconds)
            error, rec["stage"] = f"gate failed at stage '{report.stage}': {report.error}", "gates"
        rec["error"] = error
        if attempt < attempts:
            # Fix the broken child when there is one; a patch that did not apply is
            # re-done against the program it was meant for.
            if candidate is not None:
                base = candidate
            messages = build_compile_fix_messages(base, error or "unknown error", sandbox)
    return MutationOutcome("failed", candidate, title or "no usable change", body, records, gate_seconds)


def fix_at_run_time(child_source: str, error: str, *, router: LLMRouter, sandbox: SandboxConfig,
                    limits: SandboxLimits, attempts: int, known_sources: set[str], mode: str = "all",
                    parent_source: str | None = None) -> MutationOutcome:
    """One runtime-fix round (paper Figure 2): the child passed its gates but failed while it was
    evaluated; the reflector gets its code and the error, and its fix goes through the gates
    (with the usual compile-fix attempts)."""
    messages = build_compile_fix_messages(child_source, f"the program failed while it was evaluated: {error}",
                                          sandbox)
    out = propose_child(child_source, messages, router=router, sandbox=sandbox, limits=limits, attempts=attempts,
                        known_sources=known_sources, mode=mode)
    if parent_source is not None and out.source is not None and out.status == "ok":
        try:
            check_frozen(parent_source, out.source, mode)
        except FrozenPartError as exc:
            out.status, out.attempts[-1]["error"] = "failed", f"frozen: {exc}"
    return out

"""Spec L0, the engine's first look at a program's text: cheap checks only.

No parsing here: a deeply nested AST can exhaust the engine's own stack, so every parse happens
in the worker (sandbox.worker.static_gate) behind its limits.
"""
from __future__ import annotations

from sandbox.protocol import SandboxLimits, Verdict


def intake_verdict(source: object, limits: SandboxLimits) -> Verdict | None:
    """Why the engine refuses `source` before starting a worker for it; None when it does not."""
    if not isinstance(source, str):
        return Verdict(False, "static", "intake", "source not str", f"source is {type(source).__name__}")
    size = len(source.encode("utf-8", "surrogatepass"))
    if size > limits.max_source_bytes:
        return Verdict(False, "static", "intake", "source too large",
                       f"source is {size} bytes; the limit is {limits.max_source_bytes}")
    if "\x00" in source:
        return Verdict(False, "static", "intake", "NUL byte", "source contains a NUL byte")
    return None

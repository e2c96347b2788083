"""Export one program of a run as a standalone file: its source under a header comment that says
where it came from (run, task, scores, lineage, models) and how to use it.

The header is comments only, so the exported file is still a memory program that passes every
gate, loads with `mstar.api.MemoryProgram.load` and scores with `mstar eval`.
"""
from __future__ import annotations

import time

from mstar.run.views import RunView, case_errors_text
from mstar.tasks.model import case_scored
from mstar.run.store import RunFormatError


def _clean(text: str, n: int = 110) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 3] + "..."


def export_header(view: RunView, program_id: str) -> list[str]:
    nodes = {n.program_id: n for n in view.nodes() if n.program_id}
    node = nodes.get(program_id)
    if node is None:
        raise RunFormatError(f"{view.root}: {program_id!r} is not a program of this run "
                             f"(programs: {', '.join(nodes)})")
    chain, cur = [], node
    while cur is not None:
        chain.append(cur)
        cur = nodes.get(cur.parent_id) if cur.parent_id else None
    seeds = [n for n in nodes.values() if n.status == "seed" and n.static_score is not None]
    best_seed = max((n.static_score for n in seeds), default=None)
    test = view.cases(program_id, "test")
    evo = view.config.get("evolution", {})
    lines = [
        f"mstar memory program {program_id}, exported {time.strftime('%Y-%m-%d %H:%M:%S')}",
        f"run:      {view.root.name} ({view.root}), status {view.status}, "
        f"{view.iterations_done}/{evo.get('iterations', '?')} iterations, seed {evo.get('seed', '?')}",
        f"task:     {view.config.get('task')}" + (f" (data {view.config['data']})" if view.config.get("data") else ""),
        f"program:  {program_id}" + (" (best of the run)" if node.best else "")
        + (f", iteration {node.iteration}, parent {node.parent_id}" if node.parent_id else ", a seed"),
        f"static:   {node.static_score:.4f} on the static validation set ({evo.get('static_size', '?')} queries)"
        + (f"; best seed {best_seed:.4f}" if best_seed is not None else ""),
    ]
    if test is not None:
        cats = ", ".join(f"{k} {v:.3f}" for k, v in (test.get("per_category") or {}).items())
        # The mean is over the scored queries only: how many, and why the others are not.
        cases = test.get("cases") or []
        scored = sum(1 for c in cases if case_scored(c))
        errors = sum(1 for c in cases if c.get("llm_error") or c.get("score_error"))
        unscored = f" {case_errors_text(errors, sum(1 for c in cases if c.get('score_error')))}" if errors else ""
        lines.append(f"test:     {test.get('mean_score', 0.0):.4f} on "
                     + (f"{scored} of {len(cases)}" if scored < len(cases) else f"{len(cases)}")
                     + f" held-out queries{unscored}" + (f" ({cats})" if cats else ""))
    else:
        lines.append("test:     not evaluated (the run scores only its best program on the test set; "
                     "use `mstar eval`)")
    lines.append("models:   " + ", ".join(f"{role} {desc}" for role, desc in view.models().items()))
    lines.append("lineage (oldest first):")
    for n in reversed(chain):
        delta = f" ({n.delta:+.3f})" if n.delta is not None else ""
        lines.append(f"  {n.label:<24} {n.static_score:.3f}{delta}  {_clean(n.title)}")
    lines += ["use:      from mstar.api import MemoryProgram",
              "          with MemoryProgram.load(\"this_file.py\", llm=...) as memory:",
              "              memory.ingest(text); memory.ask(question)"]
    return lines


def export_program(view: RunView, program_id: str | None = None) -> tuple[str, str]:
    """(program id, file text). Default: the run's best program (so far, for an unfinished run)."""
    pid = program_id or view.best_id
    if pid is None:
        raise RunFormatError(f"{view.root}: no program has been evaluated yet; nothing to export")
    if pid == "best":
        pid = view.best_id
    header = export_header(view, pid)  # first: it names an unknown program id
    source = view.source(pid)
    if source is None:
        raise RunFormatError(f"{view.root / 'programs' / (pid + '.py')} is missing")
    bar = "# " + "-" * 96
    text = "\n".join([bar, *(f"# {line}".rstrip() for line in header), bar, ""]) + source
    return pid, text

"""Read-only views of run folders: the records behind `mstar runs`, `mstar lineage`, `mstar show`,
`mstar export` and `mstar report`.

Everything here reads what the loop wrote (config.json, lineage.jsonl, programs/, cases/,
llm_usage.jsonl, summary.json) and nothing else, so a run can be inspected while it is still
going or after it crashed. A folder that cannot be read raises RunFormatError (or, when listing
many runs, shows up with status "unreadable" and the reason).
"""
from __future__ import annotations

import difflib
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path

from mstar.run import events as ev_types
from mstar.run.spend import RoleSpend, spend_by_role, total
from mstar.run.store import FORMAT_VERSION, RunFormatError, RunStore, find_run, repair_hint
from sandbox.engine.terminal import terminal_safe


@dataclass
class LineageNode:
    """One seed or iteration. Iterations that added no child (failed gates, duplicates) are
    nodes too, under the parent they were tried on, with program_id None."""
    iteration: int
    program_id: str | None
    parent_id: str | None
    status: str                          # "seed" | "ok" | "failed" | "duplicate"
    title: str
    static_score: float | None = None
    delta: float | None = None           # against the parent's static score
    error: str | None = None             # why it failed, or the whole-program error of its evaluation
    best: bool = False
    children: list["LineageNode"] = field(default_factory=list)
    case_errors: int = 0                 # cases its evaluation left unscored: an LLM call or the scorer failed
    score_errors: int | None = None      # ... of them the task's scorer's (its cases file); None: not read
    evidence: dict | None = None         # paired difference to the parent over the static items
    no_change: bool = False              # every static answer equal to the parent's

    @property
    def label(self) -> str:
        return self.program_id or f"iter_{self.iteration:03d}"

    @property
    def markers(self) -> list[str]:
        out = []
        if self.best:
            out.append("BEST")
        if self.status in ("failed", "duplicate"):
            out.append(self.status.upper())
        elif self.no_change:
            out.append("NO CHANGE")
        elif self.delta is not None and self.delta < 0:
            out.append("REGRESSION")
        if self.evidence and self.evidence.get("significant"):  # the paired interval excludes zero
            out.append("GAIN" if self.evidence["mean"] > 0 else "LOSS")
        if self.error and self.status in ("seed", "ok"):
            out.append("ERROR")
        return out

    def to_dict(self) -> dict:
        d = asdict(self)
        d["markers"] = self.markers
        d["children"] = [c.to_dict() for c in self.children]
        return d


def _last_error(ev: ev_types.IterationEvent) -> str | None:
    err = ev.attempts[-1].get("error") if ev.attempts else None
    return " ".join(str(err).split()) if err else None


def _eval_error(err) -> str | None:
    if not err:
        return None
    return str(err.get("message") or err) if isinstance(err, dict) else str(err)


def lineage_nodes(events: list, best_id: str | None = None) -> list[LineageNode]:
    """Flat list in event order (seeds first, then iterations)."""
    nodes = []
    for ev in events:
        if isinstance(ev, ev_types.SeedEvent):
            nodes.append(LineageNode(0, ev.program_id, None, "seed", ev.title, ev.static_score, None,
                                     _eval_error(ev.error), case_errors=ev.case_errors))
        elif isinstance(ev, ev_types.IterationEvent):
            ok = ev.added_child
            nodes.append(LineageNode(
                ev.iteration, ev.program_id if ok else None, ev.parent_id, ev.status, ev.title,
                ev.static_score if ok else None, ev.delta if ok else None,
                _eval_error(ev.eval_error) if ok else _last_error(ev), evidence=ev.evidence if ok else None,
                no_change=ev.no_change and ok, case_errors=ev.case_errors if ok else 0))
    for n in nodes:
        n.best = best_id is not None and n.program_id == best_id
    return nodes


def lineage_tree(nodes: list[LineageNode]) -> list[LineageNode]:
    """Roots (seeds, and nodes whose parent is unknown) with their children filled in."""
    by_id = {n.program_id: n for n in nodes if n.program_id}
    for n in nodes:
        n.children = []
    roots = []
    for n in nodes:
        parent = by_id.get(n.parent_id) if n.parent_id else None
        (parent.children if parent is not None else roots).append(n)
    return roots


def case_errors_text(n: int, score_errors: int | None = None) -> str:
    """Cases an evaluation left unscored, shown beside the score: an LLM call failed, or the
    task's own scorer did on `score_errors` of them. The lineage's seed and iteration events carry
    only the sum; None when the split was not read (its cases file has it)."""
    head = f"{n} case{'s' if n != 1 else ''} not scored"
    if score_errors is None:
        return f"({head}: an LLM call or the task's scorer failed)"
    if not score_errors:
        return f"({head}: LLM call failed)"
    if score_errors >= n:
        return f"({head}: the task's scorer failed)"
    return f"({head}: LLM call failed on {n - score_errors}, the task's scorer on {score_errors})"


def with_score_errors(view: "RunView", nodes: list[LineageNode]) -> list[LineageNode]:
    """`nodes` with the scorer's share of their unscored cases, from their static cases files: read
    only for the nodes that have any, so a run without case errors costs no file."""
    for n in nodes:
        if n.case_errors and n.program_id:
            cases = view.cases(n.program_id, "static") or {}
            n.score_errors = cases.get("score_errors") if "score_errors" in cases else None
    return nodes


def render_tree(roots: list[LineageNode]) -> list[str]:
    """The lineage as text lines: score, delta, markers and commit title per program."""
    lines: list[str] = []

    def labels(ns):
        for n in ns:
            yield len(n.label)
            yield from labels(n.children)
    width = max(24, *labels(roots)) if roots else 24   # long seed names keep the columns aligned

    def one(n: LineageNode) -> str:
        score = f"{n.static_score:.3f}" if n.static_score is not None else "  -  "
        delta = f"({n.delta:+.3f})" if n.delta is not None else " " * 8
        marks = " ".join([f"[{m}]" for m in n.markers]
                         + ([case_errors_text(n.case_errors, n.score_errors)] if n.case_errors else []))
        head = f"{n.label:<{width}} {score} {delta} {marks}".rstrip()
        text = f"{head}  {n.title}"
        if n.status in ("failed", "duplicate") and n.error:
            text += f"  -- {n.error[:100]}"
        return terminal_safe(text, newlines=False, tabs=False)  # titles and errors: model- and program-written

    def walk(n: LineageNode, prefix: str, last: bool, root: bool) -> None:
        lines.append(one(n) if root else f"{prefix}{'└── ' if last else '├── '}{one(n)}")
        child_prefix = "" if root else prefix + ("    " if last else "│   ")
        for i, c in enumerate(n.children):
            walk(c, child_prefix, i == len(n.children) - 1, False)

    for r in roots:
        walk(r, "", True, True)
    return lines


@dataclass
class RunOverview:
    """One row of `mstar runs`."""
    name: str
    path: str
    status: str                         # finished | running | stopped | crashed | incomplete | unreadable
    task: str | None = None
    iterations_done: int = 0
    iterations_total: int | None = None
    best_id: str | None = None
    best_static: float | None = None
    test_score: float | None = None
    llm_calls: int = 0
    tokens: int = 0
    cost_usd: float | None = None
    format_version: int | None = None
    problem: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


class RunView:
    """One run folder, read lazily. Raises RunFormatError when config.json is missing, damaged
    or from a newer format."""

    def __init__(self, root: str | Path):
        self.store = RunStore(root)
        self.root = self.store.root
        self.format_version, self.config = self.store.read_config()
        lines, self.partial_line = self.store.read_jsonl_tolerant("lineage.jsonl")
        self.events: list = []
        for n, line in enumerate(lines, 1):
            try:
                ev = ev_types.from_dict(line)
            except ValueError as exc:
                raise RunFormatError(f"{self.root / 'lineage.jsonl'}: event {n}: {exc} -- "
                                     + repair_hint(self.root)) from None
            if ev is not None:
                self.events.append(ev)

    @cached_property
    def summary(self) -> dict | None:
        done = ev_types.finished(self.events)
        return self.store.read_json("summary.json") if done and (self.root / "summary.json").exists() else None

    @cached_property
    def usage(self) -> list[dict]:
        return self.store.read_jsonl_tolerant("llm_usage.jsonl")[0]

    @property
    def finished(self) -> bool:
        return ev_types.finished(self.events)

    @property
    def status(self) -> str:
        if self.finished:
            return "finished"
        if self.store.is_locked():
            return "running"
        if self.events and isinstance(self.events[-1], ev_types.StoppedEvent):
            return "stopped"  # by its budget, a failing endpoint or an interrupt; `mstar resume` goes on
        # Runs from before format 1 held no lock: stopped or still going, it cannot be told.
        return "crashed" if self.format_version >= 1 else "incomplete"

    @property
    def stop(self):
        """The `stopped` event the lineage ends with (a budget, an endpoint, an interrupt), or None."""
        last = self.events[-1] if self.events else None
        return last if isinstance(last, ev_types.StoppedEvent) else None

    @property
    def iterations_done(self) -> int:
        return len(ev_types.iterations(self.events))

    @property
    def best_id(self) -> str | None:
        """The summary's best program once finished; before that the pool's best so far
        (highest static score, earliest on ties -- the loop's rule)."""
        if self.summary and self.summary.get("best_id"):
            return self.summary["best_id"]
        scored = [n for n in lineage_nodes(self.events) if n.program_id and n.static_score is not None]
        # enumerate, not scored.index(n) in the key: that was quadratic (0.8 s at 1,000 iterations)
        return max(enumerate(scored), key=lambda p: (p[1].static_score, -p[0]))[1].program_id if scored else None

    def nodes(self) -> list[LineageNode]:
        return lineage_nodes(self.events, self.best_id)

    def node(self, program_id: str) -> LineageNode | None:
        return next((n for n in self.nodes() if n.program_id == program_id), None)

    def spend(self) -> dict[str, RoleSpend]:
        return spend_by_role(self.usage)

    def source(self, name: str) -> str | None:
        return self.store.read_program(name)

    def cases(self, program_id: str, split: str) -> dict | None:
        return self.store.read_cases(program_id, split)

    def models(self) -> dict[str, str]:
        llm = self.config.get("llm", {})
        return {role: f"{rc.get('backend', '?')}:{rc.get('model', '?')}" for role, rc in llm.items()
                if isinstance(rc, dict) and "backend" in rc}  # roles only, not cache/budget settings

    def overview(self) -> RunOverview:
        spend = total(self.spend())
        best = self.node(self.best_id) if self.best_id else None
        test = self.summary.get("test_score") if self.summary else None
        return RunOverview(self.root.name, str(self.root), self.status, self.config.get("task"),
                           self.iterations_done, self.config.get("evolution", {}).get("iterations"),
                           self.best_id, best.static_score if best else None, test, spend.calls,
                           spend.tokens, spend.cost_usd, self.format_version,
                           self.partial_line)

    # ------------------------------------------------------------ one program
    def find_event(self, ref: str):
        """The event of a program or iteration: a program id, `iter_NNN` (also for iterations
        that added no child), an iteration number, or `best`."""
        ref = str(ref).strip()
        if ref == "best":
            if self.best_id is None:
                raise RunFormatError(f"{self.root}: no program has been evaluated yet")
            ref = self.best_id
        it = int(ref) if ref.isdigit() else None
        if it is None and ref.startswith("iter_"):
            digits = ref[5:].removesuffix("_rejected")
            it = int(digits) if digits.isdigit() else None
        for ev in self.events:
            if isinstance(ev, ev_types.SeedEvent) and ev.program_id == ref:
                return ev
            if isinstance(ev, ev_types.IterationEvent) and it is not None and ev.iteration == it:
                return ev
        known = [n.label for n in self.nodes()]
        raise RunFormatError(f"{self.root}: no program or iteration {ref!r}; known: {', '.join(known)}")

    def program_detail(self, ref: str) -> dict:
        """Source, diff against the parent, per-case results and the reflector's reasoning."""
        ev = self.find_event(ref)
        is_iteration = isinstance(ev, ev_types.IterationEvent)
        pid = ev.program_id if not is_iteration or ev.added_child else None
        name = pid or f"iter_{ev.iteration:03d}_rejected"
        source = self.source(name)
        parent_id = ev.parent_id
        parent_source = self.source(parent_id) if parent_id else None
        diff = unified_diff(parent_source, source, parent_id or "", name) if parent_source and source else ""
        it = ev if is_iteration else ev_types.IterationEvent(0, "")   # seeds have no reflector fields
        return {
            "run": str(self.root), ev_types.KIND_KEY: ev.KIND, "program_id": pid, "source_name": name,
            "iteration": ev.iteration, "parent_id": parent_id, "status": it.status if is_iteration else "seed",
            "static_score": ev.static_score, "case_errors": ev.case_errors if pid else 0,
            "parent_static_score": it.parent_static_score,
            "delta": it.delta, "evidence": it.evidence, "no_change": it.no_change,
            "runtime_fixes": it.runtime_fixes, "per_category": ev.per_category,
            "title": ev.title, "body": it.body, "attempts": it.attempts,
            "rotating_score": it.rotating_score, "failed_case_ids": it.failed_case_ids,
            "best": pid is not None and pid == self.best_id,
            "source": source, "diff": diff,
            "cases": {split: c for split in ("static", "test") if (c := self.cases(pid, split)) is not None}
            if pid else {},
        }


def unified_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=old_name, tofile=new_name))


def open_run(ref: str | Path, runs_dir: str | Path = "runs") -> RunView:
    """A run given as a folder path or as a name under runs_dir."""
    return RunView(find_run(ref, runs_dir))


def overview_of(root: Path) -> RunOverview:
    """Never raises: a folder that cannot be read is listed with the reason."""
    try:
        return RunView(root).overview()
    except (RunFormatError, OSError, KeyError, TypeError, ValueError) as exc:
        return RunOverview(root.name, str(root), "unreadable", problem=str(exc))


def list_runs(runs_dir: str | Path) -> list[RunOverview]:
    """Every folder under runs_dir that looks like a run (has config.json), by name."""
    base = Path(runs_dir)
    if not base.is_dir():
        return []
    return [overview_of(p) for p in sorted(base.iterdir()) if p.is_dir() and (p / "config.json").exists()]


__all__ = ["FORMAT_VERSION", "LineageNode", "RunOverview", "RunView", "lineage_nodes", "lineage_tree",
           "list_runs", "open_run", "overview_of", "render_tree", "unified_diff", "with_score_errors"]

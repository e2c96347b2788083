"""Score several memory programs on one task split and lay the results out like the paper's
Table 1 / Appendix I: one row per program, one column per query category, then Overall.

Every program is evaluated exactly as the evolution loop scores its final program on the test
set (mstar.evaluation.evaluate: a fresh knowledge base, all episodes written, then the queries),
so a baseline row and an evolved program's test score are comparable. The GEPA rows ("gepa",
"gepa_vector_search", mstar/gepa/) first optimise a seed's ALWAYS_ON_KNOWLEDGE with the `gepa`
library on the evolution's split, then score the optimised program the same way; without the
package they are left out with a one-line note. The table is a typed record (`ComparisonTable`)
that renders to markdown and serialises to JSON; `compare` is the only function here with side
effects (sandbox workers and LLM calls).
"""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

from mstar import gepa as gepa_rows
from mstar.config import SandboxConfig
from mstar.evaluation import evaluate
from mstar.llm.router import LLMRouter
from mstar.program.sources import load_program_source
from mstar.tasks import QueryItem, Task

# Display names and paradigms, in the paper's row order (Table 1), then the systems of our seed
# documents. Programs not listed here (a .py path, an evolved program) keep their own name.
PAPER_GROUPS = (
    ("", ("no_memory",)),
    ("Retrieval-based systems (memorising episodes)", ("vector_search", "g_memory", "mem0")),
    ("Self-evolution systems (memorising experiences)",
     ("trajectory_retrieval", "reasoning_bank", "dynamic_cheatsheet")),
    ("Prompt-optimising systems (memorising traction)", ("gepa", "gepa_vector_search")),
    ("Systems from the seed documents", ("ace", "graph_memory", "selfmem")),
)
LABELS = {
    "no_memory": "No Memory", "vector_search": "Vector Search", "g_memory": "G-Memory",
    "mem0": "Mem0", "trajectory_retrieval": "Trajectory Retrieval",
    "reasoning_bank": "ReasoningBank", "dynamic_cheatsheet": "Dynamic Cheatsheet",
    "ace": "ACE", "graph_memory": "GraphMemory", "selfmem": "SelfMem",
    "llm_summarizer": "LLM Summarizer", "experience_learner": "Experience Learner",
    **gepa_rows.LABELS,
}
OPTIMISED = tuple(gepa_rows.GEPA_SEEDS)      # rows made by an optimiser, not a program file
# The memory programs of the default table, and every default row (with GEPA's) in paper order.
DEFAULT_PROGRAMS = tuple(name for _, names in PAPER_GROUPS for name in names if name not in OPTIMISED)
DEFAULT_ROWS = tuple(name for _, names in PAPER_GROUPS for name in names)
OTHER_GROUP = "Other programs"
# Column order for categories we know (LoCoMo's as in the paper's Table 12: Single-hop, Temporal,
# Causal, Open-domain; ALFWorld's task types as in Tables 10-11); any other category follows, sorted.
CATEGORY_ORDER = ("single-hop", "multi-hop", "temporal", "causal", "open-domain", "updated", "adversarial",
                  "pick_and_place_simple", "pick_and_place_with_movable_recep", "pick_clean_then_place_in_recep",
                  "look_at_obj_in_light", "pick_cool_then_place_in_recep", "pick_heat_then_place_in_recep",
                  "pick_two_obj_and_place")
# The paper's short column names where the category's own name is long (ALFWorld, Tables 10-11).
CATEGORY_LABELS = {"pick_and_place_simple": "Simple", "pick_and_place_with_movable_recep": "Movable",
                   "pick_clean_then_place_in_recep": "Clean", "look_at_obj_in_light": "Light",
                   "pick_cool_then_place_in_recep": "Cool", "pick_heat_then_place_in_recep": "Heat",
                   "pick_two_obj_and_place": "2-Obj"}

Progress = Callable[["ProgramScore"], None]   # called with each row as it is scored


@dataclass
class ProgramScore:
    program: str                      # the name or path it was given as
    label: str                        # display name
    group: str                        # paradigm row group ("" for No Memory)
    overall: float
    per_category: dict[str, float]
    n: int                            # queries scored
    failed_cases: int = 0             # cases whose write/read raised
    error: str | None = None          # the program failed as a whole (load, crash)
    seconds: float = 0.0
    toolkit_calls: int = 0            # toolkit LLM calls made by read()
    llm: dict = field(default_factory=dict)   # router usage during this evaluation
    gepa: dict | None = None          # a GEPA row: budget, metric calls, best validation score
    corrupt: list[str] = field(default_factory=list)   # interactive games that cannot be played
                                                        # (no admissible command): left out of the score


@dataclass
class ComparisonTable:
    task: str
    split: str
    metric: str
    n: int
    categories: list[tuple[str, int]]  # (category, number of queries), in column order
    rows: list[ProgramScore]
    notes: list[str] = field(default_factory=list)       # e.g. rows left out, and why
    program_embeddings: str = ""       # what the programs' chroma collections embedded with
    prompts: str = "mstar"             # the prompt wording of the task agent and judges
    optimisations: dict = field(default_factory=dict)    # GEPA row -> GepaRun.to_dict()

    def to_dict(self) -> dict:
        d = asdict(self)
        d["categories"] = [{"name": c, "n": k} for c, k in self.categories]
        return d

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.to_dict(), indent=kwargs.pop("indent", 2), **kwargs)

    def to_markdown(self) -> str:
        return render_markdown(self)


# ---------------------------------------------------------------------------- pure helpers

def category_columns(queries: Sequence[QueryItem], left_out: Sequence[str] = ()) -> list[tuple[str, int]]:
    """(category, count) for the queries (but those whose id is in `left_out`, e.g. corrupt
    games), known categories first in paper order."""
    counts: dict[str, int] = {}
    for q in (q for q in queries if q.id not in set(left_out)):
        key = "none" if q.category is None else str(q.category)
        counts[key] = counts.get(key, 0) + 1
    known = [c for c in CATEGORY_ORDER if c in counts]
    rest = sorted(c for c in counts if c not in CATEGORY_ORDER)
    return [(c, counts[c]) for c in known + rest]


def category_label(name: str) -> str:
    """A category as a column header: the paper's name ("Single-hop", "Open-domain", "Heat")."""
    return CATEGORY_LABELS.get(name) or name[:1].upper() + name[1:]


def label_and_group(program: str) -> tuple[str, str]:
    """(display name, paradigm group) of a program reference."""
    for group, names in PAPER_GROUPS:
        if program in names:
            return LABELS[program], group
    return LABELS.get(program, program), OTHER_GROUP


def _best(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def render_markdown(table: ComparisonTable) -> str:
    """The table as GitHub markdown: best value per column in bold, paradigm header rows."""
    cats = [c for c, _ in table.categories]
    header = ["Method"] + [f"{category_label(c)} (n={k})" for c, k in table.categories] + [f"Overall (n={table.n})"]
    lines = [f"Task: {table.task} · split: {table.split} · metric: {table.metric}", "",
             "| " + " | ".join(header) + " |", "|" + "---|" + "---:|" * (len(header) - 1)]

    def cell(row: ProgramScore, key: str | None) -> float | None:
        if row.error is not None:
            return None
        return row.overall if key is None else row.per_category.get(key)

    best = {key: _best([cell(r, key) for r in table.rows]) for key in cats + [None]}
    group = None
    notes = []
    for row in table.rows:
        if row.group != group:
            group = row.group
            if group:
                lines.append("| *" + group + "* |" + " |" * (len(header) - 1))
        values = []
        for key in cats + [None]:
            v = cell(row, key)
            if v is None:
                values.append("failed" if row.error is not None else "–")
            else:
                text = f"{v:.3f}"
                bold = best[key] and v == best[key] and len(table.rows) > 1   # no bold for a best of 0
                values.append(f"**{text}**" if bold else text)
        lines.append("| " + row.label + " | " + " | ".join(values) + " |")
        if row.error is not None:
            notes.append(f"- {row.label}: failed -- {row.error}")
        elif row.failed_cases:
            notes.append(f"- {row.label}: {row.failed_cases} of {row.n} cases raised in write/read (scored 0)")
        if row.gepa:
            g = row.gepa
            notes.append(f"- {row.label}: ALWAYS_ON_KNOWLEDGE of {g['seed']} optimised by GEPA, {g['total_metric_calls']} "
                         f"of {g['budget']} metric calls, {g['candidates']} candidates, best validation score "
                         f"{g['best_score']:.3f} (seed {g['seed_score']:.3f})")
    notes += [f"- {n}" for n in table.notes]
    if table.program_embeddings:
        notes.append(f"- chroma inside programs: {table.program_embeddings}; prompts: {table.prompts}")
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- evaluation

def select_queries(task: Task, split: str, limit: int | None = None) -> list[QueryItem]:
    if split not in ("test", "validation"):
        raise ValueError(f"unknown split {split!r}; use 'test' or 'validation'")
    queries = list(task.test if split == "test" else task.validation)
    if not queries:
        raise ValueError(f"task {task.name!r} has no {split} queries")
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        queries = queries[:limit]
    return queries


def score_program(program: str, task: Task, queries: Sequence[QueryItem], *, router: LLMRouter,
                  sandbox: SandboxConfig, workers: int = 8, embed="current") -> ProgramScore:
    """Evaluate one program (built-in name or .py path) on all episodes + the given queries."""
    name, source = load_program_source(program)
    # A file is labelled by its stem and never passes for the built-in program of that name.
    label, group = label_and_group(program) if name == program else (name, OTHER_GROUP)
    return score_source(program, label, group, source, task, queries, router=router, sandbox=sandbox,
                        workers=workers, embed=embed)


def score_source(program: str, label: str, group: str, source: str, task: Task, queries: Sequence[QueryItem], *,
                 router: LLMRouter, sandbox: SandboxConfig, workers: int = 8, embed="current") -> ProgramScore:
    """Evaluate program text on all episodes + the given queries: one row of the table."""
    t0 = time.perf_counter()
    mark = router.mark() if hasattr(router, "mark") else None
    res = evaluate(source, list(task.episodes), list(queries), metric=task.score, router=router,
                   sandbox=sandbox, workers=workers, embed=embed)
    usage = router.since(mark) if mark is not None else {}
    error = None
    if res.error is not None:
        error = str(res.error.get("message") or res.error)[:300]
    return ProgramScore(
        program=program, label=label, group=group, overall=res.mean_score,
        per_category=res.per_category, n=sum(1 for c in res.cases if not c.corrupt),
        failed_cases=sum(1 for c in res.cases if c.error and not c.corrupt) + sum(1 for w in res.writes if w.error),
        corrupt=[c.query_id for c in res.cases if c.corrupt],
        error=error, seconds=round(time.perf_counter() - t0, 3),
        toolkit_calls=sum(c.toolkit_calls for c in res.cases), llm=usage)


@dataclass
class GepaOptions:
    """How the GEPA rows run (mstar/gepa): budget in metric calls, the reflection minibatch, and
    the split they share with an evolution run of the same settings."""
    budget: int = gepa_rows.DEFAULT_BUDGET
    minibatch: int = gepa_rows.DEFAULT_MINIBATCH
    seed: int = 0
    split_seed: int = 42
    static_size: int = 25
    rotating_size: int = 5
    train_ratio: int | None = None     # None: the task's own default (LoCoMo 0 = every session), else 5
    embed_model: str = "auto"          # subset-selection embeddings, as `mstar evolve --embed-model`
    embed_cache_dir: str | None = None
    log: Callable[[str], None] | None = None   # gepa's progress lines
    done: Callable[[object], None] | None = None   # called with each finished GepaRun


def make_gepa_split(task: Task, opts: GepaOptions):
    from mstar.split import make_split
    from mstar.split.embed import make_embedder

    ratio = opts.train_ratio if opts.train_ratio is not None else (task.train_ratio if task.train_ratio is not None else 5)
    return make_split(task, make_embedder(opts.embed_model, opts.embed_cache_dir), static_size=opts.static_size,
                      rotating_size=opts.rotating_size, train_ratio=ratio, seed=opts.split_seed)


def compare(task: Task, programs: Sequence[str], *, router: LLMRouter, sandbox: SandboxConfig | None = None,
            split: str = "test", limit: int | None = None, workers: int = 8, parallel: int = 1,
            progress: Progress | None = None, gepa: GepaOptions | None = None, embed="current") -> ComparisonTable:
    """Score every program on the split; rows come back in the order of `programs`.

    `parallel` programs are evaluated at once (each in its own sandbox worker); with a remote
    LLM that is where the time goes, offline 1 is enough. GEPA rows optimise first (one at a
    time, before the others start), then are scored like the rest; without the `gepa` package
    they are left out and the table says so.
    """
    from mstar.prompts import current as current_prompts
    from mstar.split.embed import current_program_embeddings, program_embeddings_label

    if not programs:
        raise ValueError("no programs to compare")
    for p in programs:            # fail before any evaluation, naming the bad reference
        if p not in OPTIMISED:
            load_program_source(p)
    sandbox = sandbox or SandboxConfig()
    queries = select_queries(task, split, limit)
    notify = progress or (lambda row: None)
    notes: list[str] = []
    optimisations: dict[str, dict] = {}
    sources: dict[str, str] = {}
    wanted = [p for p in programs if p in OPTIMISED]
    if wanted and not gepa_rows.available():
        notes.append(gepa_rows.missing_note())
        programs = [p for p in programs if p not in OPTIMISED]
    elif wanted:
        from mstar.gepa.optimise import optimise
        opts = gepa or GepaOptions()
        gsplit = make_gepa_split(task, opts)
        for name in wanted:
            run = optimise(name, task, gsplit, router=router, sandbox=sandbox, budget=opts.budget,
                           minibatch=opts.minibatch, seed=opts.seed, workers=workers, embed=embed, log=opts.log)
            optimisations[name], sources[name] = run.to_dict(), run.source
            if opts.done is not None:
                opts.done(run)

    def one(program: str) -> ProgramScore:
        if program in sources:
            label, group = label_and_group(program)
            row = score_source(program, label, group, sources[program], task, queries, router=router,
                               sandbox=sandbox, workers=workers, embed=embed)
            run = optimisations[program]
            row.gepa = {"seed": run["seed"], "budget": run["budget"], "total_metric_calls": run["total_metric_calls"],
                        "candidates": len(run["history"]), "best_score": run["best_score"],
                        "seed_score": run["history"][0]["val_score"] if run["history"] else 0.0,
                        "seconds": run["seconds"]}
        else:
            row = score_program(program, task, queries, router=router, sandbox=sandbox, workers=workers, embed=embed)
        notify(row)  # the scored row itself: label, overall, seconds, error
        return row

    if parallel > 1:
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            rows = list(pool.map(one, programs))
    else:
        rows = [one(p) for p in programs]
    chosen = current_program_embeddings() if isinstance(embed, str) and embed == "current" else embed
    # A corrupt game is one for every program (paper Appendix K): out of the columns' n, said once.
    corrupt = sorted({qid for row in rows for qid in row.corrupt})
    if corrupt:
        notes.append(f"{len(corrupt)} corrupt game{'s' if len(corrupt) > 1 else ''} (no admissible command at "
                     f"reset) left out of every row: {', '.join(corrupt)}")
    return ComparisonTable(task=task.name, split=split, metric=task.metric_name, n=len(queries) - len(corrupt),
                           categories=category_columns(queries, corrupt), rows=rows, notes=notes,
                           program_embeddings=program_embeddings_label(chosen), prompts=current_prompts(),
                           optimisations=optimisations)

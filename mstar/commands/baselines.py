"""`mstar baselines`: score a set of memory programs on a task's test split and print a table
like the paper's Table 1 (per-category columns, Overall last); optionally write it as
markdown + JSON."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from mstar.config import ROLES, RunConfig

from mstar.commands import add_task_options


def register(sub) -> None:
    p = sub.add_parser("baselines", help="compare memory programs on a task's test split (paper Table 1)")
    p.add_argument("--task", default="sample", help="task name (built in: sample) or a .json task file")
    p.add_argument("--data", default=None, help="data file or folder for the task, when it needs one")
    add_task_options(p)
    p.add_argument("--programs", default=None,
                   help="comma-separated programs: built-in names (seeds or baselines) or .py paths "
                        "(default: the paper's baselines plus ACE, GraphMemory and SelfMem)")
    p.add_argument("--split", choices=("test", "validation"), default="test")
    p.add_argument("--limit", type=int, default=None, help="score only the first N queries of the split")
    p.add_argument("--out", default=None,
                   help="write the table to OUT.md and OUT.json (a .md/.json suffix is replaced)")
    p.add_argument("--workers", type=int, default=8, help="concurrent task-agent calls per evaluation")
    p.add_argument("--parallel", type=int, default=1, help="programs evaluated at the same time")
    p.add_argument("--seed", type=int, default=0, help="random seed for the LLM backends")
    p.add_argument("--base-url", default=os.environ.get("MSTAR_BASE_URL"),
                   help="OpenAI-compatible endpoint for every role (env MSTAR_BASE_URL); "
                        "without it and without --model the offline backend serves all roles")
    p.add_argument("--model", default=os.environ.get("MSTAR_MODEL"),
                   help="model for the task, toolkit and judge roles (env MSTAR_MODEL)")
    # resolve_llm (shared with evolve) reads it; no reflector runs here.
    p.add_argument("--reflector-model", default=None, help=argparse.SUPPRESS)
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable that holds the API key")
    p.add_argument("--offline-role", action="append", default=[], choices=ROLES,
                   help="serve this role with the offline backend even when an endpoint is set (repeatable)")
    p.add_argument("--quiet", action="store_true", help="print only the table")
    p.set_defaults(func=cmd_baselines)


def parse_programs(text: str | None) -> list[str]:
    from mstar.comparison import DEFAULT_PROGRAMS
    if not text:
        return list(DEFAULT_PROGRAMS)
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise ValueError("--programs is empty")
    return names


def cmd_baselines(args) -> int:
    from mstar.commands.evolve import resolve_llm
    from mstar.comparison import compare
    from mstar.llm.router import LLMRouter
    from mstar.llm.types import LLMError
    from mstar.program.sources import load_program_source
    from mstar.commands import load_task_or_report, task_options

    try:
        programs = parse_programs(args.programs)
        for p in programs:
            load_program_source(p)
    except (ValueError, FileNotFoundError) as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    task = load_task_or_report(args.task, args.data, **task_options(args))
    if task is None:
        return 2
    try:
        router = LLMRouter.from_config(resolve_llm(args), seed=args.seed)
    except LLMError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2

    def progress(row) -> None:
        if not args.quiet:
            status = f"failed: {row.error}" if row.error else f"{row.overall:.3f}"
            print(f"scored  {row.label:<22} {status}  ({row.seconds:.1f}s)", file=sys.stderr, flush=True)

    if not args.quiet:
        split = task.test if args.split == "test" else task.validation
        n = min(len(split), args.limit) if args.limit else len(split)
        print(f"task    {task.name}: {len(task.episodes)} episodes, {n} {args.split} queries "
              f"({task.metric_name}); {len(programs)} programs", file=sys.stderr)
    try:
        table = compare(task, programs, router=router, sandbox=RunConfig(name="baselines").sandbox,
                        split=args.split, limit=args.limit, workers=args.workers,
                        parallel=max(1, args.parallel), progress=progress)
    except ValueError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    markdown = table.to_markdown()
    print(markdown, end="")
    if args.out:
        out = Path(args.out)
        if out.suffix in (".md", ".json"):
            out = out.with_suffix("")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".md").write_text(markdown, encoding="utf-8")
        out.with_suffix(".json").write_text(table.to_json() + "\n", encoding="utf-8")
        if not args.quiet:
            print(f"files   {out.with_suffix('.md')}, {out.with_suffix('.json')}", file=sys.stderr)
    return 0

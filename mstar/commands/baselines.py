"""`mstar baselines`: score a set of memory programs on a task's test split and print a table
like the paper's Table 1 (per-category columns, Overall last); optionally write it as
markdown + JSON.

Task, scoring and models are chosen as for `mstar evolve`: --theme / --metric pick a rubric
task's theme and the metric (e.g. LoCoMo's L-J with a judge model), --config and the other LLM
flags say who serves each role, --prompts picks the prompt wording, --embed-model what the
programs' chroma collections (and the GEPA rows' split) embed with. The GEPA rows run the `gepa`
library (optional extra) on the evolution's split with a budget of metric calls; --out saves
each optimised constant and its score history beside the table."""
from __future__ import annotations

import sys
from pathlib import Path

from mstar.commands import add_task_options


def register(sub) -> None:
    from mstar.commands.llm_flags import add_llm_args
    from mstar.config import EvolutionConfig
    from mstar.gepa import DEFAULT_BUDGET, DEFAULT_MINIBATCH

    p = sub.add_parser("baselines", help="compare memory programs on a task's test split (paper Table 1)")
    p.add_argument("--run", default=None, metavar="RUN",
                   help="a finished run (folder, or name under runs/): its champion gets a row beside the others, "
                        "and its task (with its data and options) is the default task")
    p.add_argument("--task", default=None, help="task name (built in: sample) or a .json task file (default: "
                                                "the --run's task, else sample)")
    p.add_argument("--data", default=None, help="data file or folder for the task, when it needs one")
    add_task_options(p)
    p.add_argument("--theme", default=None,
                   help="keep one theme of a rubric task: a HealthBench theme (emergency_referrals, "
                        "health_data_tasks, ...) or a PRBench field (finance, legal)")
    p.add_argument("--metric", default=None,
                   help="score with this metric instead of the task's own, e.g. llm_judge (LoCoMo's L-J)")
    p.add_argument("--programs", default=None,
                   help="comma-separated programs: built-in names (seeds or baselines), .py paths, or the GEPA "
                        "rows gepa and gepa_vector_search (default: the paper's Table 1 rows, GEPA included, "
                        "plus ACE, GraphMemory and SelfMem)")
    p.add_argument("--split", choices=("test", "validation"), default="test")
    p.add_argument("--limit", type=int, default=None, help="score only the first N queries of the split")
    p.add_argument("--out", default=None,
                   help="write the table to OUT.md and OUT.json (a .md/.json suffix is replaced); a GEPA row "
                        "also writes OUT.<row>.json (constant, score history) and OUT.<row>.py (the program)")
    p.add_argument("--workers", type=int, default=8, help="concurrent task-agent calls per evaluation")
    p.add_argument("--parallel", type=int, default=1, help="programs evaluated at the same time")
    p.add_argument("--seed", type=int, default=0, help="random seed for the LLM backends and GEPA")
    p.add_argument("--prompts", choices=("mstar", "paper"), default=EvolutionConfig.prompts,
                   help="prompt wording of the task agent, the judges and the reflector: the project's, "
                        "or the paper's (Appendix G/H)")
    p.add_argument("--embed-model", default=EvolutionConfig.embed_model,
                   help="embeddings: auto (all-MiniLM-L6-v2 with the [embed] extra, else hashing), hashing, or "
                        "a sentence-transformers model for the GEPA split. Programs' chroma collections use "
                        "MiniLM when this resolves to it, else lexical hashing")
    p.add_argument("--embed-cache", default=None, metavar="DIR",
                   help="embedding cache folder (default .mstar-cache/embeddings; '' = no cache)")
    g = p.add_argument_group("GEPA rows (pip install 'mstar-evolve[gepa]', or -e \".[gepa]\" in a checkout)")
    g.add_argument("--gepa-budget", type=int, default=DEFAULT_BUDGET, metavar="N",
                   help="metric calls per GEPA run (one call = one query scored)")
    g.add_argument("--gepa-minibatch", type=int, default=DEFAULT_MINIBATCH, metavar="N",
                   help="training queries per GEPA reflection")
    g.add_argument("--split-seed", type=int, default=EvolutionConfig.split_seed, metavar="N",
                   help="seed of the static set and training episodes, as in `mstar evolve`")
    g.add_argument("--static-size", type=int, default=EvolutionConfig.static_size, metavar="N",
                   help="GEPA's validation set: the static set of an evolution run")
    g.add_argument("--train-ratio", type=int, default=None,
                   help="training episodes = ratio x static items (default: the task's own, LoCoMo 0 = all)")
    add_llm_args(p)
    p.add_argument("--quiet", action="store_true", help="print only the table")
    p.set_defaults(func=cmd_baselines)


def parse_programs(text: str | None) -> list[str]:
    from mstar.final.comparison import DEFAULT_ROWS
    if not text:
        return list(DEFAULT_ROWS)
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise ValueError("--programs is empty")
    return names


def run_champion(ref: str) -> tuple[str, dict]:
    """The champion of a finished run as a program path (programs/<id>.py: its row is labelled
    with its id), and the run's task as baselines' options. ValueError when it has none."""
    import json

    from mstar.run.store import RunFormatError, find_run
    try:
        root = find_run(ref)
    except RunFormatError as exc:
        raise ValueError(str(exc)) from None
    try:
        summary = json.loads((root / "summary.json").read_text(encoding="utf-8"))
        config = json.loads((root / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        summary, config = {}, {}
    best = summary.get("best_id")
    if not best or not (root / "programs" / f"{best}.py").is_file():
        raise ValueError(f"run {root} has no champion yet (not finished): `mstar resume {root}` ends it, "
                         "or give its programs with --programs")
    options = config.get("task_options") or {}
    run_task = {"task": config.get("task"), "data": config.get("data"), "theme": config.get("theme"),
                "metric": config.get("metric"), "size": options.get("size"),
                "sample_seed": options.get("sample_seed"), "task_split": options.get("split")}
    return str(root / "programs" / f"{best}.py"), {k: v for k, v in run_task.items() if v is not None}


def _check_numbers(args) -> str | None:
    for flag, value, low in (("--gepa-budget", args.gepa_budget, 1), ("--gepa-minibatch", args.gepa_minibatch, 1),
                             ("--static-size", args.static_size, 1), ("--workers", args.workers, 1)):
        if value < low:
            return f"{flag} {value}: give {low} or more"
    if args.train_ratio is not None and args.train_ratio < 0:
        return f"--train-ratio {args.train_ratio}: give 0 (every episode) or more"
    from mstar.commands.llm_flags import check_llm_numbers
    return check_llm_numbers(args)


def cmd_baselines(args) -> int:
    from mstar import prompts
    from mstar.commands import load_task_or_report, task_options
    from mstar.commands.llm_flags import resolve_llm
    from mstar.final.comparison import OPTIMISED
    from mstar.llm.router import LLMRouter
    from mstar.llm.settings import ConfigError
    from mstar.llm.types import LLMError
    from mstar.program.sources import load_program_source
    from mstar.split.embed import DEFAULT_CACHE_DIR, make_embedder, program_embeddings

    problem = _check_numbers(args)
    if problem:
        print(f"mstar: {problem}", file=sys.stderr)
        return 2
    try:
        programs = parse_programs(args.programs)
        if args.run:
            champion, run_task = run_champion(args.run)
            programs.append(champion)
            for key, value in run_task.items():   # the run's task unless another is named
                if args.task is None and (key == "task" or getattr(args, key, None) is None):
                    setattr(args, key, value)
        args.task = args.task or "sample"
        for p in programs:
            if p not in OPTIMISED:
                load_program_source(p)
    except (ValueError, FileNotFoundError) as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    task = load_task_or_report(args.task, args.data, theme=args.theme, metric=args.metric, **task_options(args))
    if task is None:
        return 2
    cache = DEFAULT_CACHE_DIR if args.embed_cache is None else (args.embed_cache or None)
    try:
        make_embedder(args.embed_model, None)       # a missing model fails here, before any spend
        chosen = program_embeddings(args.embed_model, cache)   # handed to every evaluation
        router = LLMRouter.from_config(resolve_llm(args), seed=args.seed)
    except ValueError as exc:
        print(f"mstar: --embed-model: {exc}", file=sys.stderr)
        return 2
    except (LLMError, ConfigError) as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    previous = prompts.default()
    prompts.use(args.prompts)           # the task agent's and the judges' wording, in every thread
    try:
        return _compare_and_print(args, task, programs, router, chosen, cache)
    finally:
        prompts.use(previous)
        router.close()


def _compare_and_print(args, task, programs, router, chosen, cache) -> int:
    from mstar.final.comparison import OPTIMISED, GepaOptions, compare

    say = (lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))

    def progress(row) -> None:
        status = f"failed: {row.error}" if row.error else f"{row.overall:.3f}"
        say(f"scored  {row.label:<22} {status}  ({row.seconds:.1f}s)")

    split = task.test if args.split == "test" else task.validation
    n = min(len(split), args.limit) if args.limit else len(split)
    say(f"task    {task.name}: {len(task.episodes)} episodes, {n} {args.split} queries "
        f"({task.metric_name}); {len(programs)} programs; prompts {args.prompts}")
    from mstar.split.embed import program_embeddings_label
    say(f"chroma  programs embed with {program_embeddings_label(chosen)}")
    if any(p in OPTIMISED for p in programs):
        from mstar.gepa import available, missing_note
        say(f"gepa    budget {args.gepa_budget} metric calls per row, minibatch {args.gepa_minibatch}"
            if available() else f"note    {missing_note()}")
    gepa = GepaOptions(budget=args.gepa_budget, minibatch=args.gepa_minibatch, seed=args.seed,
                       split_seed=args.split_seed, static_size=args.static_size, train_ratio=args.train_ratio,
                       embed_model=args.embed_model, embed_cache_dir=cache,
                       done=lambda run: say(f"gepa    {run.label:<22} {run.total_metric_calls} metric calls, "
                                            f"{len(run.history)} candidates, best validation {run.best_score:.3f} "
                                            f"({run.seconds:.1f}s)"))
    try:
        table = compare(task, programs, router=router, sandbox=_sandbox(), split=args.split, limit=args.limit,
                        workers=args.workers, parallel=max(1, args.parallel), progress=progress, gepa=gepa,
                        embed=chosen)
    except ValueError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    markdown = table.to_markdown()
    print(markdown, end="")
    if args.out:
        written = _write(table, markdown, Path(args.out))
        say("files   " + ", ".join(str(p) for p in written))
    return 0


def _sandbox():
    from mstar.config import RunConfig
    return RunConfig(name="baselines").sandbox


def _write(table, markdown: str, out: Path) -> list[Path]:
    if out.suffix in (".md", ".json"):
        out = out.with_suffix("")
    out.parent.mkdir(parents=True, exist_ok=True)
    written = [out.with_suffix(".md"), out.with_suffix(".json")]
    written[0].write_text(markdown, encoding="utf-8")
    written[1].write_text(table.to_json() + "\n", encoding="utf-8")
    from mstar.gepa.optimise import GepaRun
    for name, run in table.optimisations.items():
        written += GepaRun(**run).save(out.parent / f"{out.name}.{name}")
    return written

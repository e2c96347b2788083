"""`mstar evolve`: launch an evolution run (also `python evolve.py ...`)."""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

from mstar.commands import add_task_options, task_options
from mstar.config import ROLES, EvolutionConfig, RunConfig, SandboxConfig
from mstar.run.live_spend import both, cache_line
from mstar.run.progress import ProgressPrinter  # noqa: F401  (re-exported: it used to live here)
# The LLM flags every command shares live in llm_flags.py; re-exported here, where they used to be.
from mstar.commands.llm_flags import add_llm_args, check_llm_numbers, paced_line, resolve_llm  # noqa: F401


def register(sub) -> None:
    p = sub.add_parser("evolve", help="launch an evolution run")
    add_evolve_args(p)
    p.set_defaults(func=cmd_evolve)


def add_evolve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", default="sample",
                   help="sample, locomo, healthbench, prbench, formula, finer, alfworld, alfworld-synth, jsonl, "
                        "json, or a .json/.toml "
                        "task file (see docs/tasks.md)")
    p.add_argument("--data", default=None, help="data file or folder for the task, when it needs one")
    add_task_options(p, split_alias=True)
    p.add_argument("--theme", default=None,
                   help="keep one theme of a rubric task: a HealthBench theme (emergency_referrals, "
                        "health_data_tasks, ...) or a PRBench field (finance, legal)")
    p.add_argument("--metric", default=None,
                   help="score with this metric instead of the task's own, e.g. llm_judge (LoCoMo's L-J)")
    p.add_argument("--train-ratio", type=int, default=None,
                   help="training episodes = ratio x static items, chosen by facility location; 0 = every "
                        "episode (default: the task's own, LoCoMo 0, else 5)")
    p.add_argument("--embed-model", default=EvolutionConfig.embed_model,
                   help="embeddings for subset selection: auto (all-MiniLM-L6-v2 with the [embed] extra, "
                        "else hashing), hashing, or a sentence-transformers model name / local folder")
    p.add_argument("--embed-cache", default=None, metavar="DIR",
                   help="embedding cache folder (default .mstar-cache/embeddings; '' = no cache)")
    p.add_argument("--iterations", type=int, default=EvolutionConfig.iterations)
    p.add_argument("--seed", type=int, default=0, help="random seed: same seed + backend = same lineage")
    p.add_argument("--name", default=None, help="run name (default: <task>-s<seed>-<time>)")
    p.add_argument("--runs-dir", default="runs", help="folder that holds run folders")
    p.add_argument("--out", default=None, help="the run folder itself (overrides --runs-dir/--name)")
    p.add_argument("--seeds", default=None,
                   help="comma-separated seed programs: built-in names (seeds or baselines, e.g. "
                        "ace,graph_memory,mem0) or .py paths "
                        "(default: vector_search,llm_summarizer,experience_learner)")
    p.add_argument("--workers", type=int, default=EvolutionConfig.workers, help="concurrent task-agent calls")
    p.add_argument("--static-size", type=int, default=EvolutionConfig.static_size)
    p.add_argument("--mode", choices=("all", "instructions", "code"), default="all",
                   help="ablation (paper Table 2): evolve everything, only the instruction constants, or only the code")
    p.add_argument("--prompt-budget", type=int, default=EvolutionConfig.prompt_budget_tokens,
                   help="token budget of the reflection prompt; optional sections are cut, visibly, to fit")
    p.add_argument("--parallel", type=int, default=EvolutionConfig.parallel, metavar="K",
                   help="iterations in flight at once (default 1: the paper's loop, exactly reproducible)")
    p.add_argument("--rotating", choices=("fresh", "reuse"), default=EvolutionConfig.rotating,
                   help="fresh: evaluate the parent on a new rotating batch each iteration (paper); "
                        "reuse: show the reflector the parent's static-set cases (the official code)")
    p.add_argument("--no-prefetch", dest="prefetch", action="store_false",
                   help="with --rotating fresh, do not evaluate the next iteration's rotating batch ahead (by "
                        "default it is, for the likely next parents, while this iteration works: its replies are "
                        "in the cache when the guess is right; 5 questions' requests are spent when it is not)")
    p.add_argument("--keep-sessions", type=int, default=EvolutionConfig.keep_sessions, metavar="N",
                   help="ingested knowledge bases kept alive for reuse (0 = re-ingest every time)")
    p.add_argument("--executor", choices=("local", "ray"), default=EvolutionConfig.executor,
                   help="where evaluations run: this machine, or a Ray cluster (pip install -e '.[ray]')")
    p.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="with --executor ray: auto, HOST:PORT, or nothing for a new local Ray")
    add_algorithm_args(p)
    add_llm_args(p)
    p.add_argument("--no-preflight", action="store_true",
                   help="skip the one cheap call per LLM role that checks key, model and URL before the run")
    p.add_argument("--max-usd", type=float, default=None,
                   help="hard budget in dollars: the run stops at an iteration boundary (warnings at 50%% and 80%%)")
    p.add_argument("--max-tokens", type=int, default=None, help="hard budget in billed tokens, like --max-usd")
    p.add_argument("--quiet", action="store_true", help="print only the final summary")


def add_algorithm_args(p: argparse.ArgumentParser) -> None:
    """The algorithm's own knobs (paper Table 7 and the ablations of Table 2)."""
    ev = EvolutionConfig
    p.add_argument("--selection", choices=("softmax", "max", "latest"), default=ev.selection,
                   help="parent selection: softmax over static scores (paper), the best, or the newest")
    p.add_argument("--tau", type=float, default=ev.tau, help="softmax temperature of parent selection (> 0)")
    p.add_argument("--toolkit-budget", type=int, default=SandboxConfig.llm_calls_per_op, metavar="N",
                   help="toolkit LLM calls a program may make per write or read (0 = none)")
    p.add_argument("--runtime-fix-rounds", type=int, default=ev.runtime_fix_rounds, metavar="N",
                   help="times a child that fails at run time goes back to the reflector with the error")
    p.add_argument("--split-seed", type=int, default=ev.split_seed, metavar="N",
                   help="seed of the static set and training episodes (--seed varies the evolution only)")
    p.add_argument("--confirm-top", type=int, default=ev.confirm_top, metavar="N",
                   help="before the test, the N best programs by static score race on paired evidence")
    p.add_argument("--confirm-size", type=int, default=ev.confirm_size, metavar="N",
                   help="the most validation items that race may buy while it is undecided (0 = no confirmation)")
    p.add_argument("--confirm-rounds", type=int, default=ev.confirm_rounds, metavar="N",
                   help="... in at most N batches of about SIZE/N items (1 = one sample)")
    p.add_argument("--confirm-budget", type=float, default=ev.confirm_budget, metavar="SHARE",
                   help="... spending at most this share of the tokens the run asked before it, each "
                        "racer's items priced at its own cost per question (default %(default)s)")
    p.add_argument("--pick", choices=("confirmed", "static"), default=ev.pick,
                   help="the champion: the confirmation's leader, or the best static score (the paper)")
    p.add_argument("--test-both", action="store_true",
                   help="also score the other rule's choice on the test, to compare the rules (one more "
                        "test evaluation when they differ)")
    p.add_argument("--prompts", choices=("mstar", "paper"), default=ev.prompts,
                   help="prompt wording: the project's, or the paper's (Appendix G/H)")
    p.add_argument("--patience", type=int, default=ev.patience, metavar="N",
                   help="end the run after N iterations in a row without a significant gain (a child better, "
                        "paired, than the best program as of the last gain); the champion is still confirmed and "
                        "tested (default: run every iteration)")


def resolve_config(args) -> RunConfig:
    name = args.name or f"{args.task}-s{args.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    runs_dir = args.runs_dir
    if args.out:
        out = Path(args.out)
        name, runs_dir = out.name, str(out.parent)
    seeds = tuple(s.strip() for s in args.seeds.split(",") if s.strip()) if args.seeds else RunConfig.seeds
    evo = replace(EvolutionConfig(), iterations=args.iterations, seed=args.seed, workers=args.workers,
                  static_size=args.static_size, mode=args.mode, prompt_budget_tokens=args.prompt_budget,
                  train_ratio=getattr(args, "train_ratio", None),
                  embed_model=getattr(args, "embed_model", EvolutionConfig.embed_model),
                  embed_cache_dir=_embed_cache(getattr(args, "embed_cache", None)),
                  parallel=args.parallel, rotating=args.rotating, keep_sessions=args.keep_sessions,
                  prefetch=getattr(args, "prefetch", True),
                  executor=args.executor, ray_address=args.ray_address)
    evo = replace(evo, **{field: getattr(args, field) for field in ALGORITHM_FIELDS if hasattr(args, field)})
    sandbox = replace(SandboxConfig(), llm_calls_per_op=getattr(args, "toolkit_budget", SandboxConfig.llm_calls_per_op))
    return RunConfig(name=name, task=args.task, data=args.data, runs_dir=runs_dir, seeds=seeds,
                     theme=getattr(args, "theme", None), metric=getattr(args, "metric", None),
                     task_options=task_options(args), evolution=evo, sandbox=sandbox, llm=resolve_llm(args))


ALGORITHM_FIELDS = ("selection", "tau", "runtime_fix_rounds", "split_seed", "confirm_top", "confirm_size",
                    "confirm_rounds", "confirm_budget", "pick", "test_both", "prompts", "patience")


def check_numbers(args) -> str | None:
    """The first numeric flag out of range, as one line; None when all are fine."""
    rules = (("iterations", 0, "0 or more"), ("static_size", 1, "1 or more"), ("workers", 1, "1 or more"),
             ("parallel", 1, "1 or more (1 = one iteration at a time)"), ("keep_sessions", 0, "0 or more"),
             ("prompt_budget", 1000, "1000 or more"), ("toolkit_budget", 0, "0 or more"),
             ("runtime_fix_rounds", 0, "0 or more"), ("confirm_top", 1, "1 or more"),
             ("confirm_size", 0, "0 or more (0 = no confirmation)"), ("confirm_rounds", 1, "1 or more"),
             ("patience", 1, "1 or more iterations"))
    for name, low, what in rules:
        value = getattr(args, name, None)
        if value is not None and value < low:
            return f"--{name.replace('_', '-')} {value}: give {what}"
    ratio = getattr(args, "train_ratio", None)
    if ratio is not None and ratio < 0:
        return f"--train-ratio {ratio}: give 0 (every episode) or more"
    tau = getattr(args, "tau", None)
    if tau is not None and not tau > 0:  # also NaN
        return f"--tau {tau}: give a temperature above 0, e.g. {EvolutionConfig.tau}"
    share = getattr(args, "confirm_budget", None)
    if share is not None and not 0 < share <= 10:   # also NaN
        return f"--confirm-budget {share}: give a share of the tokens the run asked above 0, e.g. 0.1 (10%)"
    for flag in ("max_usd", "max_tokens"):
        value = getattr(args, flag, None)
        if value is not None and not value > 0:
            return f"--{flag.replace('_', '-')} {value}: give a budget above 0"
    return check_llm_numbers(args)


def _embed_cache(value: str | None) -> str | None:
    from mstar.split.embed import DEFAULT_CACHE_DIR
    return DEFAULT_CACHE_DIR if value is None else (value or None)


def cmd_evolve(args) -> int:
    """Everything that can be checked is checked before the run folder exists and before any
    spend: flags, config, task, embeddings, seeds (the sandbox's gates), the cluster, the LLM
    endpoints (one call per role). Then the run, guarded: Ctrl-C, SIGTERM and a full or
    read-only disk end it with one line and the command that continues it (mstar/commands/exits.py)."""
    from mstar.commands import load_task_or_report
    from mstar.commands.exits import RunGuard
    from mstar.llm.settings import ConfigError
    from mstar.run.store import RunStore

    problem = check_numbers(args)
    if problem:
        print(f"mstar: {problem}", file=sys.stderr)
        return 2
    try:
        cfg = resolve_config(args)
    except ConfigError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    task = load_task_or_report(cfg.task, cfg.data, theme=cfg.theme, metric=cfg.metric, **cfg.task_options)
    if task is None:
        return 2
    from mstar.split.embed import make_embedder
    try:  # a missing embedding model fails here, before a run folder exists (loading is lazy)
        make_embedder(cfg.evolution.embed_model, None)
    except ValueError as exc:
        print(f"mstar: --embed-model: {exc}", file=sys.stderr)
        return 2
    store = RunStore(Path(cfg.runs_dir) / cfg.name)
    try:
        store.check_new()
    except FileExistsError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    with RunGuard() as guard:  # Ctrl-C during the checks below is one line too
        return guard.run(lambda: _checked_run(cfg, task, store, args, guard))


def _checked_run(cfg, task, store, args, guard) -> int:
    """The checks that start processes or make calls, then the run folder and the run itself."""
    from mstar.commands.exits import disk_line, disk_problem
    from mstar.commands.prechecks import check_seeds, preflight
    from mstar.commands.wiring import make_router

    problem = check_seeds(cfg.seeds, cfg.sandbox)  # a bad seed name or file fails before a folder exists
    if problem:
        print(f"mstar: {problem}", file=sys.stderr)
        return 2
    if cfg.evolution.executor == "ray":  # an unreachable cluster fails here, before a run folder exists
        from mstar.execution import ExecutorError
        from mstar.execution.ray_cluster import connect
        try:
            connect(cfg.evolution.ray_address)
        except ExecutorError as exc:
            print(f"mstar: {exc}", file=sys.stderr)
            return 2
    router = make_router(cfg)
    if router is None:
        return 2
    if not getattr(args, "no_preflight", False):
        code = preflight(router, quiet=args.quiet)
        if code is not None:
            return code
    try:
        store.create()
        store.acquire_lock()  # held while this process runs it: `mstar runs` shows the run as running
        store.write_config(cfg.to_dict())
    except OSError as exc:
        if disk_problem(exc) is None:
            raise
        print(disk_line(exc, store.root, resumable=False), file=sys.stderr)
        return 1
    guard.store = store
    try:
        return _run(cfg, task, store, router, args)
    finally:
        store.release_lock()


def _run(cfg, task, store, router, args) -> int:
    from mstar.commands.wiring import attach_store, live_display, seed_ids
    from mstar.loop import Evolution
    from mstar.run.projection import for_run

    live = live_display(router, args.quiet)
    lost = attach_store(router, store, live)
    print(f"run     {store.root}")
    print(f"task    {task.name}: {len(task.episodes)} episodes, {len(task.validation)} validation, "
          f"{len(task.test)} test queries ({task.metric_name})")
    for role, desc in router.describe().items():
        print(f"llm     {role:<10} {desc}")
    if router.limiters:
        print(f"llm     at most {router.max_in_flight} calls in flight over all roles; a 429 paces every caller "
              "of its endpoint together" + paced_line(cfg))
    progress = ProgressPrinter(cfg.evolution.iterations, args.quiet, ids=seed_ids(cfg),
                               patience=cfg.evolution.patience)
    evo = Evolution(cfg, task, router, store, progress=progress)
    progress.projection = for_run(router, cfg, task, evo)
    progress = both(progress, live_spend(router, cfg, task, evo, quiet=args.quiet))
    if live is not None:
        progress = both(live.pause, progress)
    evo.progress = progress
    print(f"split   static {len(evo.static)} | rotating pool {len(evo.split.rotating_pool)} | "
          f"training episodes {len(evo.train)} | embeddings {evo.split.config.embedder}")
    try:
        summary = evo.run()
    finally:
        if live is not None:
            live.stop()
        router.close()
    print_done(summary, store.root)
    print(f"llm     {router.ledger.spend_line()}")
    saved = cache_line(router)
    if saved:
        print(saved)
    if lost:
        print(f"mstar: warning: {len(lost)} LLM usage record(s) could not be written to "
              f"{store.root / 'llm_usage.jsonl'}: {lost[0]}", file=sys.stderr)
    return exit_code(summary)


def exit_code(summary) -> int:
    """0 finished (or stopped by the budget the user set); 3 stopped because the endpoint failed."""
    return 3 if summary.stop_kind == "endpoint" else 0


def live_spend(router, cfg, task, evo, *, quiet: bool):
    """Spend per role after each event, and the whole run's estimate after the seeds (mstar/run/live_spend.py)."""
    from mstar.run.live_spend import LiveSpend
    from mstar.program.sources import load_program_source
    paid = any(cfg.llm.role(r).backend != "offline" for r in ROLES) or router.ledger.budget.active
    return LiveSpend(router, n_seeds=len(cfg.seeds), iterations=cfg.evolution.iterations,
                     train_episodes=len(evo.train), static_size=len(evo.static),
                     rotating_size=cfg.evolution.rotating_size, test_episodes=len(task.episodes),
                     test_queries=len(task.test), seed_sources=[load_program_source(s)[1] for s in cfg.seeds],
                     read_max_chars=cfg.sandbox.read_max_chars, prompt_budget=cfg.evolution.prompt_budget_tokens,
                     show=paid and not quiet)


def test_line(summary) -> str:
    """The held-out verdict: the best program's test score beside the best seed's, paired."""
    if summary.test_score is None:
        return "test    not run"
    line = f"test    {summary.best_id} {summary.test_score:.3f}"
    gain = getattr(summary, "test_gain", None)
    if not gain:
        return line + " (the best program is the best seed)"
    verdict = ("the gain holds" if gain["mean"] > 0 else "the seed is better") if gain["significant"] \
        else "no difference can be told on these questions"
    return (line + f" vs best seed {summary.best_seed_id} {summary.best_seed_test:.3f}: {gain['mean']:+.3f} "
            f"[{gain['low']:+.3f}, {gain['high']:+.3f}] (95% paired, {gain['n']} questions) -- {verdict}")


def print_done(summary, root) -> None:
    if summary.stop_reason:
        from mstar.llm.budget import budget_flag
        flag = budget_flag(summary.stop_reason)
        if summary.stop_kind == "budget" and flag:
            command, hint = f"mstar resume {root} {flag} LARGER", f"the run spent its {flag}; give a larger one"
        else:
            command, hint = f"mstar resume {root}", ("with a larger budget" if summary.stop_kind == "budget"
                                                     else "once the endpoint works again")
        print(f"stopped {summary.stop_reason}")
        print(f"resume  {command}  ({hint}); no test evaluation was run, nothing done is lost")
    if summary.best_id is None:
        print(f"done    no program was scored; {summary.seconds:.1f}s")
        return
    if getattr(summary, "early_stop", None):
        print(f"ended   after iteration {summary.iterations}: {summary.early_stop}")
    print(f"done    best {summary.best_id} static {summary.best_static:.3f} (best seed "
          f"{summary.best_seed_static:.3f}); {summary.children_added}/{summary.iterations} iterations added "
          f"a child; {summary.seconds:.1f}s")
    print(test_line(summary))
    print(f"files   {root}/best_program.py, lineage.jsonl, programs/, cases/")
    print(f"next    mstar lineage {root} | mstar report {root} | mstar export {root} --out best.py")

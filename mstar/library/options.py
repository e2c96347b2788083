"""The options of an evolution run, defined once: `mstar evolve --flag` and `mstar.evolve(flag=...)`.

The argparse parser built here is the one definition of every option -- name, type, default,
choices, help. The command line parses its arguments with it; the Python API builds the same
namespace from keywords (`namespace_from_keywords`): each keyword is the flag's name with
underscores (--static-size -> static_size), checked against the flag's type and choices, and a
keyword the parser does not know is refused with the closest names. Both then take the same
path (mstar/library/launch.py), so a flag and its keyword cannot drift apart.
"""
from __future__ import annotations

import argparse
import difflib
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from mstar.config import EvolutionConfig, RunConfig, SandboxConfig
from mstar.library.llm_options import add_llm_args, check_llm_numbers, resolve_llm

TRACKERS = ("mlflow", "wandb")


class OptionError(ValueError):
    """An option that cannot be used: unknown (with close names), of the wrong type, out of range."""


def evolve_parser(prog: str = "mstar evolve") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="launch an evolution run", allow_abbrev=False)
    add_evolve_args(p)
    return p


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
    p.add_argument("--name", default=None,
                   help="run name: one folder under --runs-dir (default: <task>-s<seed>-<time>)")
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
    p.add_argument("--guess-worth", type=float, default=EvolutionConfig.guess_worth, metavar="TOKENS",
                   help="prompt tokens one second of wall time is worth: a guess ahead is sent only when the "
                        "seconds it is likely to save, at this price, outweigh the tokens it is likely to waste "
                        "(default %(default)g; 0: only sure guesses; mstar/iteration/rotating_prefetch.py)")
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
    p.add_argument("--quiet", action="store_true",
                   help="print the run's header and its end only: no line per program, no live display")
    p.add_argument("--track", default=None, metavar="NAME[,NAME]",
                   help="also log the run to an experiment tracker: mlflow (the [mlflow] extra; a SQLite "
                        "store in ./mlruns/ unless MLFLOW_TRACKING_URI says otherwise) and/or wandb (the [wandb] "
                        "extra; offline unless WANDB_MODE says otherwise)")


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
                   help="before the test, the programs that may be the best race on paired evidence: every one "
                        "whose optimistic estimate reaches the leader's pessimistic one, and at least these N "
                        "best (mstar/final/race_entry.py)")
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
    name = run_name(args)
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
                  guess_worth=getattr(args, "guess_worth", EvolutionConfig.guess_worth),
                  executor=args.executor, ray_address=args.ray_address)
    evo = replace(evo, **{field: getattr(args, field) for field in ALGORITHM_FIELDS if hasattr(args, field)})
    sandbox = replace(SandboxConfig(), llm_calls_per_op=getattr(args, "toolkit_budget", SandboxConfig.llm_calls_per_op))
    return RunConfig(name=name, task=args.task, data=args.data, runs_dir=runs_dir, seeds=seeds,
                     theme=getattr(args, "theme", None), metric=getattr(args, "metric", None),
                     task_options=task_options(args), evolution=evo, sandbox=sandbox, llm=resolve_llm(args))


def run_name(args) -> str:
    """The run's folder under --runs-dir: --name, or <task>-s<seed>-<time>. It must be one folder:
    `mstar runs` lists the folders of --runs-dir, so a run at runs/my/task-s0-... is never listed
    (and `--task /data/t.json` would have put it beside the data). --out takes a path."""
    if args.name:
        if any(sep in args.name for sep in PATH_SEPARATORS) or args.name in (".", ".."):
            raise OptionError(f"--name {args.name!r}: a run's name is one folder under --runs-dir; "
                              "give a path with --out (out= in Python)")
        return args.name
    task = args.task
    if Path(task).suffix in (".json", ".toml"):   # a task file: named by its file, not its folders
        task = Path(task).name
    for sep in PATH_SEPARATORS:                    # a Task named "team/pets" -> runs/team-pets-s0-...
        task = task.replace(sep, "-")
    return f"{task}-s{args.seed}-{time.strftime('%Y%m%d-%H%M%S')}"


PATH_SEPARATORS = ("/", "\\")


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
    worth = getattr(args, "guess_worth", None)
    if worth is not None and not 0 <= worth < float("inf"):   # also NaN
        return f"--guess-worth {worth}: give the prompt tokens a second is worth, 0 or more, e.g. 4000"
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


def add_task_options(p, split_alias: bool = False) -> None:
    """A loader's own options, shared by evolve, eval and baselines (stored in the run's config).
    `split_alias`: also accept ALFWorld's --split seen|unseen (the issue's spelling) where --split
    does not already pick the evaluated queries (eval and baselines use it for test|validation)."""
    p.add_argument("--size", type=float, default=None,
                   help="size of the generated sample task (default 1: 50 sessions, 153 validation and "
                        "357 test questions; 0.1-3.5)")
    p.add_argument("--sample-seed", type=int, default=None, help="seed of the generated sample task (default 0)")
    flags = ("--task-split", "--split") if split_alias else ("--task-split",)
    p.add_argument(*flags, dest="task_split", choices=("seen", "unseen"), default=None,
                   help="ALFWorld games to validate and test on: seen (valid_seen) or unseen (valid_unseen, "
                        "with its corrupt games); default seen")


def task_options(args) -> dict:
    """The loader options given on the command line (see add_task_options)."""
    named = {"size": getattr(args, "size", None), "sample_seed": getattr(args, "sample_seed", None),
             "split": getattr(args, "task_split", None)}
    return {k: v for k, v in named.items() if v is not None}


# ------------------------------------------------------------------ the Python API's side
# Keywords the API takes itself, beside the options: not flags.
API_KEYWORDS = ("task", "llm", "on_event", "out")


def option_defaults() -> dict[str, Any]:
    """Every option's name (the parser's dest) and default, as `mstar.evolve` takes them."""
    return {a.dest: a.default for a in evolve_parser()._actions if a.dest not in ("help", "task")}


def namespace_from_keywords(task_name: str, keywords: dict[str, Any]) -> argparse.Namespace:
    """The namespace the command line would have parsed, from `mstar.evolve`'s keywords."""
    parser = evolve_parser()
    actions = {a.dest: a for a in parser._actions if a.dest != "help"}
    ns = parser.parse_args([])
    ns.task = task_name
    for key, value in keywords.items():
        action = actions.get(key)
        if action is None or key == "task":
            close = difflib.get_close_matches(key, [*actions, *API_KEYWORDS], n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else "; see mstar.options() for every option"
            raise OptionError(f"mstar.evolve: unknown option {key!r}{hint}")
        setattr(ns, key, _checked(key, action, value))
    return ns


def _checked(key: str, action: argparse.Action, value: Any) -> Any:
    """`value` as the parser would have produced it, or OptionError naming the option."""
    if value is None:
        return None
    if key == "seeds" and isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    if key == "track" and isinstance(value, (list, tuple)):
        value = ",".join(value)
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        if not isinstance(value, bool):
            raise OptionError(f"mstar.evolve: {key} must be True or False, got {value!r}")
        return value
    if isinstance(action, argparse._AppendAction):
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
            raise OptionError(f"mstar.evolve: {key} must be a list of strings, got {value!r}")
        for v in items:
            _check_choice(key, action, v)
        return list(items)
    kind = action.type
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise OptionError(f"mstar.evolve: {key} must be an integer, got {value!r}")
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise OptionError(f"mstar.evolve: {key} must be a number, got {value!r}")
        value = float(value)
    if kind is None and not isinstance(value, (str, Path)):
        raise OptionError(f"mstar.evolve: {key} must be a string, got {type(value).__name__}")
    if isinstance(value, Path):
        value = str(value)
    _check_choice(key, action, value)
    return value


def _check_choice(key: str, action: argparse.Action, value: Any) -> None:
    if action.choices is not None and value not in action.choices:
        raise OptionError(f"mstar.evolve: {key}={value!r}: choose one of {', '.join(map(str, action.choices))}")


def trackers_of(value: str | None) -> list[str]:
    names = [n.strip() for n in (value or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in TRACKERS]
    if unknown:
        raise OptionError(f"--track {value}: unknown tracker {', '.join(unknown)}; known: {', '.join(TRACKERS)}")
    return names

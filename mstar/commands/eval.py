"""`mstar eval PROGRAM --task T [--split test|validation|static]`: score any program file (a seed,
a baseline, an exported winner) on a task, with per-category scores. PROGRAM may be a run folder:
its champion (best_program.py) is scored, under this command's task options and LLM options (offline
without them), which may differ from the run's: a warning names what differs.

Splits, with the episodes each one ingests:
  test        the task's held-out queries; every episode (as a run's final test)
  validation  every validation query; every episode
  static      a run's static set for --seed/--static-size; the training episodes a run with
              those settings would choose -- the same score that run gives the program
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

SPLITS = ("test", "validation", "static")

from mstar.commands import add_task_options


def register(sub) -> None:
    from mstar.commands.llm_flags import add_llm_args
    from mstar.config import EvolutionConfig

    p = sub.add_parser("eval", help="score a program file on a task (per-category scores)")
    p.add_argument("program", help="a .py memory program (e.g. from `mstar export`), a built-in seed name, or a "
                                    "run folder (its champion, best_program.py, is scored; give the run's "
                                    "--size and LLM options to score it as the run did)")
    p.add_argument("--task", required=True, help="task name or task file (as for `mstar evolve`)")
    p.add_argument("--data", default=None, help="data file or folder for the task, when it needs one")
    add_task_options(p)
    p.add_argument("--theme", default=None, help="keep one theme of a rubric task")
    p.add_argument("--metric", default=None, help="score with this metric instead of the task's own")
    p.add_argument("--split", choices=SPLITS, default="test", help="which queries to score (default: test)")
    p.add_argument("--split-seed", "--seed", dest="seed", type=int, default=EvolutionConfig.split_seed,
                   help="split seed (static split only; default %(default)s, the one `mstar evolve` uses)")
    p.add_argument("--static-size", type=int, default=EvolutionConfig.static_size, help="static split size")
    p.add_argument("--train-ratio", type=int, default=None,
                   help="static split: training episodes = ratio x static items (default: the task's own, else 5)")
    p.add_argument("--workers", type=int, default=EvolutionConfig.workers, help="concurrent task-agent calls")
    p.add_argument("--cases-out", default=None, metavar="FILE", help="write every case's full record here (JSON)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_llm_args(p)
    p.set_defaults(func=cmd_eval)


def program_of(ref: str) -> tuple[str, str]:
    """(name, source) of what to score: a .py file, a built-in program, or a run folder -- then the
    run's champion, its best_program.py (before the run has written one: its best program so far)."""
    from mstar.program.sources import load_program_source
    from mstar.run.views import RunView

    path = Path(ref)
    if not path.is_dir():
        return load_program_source(ref)
    if not (path / "config.json").is_file():
        raise ValueError(f"{ref} is a folder, not a program: give a .py file, a built-in program name, or a run "
                         "folder (its champion, best_program.py, is scored)")
    best = path / "best_program.py"
    if best.is_file():
        return f"{path.name}/best_program", best.read_text(encoding="utf-8")
    view = RunView(path)
    source = view.source(view.best_id) if view.best_id else None
    if source is None:
        raise ValueError(f"run {ref} has no evaluated program yet: nothing to score")
    return f"{path.name}/{view.best_id}", source


def _queries_and_episodes(task, args):
    if args.split == "test":
        return list(task.test), list(task.episodes)
    if args.split == "validation":
        return list(task.validation), list(task.episodes)
    from mstar.split import make_split
    ratio = args.train_ratio if args.train_ratio is not None else \
        (task.train_ratio if getattr(task, "train_ratio", None) is not None else 5)
    from mstar.config import EvolutionConfig
    from mstar.split.embed import DEFAULT_CACHE_DIR, make_embedder
    # The same embedder `mstar evolve` uses by default, so the static set is the run's.
    embedder = make_embedder(EvolutionConfig.embed_model, DEFAULT_CACHE_DIR)
    split = make_split(task, embedder, static_size=args.static_size, train_ratio=ratio, seed=args.seed)
    return [task.validation[i] for i in split.static], [task.episodes[i] for i in split.train_episodes]


def cmd_eval(args) -> int:
    from mstar.commands.llm_flags import check_llm_numbers, resolve_llm
    from mstar.config import SandboxConfig
    from mstar.evaluation import EndpointOutage, ScorerOutage, evaluate
    from mstar.llm.router import LLMRouter
    from mstar.llm.types import FatalLLMError, LLMError
    from mstar.run import xray_text
    from mstar.run.store import atomic_write_text
    from mstar.commands import load_task_or_report, task_options
    from sandbox.engine.terminal import terminal_safe

    problem = check_llm_numbers(args)
    if problem:
        print(f"mstar: {problem}", file=sys.stderr)
        return 2
    try:
        label, source = program_of(args.program)
    except (ValueError, OSError) as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    task = load_task_or_report(args.task, args.data, theme=args.theme, metric=args.metric, **task_options(args))
    if task is None:
        return 2
    queries, episodes = _queries_and_episodes(task, args)
    if not queries:
        print(f"mstar: task {task.name!r} has no {args.split} queries", file=sys.stderr)
        return 2
    try:
        llm = resolve_llm(args)
        router = LLMRouter.from_config(llm, seed=args.seed)
    except (LLMError, ValueError) as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    # A run's champion scored otherwise than the run scored it is a fair request, but not a silent one.
    differs = differs_from_run(Path(args.program), args, llm) if Path(args.program).is_dir() else []
    if differs:
        print(terminal_safe(f"mstar: warning: not the conditions of run {args.program}: {'; '.join(differs)}; "
                            "give the run's options (and its --config, or --base-url / --model) to score it "
                            "as the run did", newlines=False), file=sys.stderr)
    t0 = time.perf_counter()
    try:
        res = evaluate(source, episodes, queries, metric=task.score, router=router, sandbox=SandboxConfig(),
                       workers=args.workers)
    except ScorerOutage as exc:   # nothing could be scored: no score is printed, least of all a 0
        print(terminal_safe(f"mstar: {label} was not scored: {exc}", newlines=False), file=sys.stderr)
        return 3
    except (EndpointOutage, FatalLLMError) as exc:
        # As `mstar evolve` stops on it: one line and rc 3. A score from an endpoint that did not
        # answer would say nothing about the program, so none is printed.
        kind = "rejected the requests" if isinstance(exc, FatalLLMError) else "failed"
        print(terminal_safe(f"mstar: the LLM endpoint {kind} during the evaluation, so {label} was not scored: "
                            f"{exc}", newlines=False), file=sys.stderr)
        return 3
    finally:
        router.close()
    not_ingested = [w.ingest_error for w in res.writes if w.ingest_error]
    out = {"program": args.program, "name": label, "task": task.name, "split": args.split,
           "metric": getattr(task, "metric_name", None), "queries": len(queries), "episodes": len(episodes),
           "mean_score": res.mean_score, "per_category": res.per_category,
           "counts": _counts(c.category for c in res.cases), "error": res.error,
           "failed_cases": sum(1 for c in res.cases if c.error), "ingest_errors": res.ingest_errors,
           # Left out of the mean (an LLM call or the task's scorer failed), per category as well.
           "case_errors": res.case_errors, "score_errors": res.score_errors,
           "not_scored": _counts(c.category for c in res.cases if c.llm_error or c.score_error),
           "xray": res.xray, "llm": router.totals(), "differs_from_run": differs,
           "models": {r: {"backend": llm.role(r).backend, "model": llm.role(r).model,
                          "base_url": llm.role(r).base_url} for r in EVAL_ROLES},
           "seconds": round(time.perf_counter() - t0, 3)}
    if args.cases_out:
        atomic_write_text(Path(args.cases_out), json.dumps({**out, "result": res.to_dict()}, indent=2,
                                                            ensure_ascii=False, default=str) + "\n")
    if args.json:
        print(json.dumps(out, indent=2, default=str))
    else:
        print(f"program {label} ({args.program})")
        ingested = len(episodes) - res.ingest_errors
        print(f"task    {task.name}, split {args.split}: {len(queries)} queries, {ingested} episodes ingested"
              + (f" of {len(episodes)}" if res.ingest_errors else ""))
        served = router.describe()
        for role in EVAL_ROLES:   # who answered: a score says little without it
            print(terminal_safe(f"llm     {role:<10} {served[role]}", newlines=False))
        if res.ingest_errors:     # the score is of a memory that misses these episodes
            print(terminal_safe(f"warning {res.ingest_errors} episode(s) not ingested, the score is of a memory "
                                f"without them: {not_ingested[-1]}", newlines=False))
        if res.error:
            print(terminal_safe(f"error   the program failed as a whole: {res.error.get('message', res.error)}",
                                newlines=False))
        if res.case_errors:      # the score is a mean over the other cases
            last = next(c.score_error or c.llm_error for c in reversed(res.cases) if c.score_error or c.llm_error)
            llm = res.case_errors - res.score_errors
            why = " and ".join(([f"an LLM call failed on {llm}"] if llm else [])
                               + ([f"the task's scorer failed on {res.score_errors}"] if res.score_errors else []))
            print(terminal_safe(f"warning {res.case_errors} case(s) not scored, left out of the mean: {why}; "
                                f"last error: {last}", newlines=False))
        print(f"score   {res.mean_score:.4f} ({out['metric']})")
        for cat in sorted({*res.per_category, *out["not_scored"]}):   # a category nothing scored too
            value = res.per_category.get(cat)
            lost = out["not_scored"].get(cat, 0)
            print(f"  {cat:<24} " + (f"{value:.4f}" if value is not None else "  -   ")
                  + f"  (n={out['counts'].get(cat, 0)}" + (f", {lost} not scored)" if lost else ")"))
        if res.xray:   # where the wrong answers were lost (a task that knows its evidence)
            print(f"x-ray   {xray_text.one_line(res.xray)}")
            for line in xray_text.category_lines(res.xray):
                print(f"  {line}")
    return 1 if res.error else 0


def differs_from_run(run: Path, args, llm) -> list[str]:
    """How this evaluation's task and models differ from those of the run whose champion it
    scores: the task options given or left out, and who serves the roles an evaluation calls."""
    from mstar.commands import task_options
    try:
        config = json.loads((run / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    out = []
    given = {"task": args.task, "data": args.data, "theme": args.theme, "metric": args.metric, **task_options(args)}
    theirs = {k: config.get(k) for k in ("task", "data", "theme", "metric")} | (config.get("task_options") or {})
    for key in given.keys() | theirs.keys():
        if given.get(key) != theirs.get(key):
            flag = "--task-split" if key == "split" else f"--{key.replace('_', '-')}"
            out.append(f"{flag} {_given(given.get(key))} (the run: {_given(theirs.get(key))})")
    pairs: dict[tuple[str, str], list[str]] = {}
    for role in EVAL_ROLES:
        run_role = (config.get("llm") or {}).get(role) or {}
        mine = _served(llm.role(role).backend, llm.role(role).model)
        before = _served(run_role.get("backend", "offline"), run_role.get("model", "offline"))
        if mine != before:
            pairs.setdefault((mine, before), []).append(role)
    out += [f"{', '.join(roles)} {'roles' if len(roles) > 1 else 'role'} {mine} (the run: {before})"
            for (mine, before), roles in pairs.items()]
    return sorted(out)


EVAL_ROLES = ("task", "toolkit", "judge")   # the roles an evaluation calls (the reflector only writes programs)


def _served(backend: str, model: str) -> str:
    return "offline" if backend == "offline" else f"{backend}:{model}"


def _given(value) -> str:
    return "not given" if value is None else str(value)


def _counts(categories) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in categories:
        key = str(c) if c is not None else "none"
        out[key] = out.get(key, 0) + 1
    return out

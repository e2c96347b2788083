"""`mstar evolve`: launch an evolution run (also `python evolve.py ...`)."""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from mstar.config import ROLES, EvolutionConfig, LLMConfig, RoleConfig, RunConfig


def register(sub) -> None:
    p = sub.add_parser("evolve", help="launch an evolution run")
    add_evolve_args(p)
    p.set_defaults(func=cmd_evolve)


def add_evolve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", default="sample", help="task name (built in: sample)")
    p.add_argument("--data", default=None, help="data file or folder for the task, when it needs one")
    p.add_argument("--iterations", type=int, default=EvolutionConfig.iterations)
    p.add_argument("--seed", type=int, default=0, help="random seed: same seed + backend = same lineage")
    p.add_argument("--name", default=None, help="run name (default: <task>-s<seed>-<time>)")
    p.add_argument("--runs-dir", default="runs", help="folder that holds run folders")
    p.add_argument("--out", default=None, help="the run folder itself (overrides --runs-dir/--name)")
    p.add_argument("--seeds", default=None,
                   help="comma-separated seed programs: built-in names or .py paths "
                        "(default: vector_search,llm_summarizer,experience_learner)")
    p.add_argument("--workers", type=int, default=EvolutionConfig.workers, help="concurrent task-agent calls")
    p.add_argument("--static-size", type=int, default=EvolutionConfig.static_size)
    p.add_argument("--mode", choices=("all", "instructions", "code"), default="all",
                   help="ablation (paper Table 2): evolve everything, only the instruction constants, or only the code")
    p.add_argument("--prompt-budget", type=int, default=EvolutionConfig.prompt_budget_tokens,
                   help="token budget of the reflection prompt; optional sections are cut, visibly, to fit")
    p.add_argument("--base-url", default=os.environ.get("MSTAR_BASE_URL"),
                   help="OpenAI-compatible endpoint for every role (env MSTAR_BASE_URL); "
                        "without it and without --model the offline backend serves all roles")
    p.add_argument("--model", default=os.environ.get("MSTAR_MODEL"),
                   help="model for the task, toolkit and judge roles (env MSTAR_MODEL)")
    p.add_argument("--reflector-model", default=os.environ.get("MSTAR_REFLECTOR_MODEL"),
                   help="model for the reflector role (default: --model)")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable that holds the API key")
    p.add_argument("--offline-role", action="append", default=[], choices=ROLES,
                   help="serve this role with the offline backend even when an endpoint is set (repeatable)")
    p.add_argument("--quiet", action="store_true", help="print only the final summary")


def resolve_llm(args) -> LLMConfig:
    """Offline unless an endpoint or model is given; secrets stay in the environment."""
    if not args.base_url and not args.model:
        return LLMConfig()
    roles = {}
    for role in ROLES:
        if role in args.offline_role:
            roles[role] = RoleConfig()
            continue
        model = (args.reflector_model if role == "reflector" and args.reflector_model else args.model) or "gpt-4o-mini"
        roles[role] = RoleConfig(backend="openai", model=model, base_url=args.base_url, api_key_env=args.api_key_env)
    return LLMConfig(**roles)


def resolve_config(args) -> RunConfig:
    name = args.name or f"{args.task}-s{args.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    runs_dir = args.runs_dir
    if args.out:
        out = Path(args.out)
        name, runs_dir = out.name, str(out.parent)
    seeds = tuple(s.strip() for s in args.seeds.split(",") if s.strip()) if args.seeds else RunConfig.seeds
    evo = replace(EvolutionConfig(), iterations=args.iterations, seed=args.seed, workers=args.workers,
                  static_size=args.static_size, mode=args.mode, prompt_budget_tokens=args.prompt_budget)
    return RunConfig(name=name, task=args.task, data=args.data, runs_dir=runs_dir, seeds=seeds,
                     evolution=evo, llm=resolve_llm(args))


class ProgressPrinter:
    def __init__(self, total: int, quiet: bool, out=sys.stdout):
        self.total, self.quiet, self.out = total, quiet, out
        self.t0 = time.perf_counter()

    def __call__(self, ev: dict) -> None:
        if self.quiet:
            return
        kind = ev.get("event")
        if kind == "seed":
            err = f"  [failed: {ev['error'].get('message', '')}]" if ev.get("error") else ""
            self._say(f"seed  {ev['program_id']:<28} static {ev['static_score']:.3f}{err}")
        elif kind == "iteration":
            it = ev["iteration"]
            elapsed = time.perf_counter() - self.t0
            eta = elapsed / it * (self.total - it) if it else 0.0
            if ev["status"] == "ok":
                outcome = f"child {ev['program_id']} static {ev['static_score']:.3f} ({ev['delta']:+.3f})"
            else:
                last = ev["attempts"][-1] if ev["attempts"] else {}
                outcome = f"{ev['status']}: {str(last.get('error', ''))[:70]}"
            self._say(f"iter {it:>3}/{self.total}  parent {ev['parent_id']:<22} {outcome:<58} "
                      f"best {ev['best_static_score']:.3f}  eta {eta:5.0f}s")
            self._say(f"          {ev['title'][:100]}")
        elif kind == "test":
            self._say(f"test  {ev['program_id']:<28} score {ev['test_score']:.3f}")

    def _say(self, text: str) -> None:
        print(text, file=self.out, flush=True)


def cmd_evolve(args) -> int:
    from mstar.llm.router import LLMRouter
    from mstar.llm.types import LLMError
    from mstar.loop import Evolution
    from mstar.runs import RunStore
    from mstar.tasks import TaskError, load_task

    cfg = resolve_config(args)
    try:
        task = load_task(cfg.task, cfg.data)
    except (TaskError, FileNotFoundError, ValueError) as exc:
        print(f"mstar: cannot load task {cfg.task!r}: {exc}", file=sys.stderr)
        return 2
    store = RunStore(Path(cfg.runs_dir) / cfg.name)
    try:
        store.create()
    except FileExistsError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    store.write_json("config.json", cfg.to_dict())
    try:
        router = LLMRouter.from_config(cfg.llm, seed=cfg.evolution.seed,
                                       on_usage=lambda rec: store.append_jsonl("llm_usage.jsonl", rec.to_dict()))
    except LLMError as exc:
        print(f"mstar: {exc}", file=sys.stderr)
        return 2
    print(f"run     {store.root}")
    print(f"task    {task.name}: {len(task.episodes)} episodes, {len(task.validation)} validation, "
          f"{len(task.test)} test queries ({task.metric_name})")
    for role, desc in router.describe().items():
        print(f"llm     {role:<10} {desc}")
    evo = Evolution(cfg, task, router, store, progress=ProgressPrinter(cfg.evolution.iterations, args.quiet))
    print(f"split   static {len(evo.static)} | rotating pool {len(evo.split.rotating_pool)} | "
          f"training episodes {len(evo.train)}")
    summary = evo.run()
    print(f"done    best {summary.best_id} static {summary.best_static:.3f} "
          f"(best seed {summary.best_seed_static:.3f}); test {summary.test_score:.3f}; "
          f"{summary.children_added}/{summary.iterations} iterations added a child; {summary.seconds:.1f}s")
    print(f"files   {store.root}/best_program.py, lineage.jsonl, programs/, cases/")
    return 0

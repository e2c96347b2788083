"""What a run prints on the console (unless quiet): the header, the split, the end -- the same
lines for `mstar evolve`, `mstar resume`, `mstar.evolve` and `mstar.resume`. The per-event lines
are mstar/run/progress.py's."""
from __future__ import annotations

import sys

from mstar.config import ROLES
from mstar.library.llm_options import paced_line
from mstar.run.live_spend import cache_line


def header(store, task, router, cfg) -> None:
    print(f"run     {store.root}")
    print(f"task    {task.name}: {len(task.episodes)} episodes, {len(task.validation)} validation, "
          f"{len(task.test)} test queries ({task.metric_name})")
    for role, desc in router.describe().items():
        print(f"llm     {role:<10} {desc}")
    if router.limiters:
        print(f"llm     at most {router.max_in_flight} calls in flight over all roles; a 429 paces every caller "
              "of its endpoint together" + paced_line(cfg))


def split_line(evo) -> None:
    print(f"split   static {len(evo.static)} | rotating pool {len(evo.split.rotating_pool)} | "
          f"training episodes {len(evo.train)} | embeddings {evo.split.config.embedder}")


def done(summary, root, router, lost: list, *, cli: bool = True) -> None:
    """The end of a run: the verdict, the files, what to do next, the spend."""
    print_done(summary, root, cli=cli)
    print(f"llm     {router.ledger.spend_line()}")   # the whole run's: the ledger holds it all
    saved = cache_line(router)
    if saved:
        print(saved)
    if lost:
        print(f"mstar: warning: {len(lost)} LLM usage record(s) could not be written to "
              f"{root / 'llm_usage.jsonl'}: {lost[0]}", file=sys.stderr)


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


def print_done(summary, root, *, cli: bool = True) -> None:
    if summary.stop_reason:
        from mstar.llm.budget import budget_flag
        flag = budget_flag(summary.stop_reason)
        larger = f" {flag} LARGER" if cli else f", {flag.removeprefix('--').replace('-', '_')}=LARGER"
        command = f"mstar resume {root}" if cli else f"mstar.resume({str(root)!r}"
        if summary.stop_kind == "budget" and flag:
            command, hint = command + larger, f"the run spent its {flag}; give a larger one"
        else:
            hint = "with a larger budget" if summary.stop_kind == "budget" else "once the endpoint works again"
        command += "" if cli else ")"
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

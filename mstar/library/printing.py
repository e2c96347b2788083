"""What a run prints on the console (unless quiet): the header, the split, the end -- the same
lines for `mstar evolve`, `mstar resume`, `mstar.evolve` and `mstar.resume`, laid out to the
terminal's width by mstar/run/console.py. The per-event lines are mstar/run/progress.py's."""
from __future__ import annotations

import sys

from mstar.config import ROLES
from mstar.library.llm_options import paced_line
from mstar.run.console import done_lines, fit, held_out_lines, offline_note, split_line as split_lines
from mstar.run.live_spend import cache_line


def header(store, task, router, cfg, *, quiet: bool = False) -> None:
    print(f"run     {store.root}")
    for line in fit(f"task    {task.name}: {len(task.episodes)} episodes, {len(task.validation)} validation, "
                    f"{len(task.test)} test queries ({task.metric_name})"):
        print(line)
    for role, desc in router.describe().items():
        for line in fit(f"llm     {role:<10} {desc}"):
            print(line)
    if router.limiters:
        for line in fit(f"llm     at most {router.max_in_flight} calls in flight over all roles; a 429 paces every "
                        "caller of its endpoint together" + paced_line(cfg)):
            print(line)
    for line in ([] if quiet else offline_note({r: cfg.llm.role(r).backend for r in ROLES})):
        print(line)


def split_line(evo, task) -> None:
    from mstar.split.checks import split_warnings
    for line in split_lines(len(evo.static), len(evo.split.rotating_pool), len(evo.train),
                            evo.split.config.embedder):
        print(line)
    for warning in split_warnings(evo.split, task):
        print(f"mstar: warning: {warning}", file=sys.stderr)


def done(summary, root, router, lost: list, *, cli: bool = True) -> None:
    """The end of a run: the verdict, the files, what to do next, the spend."""
    print_done(summary, root, cli=cli)
    for line in fit(f"llm     {router.ledger.spend_line()}"):   # the whole run's: the ledger holds it all
        print(line)
    saved = cache_line(router)
    if saved:
        for line in fit(saved):
            print(line)
    if lost:
        print(f"mstar: warning: {len(lost)} LLM usage record(s) could not be written to "
              f"{root / 'llm_usage.jsonl'}: {lost[0]}", file=sys.stderr)


def print_done(summary, root, *, cli: bool = True) -> None:
    for line in done_lines(summary, root, cli=cli):
        print(line)


def test_line(summary) -> str:
    """The held-out verdict on one line (for callers that lay it out themselves)."""
    return " ".join(part.strip() for part in held_out_lines(summary, width=10_000))


def exit_code(summary) -> int:
    """0 finished (or stopped by the budget the user set); 3 stopped because the endpoint failed, or
    the task's scorer did on every case of an evaluation (a service of the scorer's, down as well)."""
    return 3 if summary.stop_kind in ("endpoint", "scorer") else 0


def live_spend(router, cfg, task, evo, *, quiet: bool):
    """Every call's spend per role once the seeds are scored and after each iteration (mstar/run/live_spend.py)."""
    from mstar.run.live_spend import LiveSpend
    paid = any(cfg.llm.role(r).backend != "offline" for r in ROLES) or router.ledger.budget.active
    return LiveSpend(router, n_seeds=len(cfg.seeds), show=paid and not quiet)

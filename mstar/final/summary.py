"""summary.json: the run's outcome in one record, written when the run finishes or stops."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from mstar.run.store import FORMAT_VERSION
from mstar.final.stats import paired_bootstrap, paired_scores


@dataclass
class RunSummary:
    best_id: str | None                 # None when the run stopped before a seed was scored
    best_static: float | None
    best_seed_static: float | None
    test_score: float | None            # None when no test evaluation ran (a stopped run)
    test_per_category: dict[str, float]
    iterations: int
    children_added: int
    failed_iterations: int
    seconds: float
    stop_reason: str | None = None      # why the run ended before its last iteration
    stop_kind: str | None = None        # "budget" | "endpoint" | "scorer" (the task's scorer failed throughout)
    test_case_errors: int = 0           # test cases left unscored: an LLM call or the task's scorer failed
    test_score_errors: int = 0          # ... of them, those the task's scorer failed on
    best_seed_id: str | None = None     # the seed with the best static score
    best_seed_test: float | None = None # its test score (the same questions as the best program's)
    test_gain: dict | None = None       # best - best seed on test, paired: mean, low, high, n, significant
    pick_rule: str = "static"           # how the champion (best_id) was chosen: "confirmed" or "static"
    picks: dict | None = None           # each rule's choice and its test score (mstar.final.champion)
    early_stop: str | None = None       # why a finished run ended before its last iteration (--patience)
    guesses: dict | None = None         # the next batches evaluated ahead: sent, used, declined, requests,
                                        # prompt_tokens, each (mstar/iteration/rotating_prefetch.py); None: none made


def write_summary(evo, best, test, iterations: int, seconds: float, stop_reason: str | None,
                  stop_kind: str | None = None, seed=None, seed_test=None, pick_rule: str = "static",
                  picks: dict | None = None, early_stop: str | None = None) -> RunSummary:
    """Build the summary of `evo` (a loop.Evolution) and write it with best_program.py."""
    entries = list(evo.pool.entries)
    seeds = [e for e in entries if e.parent_id is None]
    children = sum(1 for e in entries if e.parent_id is not None)
    summary = RunSummary(
        best_id=best.program_id if best else None, best_static=best.static_score if best else None,
        best_seed_static=max((e.static_score for e in seeds), default=None),
        test_score=test.mean_score if test else None, test_per_category=test.per_category if test else {},
        iterations=iterations, children_added=children, failed_iterations=max(0, iterations - children),
        seconds=round(seconds, 3), stop_reason=stop_reason, stop_kind=stop_kind,
        test_case_errors=test.case_errors if test else 0, test_score_errors=test.score_errors if test else 0,
        pick_rule=pick_rule, picks=picks or {},
        early_stop=early_stop, guesses=_guesses(evo))
    if seed is not None and test is not None and seed_test is not None:
        summary.best_seed_id, summary.best_seed_test = seed.program_id, seed_test.mean_score
        summary.test_gain = paired_bootstrap(*paired_scores(test.cases, seed_test.cases)).to_dict()
    if best is not None:
        evo.store.write_text("best_program.py", best.source)
    evo.store.write_json("summary.json", {
        "format_version": FORMAT_VERSION, **asdict(summary), "llm_totals": evo.router.totals(),
        "llm": evo.router.report(),
        "pool": [{k: v for k, v in e.to_dict().items() if k != "source"} for e in entries]})
    return summary


def _guesses(evo) -> dict | None:
    prefetch = getattr(evo, "prefetch", None)
    return prefetch.report() if prefetch is not None else None

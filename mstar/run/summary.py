"""summary.json: the run's outcome in one record, written when the run finishes or stops."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from mstar.run.store import FORMAT_VERSION
from mstar.stats import paired_bootstrap, paired_scores


@dataclass
class RunSummary:
    best_id: str
    best_static: float
    best_seed_static: float
    test_score: float | None            # None when no test evaluation ran (a stopped run)
    test_per_category: dict[str, float]
    iterations: int
    children_added: int
    failed_iterations: int
    seconds: float
    stop_reason: str | None = None      # why the run ended before its last iteration
    stop_kind: str | None = None        # "budget" | "endpoint"
    test_case_errors: int = 0           # test cases left unscored because an LLM call failed
    best_seed_id: str | None = None     # the seed with the best static score
    best_seed_test: float | None = None # its test score (the same questions as the best program's)
    test_gain: dict | None = None       # best - best seed on test, paired: mean, low, high, n, significant


def write_summary(evo, best, test, iterations: int, seconds: float, stop_reason: str | None,
                  stop_kind: str | None = None, seed=None, seed_test=None) -> RunSummary:
    """Build the summary of `evo` (a loop.Evolution) and write it with best_program.py."""
    entries = list(evo.pool.entries)
    seeds = [e for e in entries if e.parent_id is None]
    children = sum(1 for e in entries if e.parent_id is not None)
    summary = RunSummary(
        best_id=best.program_id, best_static=best.static_score,
        best_seed_static=max(e.static_score for e in seeds),
        test_score=test.mean_score if test else None, test_per_category=test.per_category if test else {},
        iterations=iterations, children_added=children, failed_iterations=max(0, iterations - children),
        seconds=round(seconds, 3), stop_reason=stop_reason, stop_kind=stop_kind,
        test_case_errors=test.case_errors if test else 0)
    if seed is not None and test is not None and seed_test is not None:
        summary.best_seed_id, summary.best_seed_test = seed.program_id, seed_test.mean_score
        summary.test_gain = paired_bootstrap(*paired_scores(test.cases, seed_test.cases)).to_dict()
    evo.store.write_text("best_program.py", best.source)
    evo.store.write_json("summary.json", {
        "format_version": FORMAT_VERSION, **asdict(summary), "llm_totals": evo.router.totals(),
        "llm": evo.router.report(),
        "pool": [{k: v for k, v in e.to_dict().items() if k != "source"} for e in entries]})
    return summary

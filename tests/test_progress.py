"""Progress lines: outcome, best score, spend so far and ETA per iteration; quiet mode."""
from __future__ import annotations

import io

from mstar.run.events import from_dict
from mstar.run.progress import ProgressPrinter, format_count, format_duration


def typed(printer):
    """The printer fed as the loop feeds it: typed events (here built from their JSON form)."""
    return lambda d: printer(from_dict(d))


def _iteration(it, seconds, *, status="ok", calls=100, tokens=(9000, 1000), cost=0.0):
    ev = {"event": "iteration", "iteration": it, "parent_id": "seed_a", "status": status, "title": f"change {it}",
          "best_static_score": 0.5, "seconds": seconds,
          "llm": {"calls": calls, "prompt_tokens": tokens[0], "completion_tokens": tokens[1], "cost_usd": cost},
          "attempts": [{"error": "gate failed at stage 'compile':\n  SyntaxError"}]}
    if status == "ok":
        ev.update(program_id=f"iter_{it:03d}", static_score=0.45, delta=-0.05)
    return ev


def test_iteration_lines_show_outcome_best_spend_and_eta():
    out = io.StringIO()
    p = typed(ProgressPrinter(total=5, out=out, width=200, legend=False))
    p({"event": "seed", "program_id": "seed_a", "static_score": 0.5, "error": None,
       "llm": {"calls": 1000, "prompt_tokens": 1_500_000, "completion_tokens": 0}})
    p(_iteration(1, 2.0))
    p(_iteration(2, 4.0, status="failed"))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("seed  seed_a") and "cost 1.0k calls 1.50M tok" in lines[0]
    assert "iter   1/5" in lines[1] and "child iter_001 static 0.450 (-0.050)" in lines[1]
    assert "best 0.500" in lines[1] and "spend 1.1k calls 1.51M tok" in lines[1] and "eta 8s" in lines[1]
    assert lines[2].strip() == "change 1"
    assert "failed: gate failed at stage 'compile': SyntaxError" in lines[3]
    assert "eta 9s" in lines[3]  # mean of 2 s and 4 s, times 3 iterations left
    assert "$" not in out.getvalue()  # the offline backend costs nothing: no dollars shown


def test_priced_calls_show_dollars_and_a_resumed_run_counts_earlier_spend():
    out = io.StringIO()
    p = typed(ProgressPrinter(total=10, out=out, width=200, first_iteration=4, spend={"calls": 50, "tokens": 2000, "cost_usd": 0.5}))
    p(_iteration(4, 60.0, cost=0.25))
    line = out.getvalue().splitlines()[0]
    assert "iter   4/10" in line and "spend 150 calls 12.0k tok $0.75" in line and "eta 6m00s" in line
    p({"event": "stopped", "iteration": 4, "reason": "budget of $1.00 reached", "llm": {}})
    assert "stop  after iteration 4: budget of $1.00 reached" in out.getvalue()


def test_a_seed_line_shows_its_own_cost_and_the_next_line_the_runs_spend_so_far():
    # The seeds run together: a cumulative figure on the second seed's line read as its own.
    out = io.StringIO()
    p = typed(ProgressPrinter(total=5, out=out, width=200, legend=False))
    for pid, calls, cost in (("seed_a", 52, 0.0041), ("seed_b", 77, 0.0368)):
        p({"event": "seed", "program_id": pid, "static_score": 0.5, "error": None,
           "llm": {"calls": calls, "prompt_tokens": 1000, "completion_tokens": 0, "cost_usd": cost}})
    p(_iteration(1, 2.0, cost=0.05))
    lines = out.getvalue().splitlines()
    assert "cost 52 calls 1.0k tok $0.0041" in lines[0] and "cost 77 calls 1.0k tok $0.0368" in lines[1]
    assert "spend 229 calls 12.0k tok $0.0909" in lines[2]   # the run's: both seeds and the iteration


def test_quiet_prints_nothing_but_keeps_count():
    out = io.StringIO()
    printer = ProgressPrinter(total=3, quiet=True, out=out)
    p = typed(printer)
    p(_iteration(1, 1.0))
    p({"event": "test", "program_id": "iter_001", "test_score": 0.4, "llm": {"calls": 5}})
    assert out.getvalue() == "" and printer.calls == 105 and printer.eta_seconds(1) == 2.0


def test_formatting_helpers():
    assert [format_count(n) for n in (0, 999, 1234, 3_456_789, 2e9)] == ["0", "999", "1.2k", "3.46M", "2.00G"]
    assert [format_duration(s) for s in (0.4, 59, 61, 3600 * 2 + 65)] == ["0s", "59s", "1m01s", "2h01m"]

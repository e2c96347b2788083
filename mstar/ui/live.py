"""What a run is doing now, from what its folder can tell.

Calls in flight are not written to the run folder (the router counts them in memory), so the
live panel says what the folder does record: the iteration reached, the scope of the last LLM
call (a seed or iteration id, "confirm", "test": what the loop was working on), calls, errors and
429 answers in the last minute and the seconds callers were held by the endpoint's limiter
(llm_usage.jsonl's `rate_limited` and `held_s`), when the lineage last changed, and at the end
each endpoint's own account (summary.json -> llm.endpoints).

ETA and projected spend are estimates from the recorded iterations: the mean duration of the
last ten (divided by the iterations run at once, --parallel) and the mean spend per iteration,
times the iterations left. Neither counts the champion's confirmation and the final test, which
come after the iterations and cost about one more evaluation of each candidate.
"""
from __future__ import annotations

from statistics import fmean

from mstar.run import events as ev_types
from mstar.run.views import RunView
from mstar.ui.usage import recent, window

RECENT = 10          # iterations the ETA and the projection average over
NOTE = ("Calls in flight are not written to the run folder: this shows what the folder tells "
        "(the last call's scope, the last minute's calls and 429s, the last event's time).")


def _phase(view: RunView, last_scope: str | None) -> str:
    status = view.status
    if status == "finished":
        return "finished"
    if status == "stopped" and view.stop is not None:
        return f"stopped after iteration {view.stop.iteration} ({view.stop.kind}): {view.stop.reason}"
    if status != "running":
        return status
    if last_scope == "confirm":
        return "confirming the champion on more validation items"
    if last_scope == "test":
        return "scoring the champion on the held-out test set"
    if last_scope and last_scope.startswith("iter_"):
        return f"working on {last_scope}"
    if not ev_types.iterations(view.events):
        return "evaluating the seeds"
    return "running"


def _llm_tokens(ev) -> int:
    llm = ev.llm or {}
    return int(llm.get("prompt_tokens") or 0) + int(llm.get("completion_tokens") or 0)


def recorded_spend(events: list) -> dict:
    """What the recorded steps spent: the sum of the ledger's sums each event carries (`llm`),
    as the console's progress line counts it. Calls of a step still going are not in it yet."""
    out = {"calls": 0, "tokens": 0, "cost_usd": None, "errors": 0, "cache_hits": 0, "rate_limited": 0}
    for e in events:
        llm = getattr(e, "llm", None) or {}
        out["calls"] += int(llm.get("calls") or 0)
        out["tokens"] += _llm_tokens(e)
        out["errors"] += int(llm.get("errors") or 0)
        out["cache_hits"] += int(llm.get("cache_hits") or 0)
        out["rate_limited"] += int(llm.get("rate_limited") or 0)
        if llm.get("cost_usd") is not None:
            out["cost_usd"] = (out["cost_usd"] or 0.0) + float(llm["cost_usd"])
    return out


def guesses(iterations: list) -> dict | None:
    """The look-ahead guesses so far (the next parent evaluated on its batch ahead:
    mstar/iteration/rotating_prefetch.py): used / sent and what they cost, summed over the events
    of the iterations they were made for (timing["guesses"]); None when the run made none."""
    counts = [e.timing["guesses"] for e in iterations if isinstance((e.timing or {}).get("guesses"), dict)]
    if not counts:
        return None
    return {k: sum(int(c.get(k) or 0) for c in counts)
            for k in ("sent", "used", "declined", "requests", "prompt_tokens")}


def progress(view: RunView, usage_path, now: float, last_event_at: float | None) -> dict:
    """The live panel of a run page (a plain dict, served as JSON)."""
    evo = view.config.get("evolution", {})
    total_its = evo.get("iterations")
    iterations = ev_types.iterations(view.events)
    done = len(iterations)
    left = max(0, int(total_its) - done) if isinstance(total_its, int) else None
    last_its = iterations[-RECENT:]
    parallel = max(1, int(evo.get("parallel") or 1))
    durations = [e.seconds for e in last_its if e.seconds]
    per_iteration_s = fmean(durations) / parallel if durations else None
    running = view.status == "running"

    spent = recorded_spend(view.events)
    last_minute, last = recent(usage_path, now, 60.0)
    tokens_per_it = fmean(_llm_tokens(e) for e in last_its) if last_its else None
    costs = [float(e.llm["cost_usd"]) for e in last_its if (e.llm or {}).get("cost_usd") is not None]
    cost_per_it = fmean(costs) if costs else None
    endpoints = ((view.summary or {}).get("llm") or {}).get("endpoints")
    return {
        "status": view.status,
        "phase": _phase(view, last.scope if last else None),
        "iterations_done": done,
        "iterations_total": total_its,
        "seeds_done": len(ev_types.seeds(view.events)),
        "last_event_at": last_event_at,
        "last_event_ago_s": round(now - last_event_at, 1) if last_event_at else None,
        "last_call": None if last is None else {
            "role": last.role, "scope": last.scope, "at": last.at,
            "ago_s": round(now - last.at, 1) if last.at else None},
        "last_minute": window(last_minute, 60.0),
        "spent": spent,
        "guesses": guesses(iterations),
        "seconds_per_iteration": round(per_iteration_s, 2) if per_iteration_s else None,
        "eta_s": round(per_iteration_s * left, 1) if running and per_iteration_s and left else None,
        "projected": None if not left or tokens_per_it is None else {
            "tokens": int(spent["tokens"] + tokens_per_it * left),
            "cost_usd": None if cost_per_it is None else round((spent["cost_usd"] or 0.0) + cost_per_it * left, 6),
            "excludes": "the confirmation and the final test"},
        "endpoints": endpoints if isinstance(endpoints, list) else None,
        "parallel": parallel,
        "note": NOTE,
        "spent_note": "the sum over the recorded steps (seeds, iterations, confirmation, test); the next "
                      "iterations' rotating evaluations run ahead are in none (llm_usage.jsonl, scope prefetch): "
                      "`guesses` counts them, by the iterations they were made for",
    }

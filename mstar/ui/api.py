"""The JSON behind the pages: the runs list, one run, one program, a run's spend over time.

Each function takes the RunFolders and the names from the URL and returns a plain dict; the
server serialises it (mstar.run.store.dumps: strict JSON). Text written by programs and models
(titles, bodies, errors, sources) goes out as it is, as JSON strings: the page puts it in the
DOM as text. Long free text in list-shaped answers is cut (`CUT`) to keep a 1,000-iteration run
page small; the program page carries it whole.
"""
from __future__ import annotations

import time

from mstar.run import events as ev_types
from mstar.run.store import RunFormatError
from mstar.run.views import LineageNode, RunView
from mstar.ui import live
from mstar.ui.folders import RunFolders, RunNotFound, RunUnreadable

CUT = 300


class NotFound(LookupError):
    """Nothing at that address (the message says what is missing); the server answers 404."""


def cut(text, n: int = CUT):
    if text is None:
        return None
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


def view_of(folders: RunFolders, name: str) -> RunView:
    try:
        return folders.view(name)
    except RunNotFound as exc:
        raise NotFound(str(exc)) from None


def runs(folders: RunFolders) -> dict:
    """One row per run: status, task, iterations, best score, spend, last event time."""
    rows, now = [], time.time()
    for name in folders.names():
        row = {"name": name, "status": "unreadable", "task": None, "iterations_done": 0, "iterations_total": None,
               "best_id": None, "best_static": None, "test_score": None, "calls": 0, "tokens": 0, "cost_usd": None,
               "last_event_at": None, "problem": None}
        try:
            view = folders.view(name)
            spent = live.recorded_spend(view.events)
            best = view.node(view.best_id) if view.best_id else None
            row.update(status=view.status, task=view.config.get("task"), iterations_done=view.iterations_done,
                       iterations_total=view.config.get("evolution", {}).get("iterations"), best_id=view.best_id,
                       best_static=best.static_score if best else None,
                       test_score=(view.summary or {}).get("test_score"), calls=spent["calls"],
                       tokens=spent["tokens"], cost_usd=spent["cost_usd"], last_event_at=folders.last_event_at(name),
                       problem=view.partial_line)
        except RunNotFound:
            continue                       # removed while we looked
        except RunUnreadable as exc:
            row["problem"] = str(exc)
        rows.append(row)
    return {"runs_dir": str(folders.base), "now": now, "runs": rows}


def node_json(n: LineageNode) -> dict:
    ev = n.evidence or None
    return {"id": n.label, "program_id": n.program_id, "parent_id": n.parent_id, "iteration": n.iteration,
            "status": n.status, "title": cut(n.title), "static_score": n.static_score, "delta": n.delta,
            "markers": n.markers, "best": n.best, "no_change": n.no_change, "case_errors": n.case_errors,
            "error": cut(n.error),
            "evidence": None if ev is None else {k: ev.get(k) for k in ("mean", "low", "high", "n", "significant")}}


def _settings(view: RunView) -> dict:
    evo = view.config.get("evolution", {})
    keys = ("iterations", "seed", "static_size", "selection", "tau", "rotating", "rotating_size", "parallel", "pick",
            "confirm_top", "confirm_size", "mode", "prompts")
    return {k: evo.get(k) for k in keys if k in evo}


def _ending(view: RunView) -> dict | None:
    """The champion's race and the final test, once the run got there."""
    conf = next((e for e in view.events if isinstance(e, ev_types.ConfirmationEvent)), None)
    test = next((e for e in view.events if isinstance(e, ev_types.TestEvent)), None)
    if conf is None and test is None:
        return None
    return {"confirmation": None if conf is None else {
                "items": conf.items, "scores": conf.scores, "confirmed_id": conf.confirmed_id,
                "static_id": conf.static_id, "rule": conf.rule, "rounds": conf.rounds},
            "test": None if test is None else {
                "program_id": test.program_id, "test_score": test.test_score, "per_category": test.per_category,
                "best_seed_id": test.best_seed_id, "best_seed_test_score": test.best_seed_test_score,
                "gain": test.gain, "picks": test.picks, "case_errors": test.case_errors}}


def run(folders: RunFolders, name: str, now: float | None = None) -> dict:
    """The run page: what it is, the live panel, and every node of the lineage (flat, in event
    order; the page builds the tree and the trajectory from the parent ids)."""
    view = view_of(folders, name)
    now = time.time() if now is None else now
    stop = view.stop
    return {
        "name": name, "path": str(view.root), "status": view.status, "task": view.config.get("task"),
        "data": view.config.get("data"), "settings": _settings(view), "models": view.models(),
        "best_id": view.best_id, "iterations_done": view.iterations_done,
        "iterations_total": view.config.get("evolution", {}).get("iterations"),
        "stop": None if stop is None else {"reason": stop.reason, "kind": stop.kind, "iteration": stop.iteration},
        "note": view.partial_line, "nodes": [node_json(n) for n in view.nodes()], "ending": _ending(view),
        "progress": progress(folders, name, now, view),
    }


def progress(folders: RunFolders, name: str, now: float | None = None, view: RunView | None = None) -> dict:
    """The live panel alone (refetched when only llm_usage.jsonl grew)."""
    view = view or view_of(folders, name)
    return live.progress(view, folders.folder(name) / "llm_usage.jsonl", time.time() if now is None else now,
                         folders.last_event_at(name))


def _event(view: RunView, ref: str):
    try:
        return view.find_event(ref)
    except RunFormatError as exc:
        raise NotFound(str(exc)) from None


def program(folders: RunFolders, name: str, ref: str) -> dict:
    """Source, diff against the parent, the reflector's message and attempts (with their gate
    verdicts and patches), runtime fixes, per-category scores beside the parent's, and what each
    split's evaluation scored (the cases themselves are a page of their own)."""
    view = view_of(folders, name)
    _event(view, ref)
    d = view.program_detail(ref)
    d.pop("run", None)
    d.pop(ev_types.KIND_KEY, None)
    d["id"] = d["program_id"] or d["source_name"]
    d["evaluations"] = {split: {"mean_score": c.get("mean_score"), "cases": len(c.get("cases") or []),
                                "per_category": c.get("per_category") or {}, "error": c.get("error"),
                                "case_errors": c.get("case_errors") or 0, "seconds": c.get("seconds")}
                        for split, c in d.pop("cases").items()}
    parent = _event(view, d["parent_id"]) if d["parent_id"] else None
    d["parent_per_category"] = parent.per_category if parent is not None else None
    node = view.node(d["program_id"]) if d["program_id"] else None
    d["markers"] = node.markers if node else [d["status"].upper()] if d["status"] in ("failed", "duplicate") else []
    d["children"] = [n.label for n in view.nodes() if n.parent_id and n.parent_id == d["program_id"]]
    return d


def spend(folders: RunFolders, name: str) -> dict:
    """Spend per role (totals) and calls, tokens, dollars, errors, retries, 429s and seconds held
    over time, in equal time buckets."""
    view = view_of(folders, name)
    tail = folders.usage(name)
    roles, spent = tail.spend()
    priced = (spent.cost_usd or 0) > 0 or bool(view.config.get("llm", {}).get("prices"))
    return {"name": name, "priced": priced, "roles": [s.to_dict() for s in roles.values()],
            "total": spent.to_dict(), "series": tail.series(), "bad_lines": tail.bad_lines,
            "endpoints": ((view.summary or {}).get("llm") or {}).get("endpoints")}

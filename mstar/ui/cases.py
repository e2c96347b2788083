"""The JSON of an evaluation's questions: the list (with what the filters need), one question's
whole trajectory, and two programs compared on the questions both answered.

A program's cases live in cases/<id>.<split>.json (static: the validation items every program
is scored on; test: the held-out set, for the programs the run tested). "Changed against the
parent" compares a question's score with the parent's on the same question of the same split.

Attribution (where an answer was lost: never stored, not retrieved, not used; the memory X-ray,
mstar/evaluation/attribution.py) is passed through whole from the case record's `attribution`
field, and the case page shows it in its own marked place; the list gives each case's stage (to
show and filter by); tasks without evidence have none.
"""
from __future__ import annotations

from mstar.tasks.model import case_scored

from mstar.run import events as ev_types
from mstar.run.store import RunFormatError
from mstar.run.views import RunView
from mstar.final.stats import paired_bootstrap, paired_scores
from mstar.ui.api import NotFound, cut, view_of
from mstar.ui.folders import RunFolders

SPLITS = ("static", "test")
FULL_MARKS = 1.0 - 1e-9     # "right" in the comparison: the metric's full score


def _program(view: RunView, ref: str) -> tuple[str, str | None]:
    """(program id, parent id) of a program ref; NotFound for an iteration that added no child."""
    try:
        ev = view.find_event(ref)
    except RunFormatError as exc:
        raise NotFound(str(exc)) from None
    if isinstance(ev, ev_types.IterationEvent) and not ev.added_child:
        raise NotFound(f"iteration {ev.iteration} added no program, so it has no evaluation")
    return ev.program_id, ev.parent_id


def _evaluation(view: RunView, pid: str, split: str) -> dict:
    if split not in SPLITS:
        raise NotFound(f"no split {split!r}; splits: {', '.join(SPLITS)}")
    data = view.cases(pid, split)
    if data is None:
        why = "only the programs the run tested have test cases" if split == "test" else "not written yet"
        raise NotFound(f"{pid} has no {split} evaluation ({why})")
    return data


def _scored(case: dict) -> bool:
    return case_scored(case)


def _parent_scores(view: RunView, parent: str | None, split: str) -> dict[str, float] | None:
    data = view.cases(parent, split) if parent else None
    if data is None:
        return None
    return {c.get("query_id"): c.get("score") for c in data.get("cases") or [] if _scored(c)}


def _stage(case: dict) -> str | None:
    """The X-ray stage where the case's answer was lost (not_stored, not_retrieved, not_used,
    right, unattributed), or None when the task gives no evidence to attribute with."""
    a = case.get("attribution")
    label = a.get("label") if isinstance(a, dict) else None
    return str(label) if label else None


def case_list(folders: RunFolders, name: str, ref: str, split: str) -> dict:
    view = view_of(folders, name)
    pid, parent = _program(view, ref)
    data = _evaluation(view, pid, split)
    before = _parent_scores(view, parent, split)
    rows = []
    for c in data.get("cases") or []:
        qid = c.get("query_id")
        prev = before.get(qid) if before is not None else None
        rows.append({"query_id": qid, "category": c.get("category"), "score": c.get("score") if _scored(c) else None,
                     "parent_score": prev, "changed": prev is not None and _scored(c) and prev != c.get("score"),
                     "question": cut(c.get("question")), "answer": cut(c.get("answer"), 200),
                     "expected": cut(c.get("expected"), 200), "error": cut(c.get("error"), 200),
                     "llm_error": cut(c.get("llm_error"), 200), "score_error": cut(c.get("score_error"), 200),
                     "corrupt": bool(c.get("corrupt")),
                     "has_attribution": "attribution" in c, "stage": _stage(c)})
    return {"name": name, "program_id": pid, "parent_id": parent, "split": split,
            "parent_has_split": before is not None, "mean_score": data.get("mean_score"),
            "per_category": data.get("per_category") or {}, "error": data.get("error"),
            "categories": sorted({r["category"] for r in rows if r["category"]}), "cases": rows,
            "stages": sorted({r["stage"] for r in rows if r["stage"]}),
            "splits": [s for s in SPLITS if view.cases(pid, s) is not None]}


def case_detail(folders: RunFolders, name: str, ref: str, split: str, qid: str) -> dict:
    """One question's whole trajectory, the knowledge items the evaluation wrote (every case of an
    evaluation reads the same knowledge base), and the parent's answer to the same question."""
    view = view_of(folders, name)
    pid, parent = _program(view, ref)
    data = _evaluation(view, pid, split)
    case = next((c for c in data.get("cases") or [] if c.get("query_id") == qid), None)
    if case is None:
        raise NotFound(f"{pid} has no {split} question {qid!r}")
    parent_case = None
    pdata = view.cases(parent, split) if parent else None
    if pdata is not None:
        pc = next((c for c in pdata.get("cases") or [] if c.get("query_id") == qid), None)
        if pc is not None:
            parent_case = {k: pc.get(k) for k in ("answer", "score", "retrieved", "query", "llm_error", "error")}
    return {"name": name, "program_id": pid, "parent_id": parent, "split": split, "case": case,
            "writes": data.get("writes") or [], "load_warnings": data.get("load_warnings") or [],
            "evaluation_error": data.get("error"), "parent_case": parent_case,
            "attribution": case.get("attribution")}


def compare(folders: RunFolders, name: str, a: str, b: str, split: str) -> dict:
    """A against B on the questions both scored: each question's two scores, who got it right
    (full marks), and the paired mean difference A - B with its 95% bootstrap interval."""
    view = view_of(folders, name)
    (pa, _), (pb, _) = _program(view, a), _program(view, b)
    da, db = _evaluation(view, pa, split), _evaluation(view, pb, split)
    ca, cb = da.get("cases") or [], db.get("cases") or []
    sa, sb = paired_scores(ca, cb)
    diff = paired_bootstrap(sa, sb)
    by_b = {c.get("query_id"): c for c in cb if _scored(c)}
    rows, counts = [], {"both": 0, "only_a": 0, "only_b": 0, "neither": 0, "a_better": 0, "b_better": 0, "same": 0}
    for c in ca:
        other = by_b.get(c.get("query_id"))
        if other is None or not _scored(c):
            continue
        x, y = float(c.get("score")), float(other.get("score"))
        right_a, right_b = x >= FULL_MARKS, y >= FULL_MARKS
        counts["both" if right_a and right_b else "only_a" if right_a else "only_b" if right_b else "neither"] += 1
        counts["a_better" if x > y else "b_better" if y > x else "same"] += 1
        rows.append({"query_id": c.get("query_id"), "category": c.get("category"), "question": cut(c.get("question")),
                     "a": x, "b": y, "diff": x - y, "answer_a": cut(c.get("answer"), 160),
                     "answer_b": cut(other.get("answer"), 160), "expected": cut(c.get("expected"), 160)})
    rows.sort(key=lambda r: (-abs(r["diff"]), str(r["query_id"])))
    return {"name": name, "a": pa, "b": pb, "split": split, "n": len(rows), "paired": diff.to_dict(),
            "mean_a": sum(sa) / len(sa) if sa else None, "mean_b": sum(sb) / len(sb) if sb else None,
            "unpaired": {"a": len(ca) - len(rows), "b": len(cb) - len(rows)}, "counts": counts, "rows": rows}

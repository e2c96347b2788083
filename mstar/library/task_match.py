"""Is a task given again to a resume the task its run began with?

A resumed run goes on scoring against the programs its folder already scored: the episodes they
wrote, the validation queries and gold answers their static and rotating scores rest on, the
test set the champion will be tested on, and the metric or scorer that turned answers into
scores. A task that differs in any of these would mix two tasks in one lineage (earlier programs
scored on the old answers, new children on the new) and test the champion on a set the folder
does not describe, so such a resume is refused, naming the first differences.

What is compared is the task's record as the run saves it (task.json, mstar/library/task_files.py):
each episode's text and meta, each query's question, answer, category and meta, the order of
each list (the saved split names items by position), and the metric -- or, for a task's own
scorer, its import path when the run recorded one (a lambda has none: it cannot be told from
another). The name and the description score nothing and may change.
"""
from __future__ import annotations

import importlib
import json

from mstar.run.store import dumps
from mstar.tasks import Task

SECTIONS = {"episodes": ("text", "meta"), "validation": ("question", "answer", "category", "meta"),
            "test": ("question", "answer", "category", "meta")}
SHOWN = 3   # differences named in the error; the rest are counted


def task_record(task: Task) -> dict:
    """The task as its run keeps it (task.json): its data, and its scorer by import path (None
    when it has none) -- the JSON format names built-in metrics only."""
    data = task.to_dict()
    if task.scorer is not None:
        data["metric"] = "token_f1"
        data["scorer"] = {"label": task.metric_name, "ref": scorer_ref(task.scorer)}
    return data


def scorer_ref(fn) -> str | None:
    """"module:qualname" when the function can be imported by it again, else None."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        return None
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    return f"{module}:{qualname}" if obj is fn else None


def task_differences(saved: dict, task: Task) -> list[str]:
    """What in `task` differs from the `saved` record (task.json's data) in what is scored, one
    short phrase each: items missing or added first, then how answers are scored, then changed
    fields (one phrase per field, with an example), then order; empty when nothing differs."""
    # Through the JSON the folder was written with, so that a task built again from the same data
    # compares equal (tuples as lists, NaN as null) and only real changes show.
    new = json.loads(dumps(task_record(task)))
    items, fields, order = [], [], []
    for section, names in SECTIONS.items():
        old = saved.get(section)
        old = [r for r in old if isinstance(r, dict)] if isinstance(old, list) else []
        old_by, new_by = {r.get("id"): r for r in old}, {r["id"]: r for r in new[section]}
        missing = [i for i in old_by if i not in new_by]
        added = [i for i in new_by if i not in old_by]
        if missing:
            items.append(f"{section}: {len(missing)} of the run's {len(old)} are missing ({_ids(missing)})")
        if added:
            items.append(f"{section}: {len(added)} the run does not have ({_ids(added)})")
        both = [i for i in old_by if i in new_by]
        for name in names:
            changed = [i for i in both if old_by[i].get(name) != new_by[i].get(name)]
            if changed:
                first = changed[0]
                fields.append(f"{section}: {len(changed)} {name} field(s) differ (e.g. {first!r}: "
                              f"{_short(old_by[first].get(name))} -> {_short(new_by[first].get(name))})")
        if not missing and not added and list(old_by) != list(new_by):
            order.append(f"{section}: the same ids in another order (the saved split names them by position)")
    return items + _scoring(saved, new) + fields + order


def describe(differences: list[str]) -> str:
    """The first differences, and how many more there are."""
    shown = "; ".join(differences[:SHOWN])
    more = len(differences) - SHOWN
    return shown + (f"; and {more} more difference(s)" if more > 0 else "")


def _scoring(saved: dict, new: dict) -> list[str]:
    old_scorer, new_scorer = saved.get("scorer"), new.get("scorer")
    if not isinstance(old_scorer, dict):
        old_scorer = None
    if old_scorer is None and new_scorer is None:
        if saved.get("metric") != new["metric"]:
            return [f"metric {saved.get('metric')!r} -> {new['metric']!r}"]
        return []
    if old_scorer is None:
        return [f"scored by the metric {saved.get('metric')!r}, now by the scorer {_scorer(new_scorer)}"]
    if new_scorer is None:
        return [f"scored by the scorer {_scorer(old_scorer)}, now by the metric {new['metric']!r}"]
    if old_scorer.get("ref") and old_scorer["ref"] != new_scorer.get("ref"):
        return [f"scorer {_scorer(old_scorer)} -> {_scorer(new_scorer)}"]
    return []


def _scorer(record: dict) -> str:
    return record.get("ref") or f"{record.get('label')} (no import path)"


def _ids(ids: list) -> str:
    return ", ".join(map(repr, ids[:SHOWN])) + (", ..." if len(ids) > SHOWN else "")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."

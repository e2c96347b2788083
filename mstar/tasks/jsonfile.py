"""The JSON task format: one file holding a whole task (what the bundled sample task uses).

    {"name": str, "description": str, "metric": "token_f1" | ..., "train_ratio": int | null?,
     "episodes":   [{"id": str, "text": str, "meta": {...}?}, ...],
     "validation": [{"id": str, "question": str, "answer": str | number,
                     "category": str | null?, "meta": {...}?,
                     "evidence": str | [str | {"text", "episode"?}]?}, ...],
     "test":       [same as validation],
     "scorer":     {"ref": "package.module:function" | null, "label": str}?}

"scorer" is what a run folder's task.json records of a task defined in Python with its own scorer
(mstar/library/task_files.py): the file is scored by that function, imported again -- never by the
metric field beside it, which would give other scores than the run's.
"""
from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Any

from mstar.tasks import evidence
from mstar.tasks.io import (answer_text, category_text, check_unique, fail, optional_meta, read_json,
                            required_str)
from mstar.tasks.model import Episode, QueryItem, Task, TaskError, metric_names


def _episode(obj: Any, source: str, where: str) -> Episode:
    if not isinstance(obj, dict):
        raise fail(source, where, f"expected an object, got {type(obj).__name__}")
    return Episode(required_str(obj, "id", source, where), required_str(obj, "text", source, where),
                   optional_meta(obj, source, where))


def _query(obj: Any, source: str, where: str) -> QueryItem:
    if not isinstance(obj, dict):
        raise fail(source, where, f"expected an object, got {type(obj).__name__}")
    answer = answer_text(obj, source, where)
    meta = optional_meta(obj, source, where)
    if "evidence" in obj:   # what the answer rests on, for the memory X-ray (mstar.tasks.evidence)
        try:
            meta = evidence.with_evidence(meta, *evidence.parse_evidence(obj["evidence"], where))
        except ValueError as exc:
            raise fail(source, where, str(exc).removeprefix(f"{where}: ")) from None
    return QueryItem(required_str(obj, "id", source, where), required_str(obj, "question", source, where),
                     answer, category_text(obj, source, where), meta)


def task_from_dict(data: Any, source: str, default_name: str = "task") -> Task:
    """Build a Task from the JSON task format; `source` names the origin in error messages."""
    if not isinstance(data, dict):
        raise TaskError(f"{source}: top level must be a JSON object, got {type(data).__name__}")
    sections: dict[str, list] = {}
    for key in ("episodes", "validation", "test"):
        if key not in data:
            raise fail(source, "top level", f"missing '{key}' list")
        if not isinstance(data[key], list):
            raise fail(source, key, f"must be a list, got {type(data[key]).__name__}")
        sections[key] = data[key]
    if not sections["episodes"]:
        raise fail(source, "episodes", "is empty; a task needs at least one episode")
    if not sections["validation"]:
        raise fail(source, "validation", "is empty; a task needs validation queries to score programs")
    episodes = tuple(_episode(o, source, f"episodes[{i}]") for i, o in enumerate(sections["episodes"]))
    validation = tuple(_query(o, source, f"validation[{i}]") for i, o in enumerate(sections["validation"]))
    test = tuple(_query(o, source, f"test[{i}]") for i, o in enumerate(sections["test"]))
    check_unique([e.id for e in episodes], source, "episodes")
    check_unique([q.id for q in validation + test], source, "validation+test")
    known = {e.id for e in episodes}
    validation = tuple(evidence.check_episodes(list(validation), known))
    test = tuple(evidence.check_episodes(list(test), known))
    metric = data.get("metric", "token_f1")
    if metric not in metric_names():
        raise fail(source, "metric", f"unknown metric {metric!r}; known metrics: {', '.join(metric_names())}")
    name = data.get("name", default_name)
    description = data.get("description", "")
    if not isinstance(name, str) or not isinstance(description, str):
        raise fail(source, "top level", "'name' and 'description' must be strings")
    ratio = data.get("train_ratio")
    if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, int) or ratio < 0):
        raise fail(source, "train_ratio", f"must be a non-negative integer or null, got {ratio!r}")
    try:
        return Task(name, episodes, validation, test, metric, description, ratio)
    except TaskError as exc:
        raise TaskError(f"{source}: {exc}") from None


def load_json_task(path: str | Path) -> Task:
    """Load a task file in the JSON task format."""
    path = Path(path)
    data = read_json(path)
    scorer = data.pop("scorer", None) if isinstance(data, dict) else None
    task = task_from_dict(data, str(path), default_name=path.stem)
    return task if scorer is None else with_recorded_scorer(task, scorer, str(path))


def with_recorded_scorer(task: Task, record: Any, source: str) -> Task:
    """`task` scored by the function a "scorer" record names, imported again. TaskError when it has
    none to import (a lambda, a function of a script or a notebook) or the import fails."""
    ref = record.get("ref") if isinstance(record, dict) else None
    if not ref:
        raise TaskError(f"{source}: its scorer cannot be imported again (a lambda, or a function of a script or "
                        "notebook, has no import path); score this task from Python with that scorer")
    module, _, qualname = str(ref).partition(":")
    try:
        fn = importlib.import_module(module)
        for part in qualname.split("."):
            fn = getattr(fn, part)
    except (ImportError, AttributeError) as exc:
        raise TaskError(f"{source}: its scorer {ref} cannot be imported ({exc})") from None
    return dataclasses.replace(task, scorer=fn, metric_name=record.get("label") or task.metric_name)

"""Tasks: the episodes an agent may memorise, the queries it is scored on, and the metric.

A task is `(episodes, validation queries, test queries, metric)` (DESIGN.md §2). Records are
frozen dataclasses that serialise with `dataclasses.asdict` / `Task.to_dict()`.

Loading goes through `LOADERS`, a name -> loader registry: `load_task("sample")` is the bundled
toy task; a path to a `.json` file in the same format loads that file. LoCoMo, rubric tasks and
users' JSONL plug in later as more registry entries (`register_loader`).

The JSON task format (what `sample_task.json` uses):

    {"name": str, "description": str, "metric": "token_f1" | ...,
     "episodes":   [{"id": str, "text": str, "meta": {...}?}, ...],
     "validation": [{"id": str, "question": str, "answer": str | number,
                     "category": str | null?, "meta": {...}?}, ...],
     "test":       [same as validation]}
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable

from mstar.metrics import METRICS


class TaskError(ValueError):
    """A task cannot be loaded; the message names the file and what is wrong with it."""


@dataclass(frozen=True)
class Episode:
    id: str
    text: str
    meta: dict = field(default_factory=dict)


@dataclass(frozen=True)
class QueryItem:
    id: str
    question: str
    answer: str                      # gold answer; rubric tasks will carry their rubric in meta
    category: str | None = None
    meta: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Task:
    name: str
    episodes: tuple[Episode, ...]
    validation: tuple[QueryItem, ...]
    test: tuple[QueryItem, ...]
    metric_name: str = "token_f1"
    description: str = ""

    def __post_init__(self) -> None:
        if self.metric_name not in METRICS:
            raise TaskError(f"task {self.name!r}: unknown metric {self.metric_name!r}; "
                            f"known metrics: {', '.join(sorted(METRICS))}")

    def metric(self, prediction: str, item: QueryItem) -> float:
        """Score one prediction against the item's gold answer, in [0, 1]."""
        return METRICS[self.metric_name](prediction, item.answer)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["metric"] = d.pop("metric_name")
        return d


# ---------------------------------------------------------------------------------- JSON format

def _fail(source: str, where: str, problem: str) -> TaskError:
    return TaskError(f"{source}: {where}: {problem}")


def _meta(obj: dict, source: str, where: str) -> dict:
    meta = obj.get("meta", {})
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise _fail(source, where, f"'meta' must be an object, got {type(meta).__name__}")
    return meta


def _required_str(obj: dict, key: str, source: str, where: str) -> str:
    if key not in obj:
        raise _fail(source, where, f"missing '{key}'")
    value = obj[key]
    if not isinstance(value, str) or not value.strip():
        raise _fail(source, where, f"'{key}' must be a non-empty string, got {value!r:.60}")
    return value


def _episode(obj: Any, source: str, where: str) -> Episode:
    if not isinstance(obj, dict):
        raise _fail(source, where, f"expected an object, got {type(obj).__name__}")
    return Episode(_required_str(obj, "id", source, where), _required_str(obj, "text", source, where),
                   _meta(obj, source, where))


def _query(obj: Any, source: str, where: str) -> QueryItem:
    if not isinstance(obj, dict):
        raise _fail(source, where, f"expected an object, got {type(obj).__name__}")
    if "answer" not in obj:
        raise _fail(source, where, "missing 'answer'")
    answer = obj["answer"]
    # Numbers are accepted (LoCoMo has answers like 2022) and kept as their text.
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise _fail(source, where, f"'answer' must be a string or number, got {type(answer).__name__}")
    category = obj.get("category")
    if category is not None and not isinstance(category, (str, int)):
        raise _fail(source, where, f"'category' must be a string or null, got {type(category).__name__}")
    return QueryItem(_required_str(obj, "id", source, where), _required_str(obj, "question", source, where),
                     str(answer), None if category is None else str(category), _meta(obj, source, where))


def _unique(ids: list[str], source: str, section: str) -> None:
    seen: set[str] = set()
    for i, item_id in enumerate(ids):
        if item_id in seen:
            raise _fail(source, f"{section}[{i}]", f"duplicate id {item_id!r}")
        seen.add(item_id)


def task_from_dict(data: Any, source: str, default_name: str = "task") -> Task:
    """Build a Task from the JSON task format; `source` names the origin in error messages."""
    if not isinstance(data, dict):
        raise TaskError(f"{source}: top level must be a JSON object, got {type(data).__name__}")
    sections: dict[str, list] = {}
    for key in ("episodes", "validation", "test"):
        if key not in data:
            raise _fail(source, "top level", f"missing '{key}' list")
        if not isinstance(data[key], list):
            raise _fail(source, key, f"must be a list, got {type(data[key]).__name__}")
        sections[key] = data[key]
    if not sections["episodes"]:
        raise _fail(source, "episodes", "is empty; a task needs at least one episode")
    if not sections["validation"]:
        raise _fail(source, "validation", "is empty; a task needs validation queries to score programs")
    episodes = tuple(_episode(o, source, f"episodes[{i}]") for i, o in enumerate(sections["episodes"]))
    validation = tuple(_query(o, source, f"validation[{i}]") for i, o in enumerate(sections["validation"]))
    test = tuple(_query(o, source, f"test[{i}]") for i, o in enumerate(sections["test"]))
    _unique([e.id for e in episodes], source, "episodes")
    _unique([q.id for q in validation + test], source, "validation+test")
    metric = data.get("metric", "token_f1")
    if metric not in METRICS:
        raise _fail(source, "metric", f"unknown metric {metric!r}; known metrics: {', '.join(sorted(METRICS))}")
    name = data.get("name", default_name)
    description = data.get("description", "")
    if not isinstance(name, str) or not isinstance(description, str):
        raise _fail(source, "top level", "'name' and 'description' must be strings")
    return Task(name, episodes, validation, test, metric, description)


def load_json_task(path: str | Path) -> Task:
    """Load a task file in the JSON task format."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskError(f"{path}: no such task file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path}: cannot read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    return task_from_dict(data, str(path), default_name=path.stem)


# -------------------------------------------------------------------------------------- loaders

Loader = Callable[[str | None], Task]


def _load_sample(data: str | None) -> Task:
    # `data` lets a user point the sample loader at an edited copy of the file.
    if data is not None:
        return load_json_task(data)
    resource = resources.files("mstar") / "data" / "sample_task.json"
    try:
        text = resource.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskError(f"{resource}: the bundled sample task is missing from the installation") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskError(f"{resource}: not valid JSON: {exc.msg} at line {exc.lineno}") from None
    return task_from_dict(raw, str(resource), default_name="sample")


def _load_json(data: str | None) -> Task:
    if not data:
        raise TaskError("task 'json' needs a data path (a .json file in the JSON task format)")
    return load_json_task(data)


LOADERS: dict[str, Loader] = {
    "sample": _load_sample,
    "json": _load_json,
}


def register_loader(name: str, loader: Loader) -> None:
    """Add a task loader under `name` (e.g. "locomo"); `loader(data_path_or_None) -> Task`."""
    if not name or not isinstance(name, str):
        raise ValueError("a loader needs a non-empty string name")
    LOADERS[name] = loader


def load_task(name: str, data: str | None = None) -> Task:
    """Load a task by registry name, or a JSON task file given by path as the name."""
    if name in LOADERS:
        return LOADERS[name](data)
    if name.endswith(".json") and Path(name).exists():
        return load_json_task(name)
    raise TaskError(f"unknown task {name!r}; known tasks: {', '.join(sorted(LOADERS))} "
                    f"(or give the path of a .json task file)")

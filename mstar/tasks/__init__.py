"""Tasks: the episodes an agent may memorise, the queries it is scored on, and the metric.

`load_task(name, data, theme=..., metric=...)` picks a loader from `LOADERS` by name; one module
per format:
    sample       the bundled toy task (mstar/data/sample_task.json)        tasks/sample.py
    json         a whole task in one JSON file (the sample's format)       tasks/jsonfile.py
    locomo       LoCoMo's locomo10.json with M*'s split                    tasks/locomo.py
    healthbench  HealthBench rows (JSONL), rubric-judged                   tasks/rubric.py
    prbench      PRBench rows (JSONL), rubric-judged                       tasks/rubric.py
    formula      ACE finance Formula (numeric answers)                     tasks/finance.py
    finer        ACE finance FiNER (XBRL tag lists)                        tasks/finance.py
    jsonl        users' own episodes/queries JSONL (+ optional TOML)       tasks/jsonl.py
    alfworld     released ALFWorld games (--split seen|unseen), interactive tasks/alfworld/
    alfworld-synth  ALFWorld-format games generated offline, interactive   tasks/alfworld/
A task defined in Python is the same record (`Task(..., scorer=...)`), built with the helpers of
python_task.py (query, game) and checked by its prepare_task before a run spends anything; a
name "package.module:attribute" loads such a task (a Task, or a function returning one).
A path ending in .json or .toml also works as the name. Records and errors: tasks/model.py;
metrics.py (pure metrics) and judging.py (metrics that ask the judge role); evidence.py (what a
query's answer rests on, for the memory X-ray); the sample's generator is sample_gen.py, with its
fact kinds in sample_facts.py and its word lists in sample_vocab.py.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from mstar.tasks.alfworld.task import load_alfworld, load_alfworld_synth
from mstar.tasks.finance import load_finer, load_formula
from mstar.tasks.jsonfile import load_json_task, task_from_dict
from mstar.tasks.jsonl import load_jsonl_task, load_toml_task
from mstar.tasks.locomo import load_locomo
from mstar.tasks.model import Episode, QueryItem, ScorerError, Task, TaskError, metric_names
from mstar.tasks.python_task import game, prepare_task, query
from mstar.tasks.rubric import load_healthbench, load_prbench
from mstar.tasks.sample import load_sample

__all__ = ["Episode", "QueryItem", "Task", "TaskError", "ScorerError", "LOADERS", "load_task", "register_loader",
           "query", "game", "prepare_task", "load_python_task",
           "load_json_task", "task_from_dict", "load_toml_task", "metric_names"]

Loader = Callable[..., Task]   # loader(data_path_or_None, **options) -> Task


def _load_json(data: str | None) -> Task:
    if not data:
        raise TaskError("task 'json' needs a data path (a .json file in the JSON task format)")
    return load_json_task(data)


LOADERS: dict[str, Loader] = {
    "sample": load_sample,
    "json": _load_json,
    "locomo": load_locomo,
    "healthbench": load_healthbench,
    "prbench": load_prbench,
    "formula": load_formula,
    "finer": load_finer,
    "jsonl": load_jsonl_task,
    "alfworld": load_alfworld,
    "alfworld-synth": load_alfworld_synth,
}
# Which loaders take which options (anything else is an error, not silently ignored).
LOADER_OPTIONS: dict[str, tuple[str, ...]] = {"healthbench": ("theme",), "prbench": ("theme",),
                                               "sample": ("size", "sample_seed"),
                                               "alfworld": ("split",), "alfworld-synth": ("split",)}


def register_loader(name: str, loader: Loader, options: tuple[str, ...] = ()) -> None:
    """Add a task loader under `name` (e.g. "locomo"); `loader(data_path_or_None, **options) -> Task`."""
    if not name or not isinstance(name, str):
        raise ValueError("a loader needs a non-empty string name")
    LOADERS[name] = loader
    LOADER_OPTIONS[name] = tuple(options)


def load_task(name: str, data: str | None = None, *, theme: str | None = None,
              metric: str | None = None, split: str | None = None, **extra) -> Task:
    """Load a task by registry name (or a .json / .toml task file given as the name).

    theme:  keep only one theme's rows (rubric tasks: a HealthBench theme, a PRBench field);
    metric: score with another metric than the task's own (e.g. "llm_judge" for LoCoMo's L-J);
    split:  which evaluation split (ALFWorld: "seen" or "unseen");
    extra:  a loader's own options (the sample: size, sample_seed), checked against LOADER_OPTIONS.
    """
    options = {k: v for k, v in (("theme", theme), ("split", split), *extra.items()) if v is not None and v != ""}
    if name in LOADERS:
        unsupported = sorted(set(options) - set(LOADER_OPTIONS.get(name, ())))
        if unsupported:
            raise TaskError(f"task {name!r} does not take option(s) {', '.join(unsupported)}")
        task = LOADERS[name](data, **options)
    elif is_python_ref(name):
        if options or data:
            raise TaskError(f"task {name}: a task defined in Python takes no --data or loader options")
        task = load_python_task(name)
    elif name.endswith((".json", ".toml")) and Path(name).exists():
        if options:
            raise TaskError(f"task file {name} does not take option(s) {', '.join(sorted(options))}")
        task = load_json_task(name) if name.endswith(".json") else load_toml_task(name)
    else:
        raise TaskError(f"unknown task {name!r}; known tasks: {', '.join(sorted(LOADERS))} "
                        f"(or give the path of a .json or .toml task file, or package.module:attribute "
                        f"naming a task defined in Python)")
    if metric and metric != task.metric_name:
        if metric not in metric_names():
            raise TaskError(f"unknown metric {metric!r}; known metrics: {', '.join(metric_names())}")
        task = dataclasses.replace(task, metric_name=metric)   # re-validated in Task.__post_init__
    return task


def is_python_ref(name: str) -> bool:
    """"package.module:attribute" (not a Windows path, not a file that exists)."""
    module, sep, attr = name.partition(":")
    return bool(sep and module and attr and all(part.isidentifier() for part in module.split("."))
                and all(part.isidentifier() for part in attr.split(".")))


def load_python_task(ref: str) -> Task:
    """The task a "package.module:attribute" names: a Task, or a function of no arguments that
    returns one. The module is imported as Python imports it (the current folder first)."""
    import importlib
    import sys

    module_name, _, attr = ref.partition(":")
    if "" not in sys.path and "." not in sys.path:   # `mstar evolve --task mytask:TASK` from a project folder
        sys.path.insert(0, "")
    try:
        obj = importlib.import_module(module_name)
    except ImportError as exc:
        raise TaskError(f"task {ref}: cannot import {module_name}: {exc}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise TaskError(f"task {ref}: {module_name} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if callable(obj) and not isinstance(obj, Task):
        obj = obj()
    if not isinstance(obj, Task):
        raise TaskError(f"task {ref}: expected an mstar.Task (or a function returning one), got {type(obj).__name__}")
    return obj

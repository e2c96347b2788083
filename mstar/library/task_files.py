"""Which task a run uses, and how a task defined in Python is kept with its run.

A task given by name (`--task locomo`, a .json/.toml file, "package.module:attribute") is loaded
again by that name when the run is resumed. A Task object given to `mstar.evolve` has no name to
load it by, so its data go into the run folder (task.json, the JSON task format) and its scorer
is named by import path when it has one ("package.module:function"); `mstar.resume(path)` then
rebuilds it. A scorer with no import path (a lambda, a function of a script's `__main__` or a
notebook) cannot be found again: resume such a run with the task, `mstar.resume(path, task=task)`.
Either way the task must be the one the run began with: a task given again is compared with the
saved task.json (or, for a run begun by name, with the task that name loads) in everything the
run scores (mstar/library/task_match.py), and the saved split is checked against it.
"""
from __future__ import annotations

import json

from mstar.library.errors import SetupError
from mstar.library.task_match import describe, task_differences, task_record
from mstar.tasks import Task, TaskError, load_task, prepare_task, task_from_dict
from mstar.tasks.jsonfile import with_recorded_scorer

TASK_FILE = "task.json"
PYTHON_PREFIX = "python:"


def task_for_run(task_obj, cfg, store=None) -> Task:
    """The run's task, checked (mstar.tasks.prepare_task); SetupError with one line if it cannot be had."""
    try:
        if task_obj is not None:
            return prepare_task(task_obj)
        if cfg.task.startswith(PYTHON_PREFIX):
            if store is None:
                raise TaskError(f"task {cfg.task!r} was defined in Python: pass the Task itself")
            return prepare_task(load_saved_task(store))
        task = load_task(cfg.task, cfg.data, theme=getattr(cfg, "theme", None),
                         metric=getattr(cfg, "metric", None), **cfg.task_options)
        return prepare_task(task)
    except (TaskError, FileNotFoundError, ValueError) as exc:
        name = task_obj.name if isinstance(task_obj, Task) else cfg.task
        text = str(exc)
        raise SetupError(text if text.startswith("task ") else f"cannot load task {name!r}: {text}") from None


def save_task(store, task: Task) -> None:
    store.write_json(TASK_FILE, task_record(task))


def resumed_task(task_obj, cfg, store) -> Task:
    """The task a resumed run goes on with, checked: loaded the way the run began (task.json, or
    its name), or `task_obj` -- which must then be that task in everything the run scores
    (mstar/library/task_match.py). SetupError naming the first differences; nothing is written."""
    task = task_for_run(task_obj, cfg, store=store)
    if task_obj is None:
        return task
    began, where = _task_began_with(cfg, store)
    differences = task_differences(began, task) if began is not None else []
    if differences:
        raise SetupError(f"task {task.name!r} is not the task {store.root} began with ({where}): "
                         f"{describe(differences)}; resume with the task the run began with")
    return task


def _task_began_with(cfg, store) -> tuple[dict | None, str]:
    """The record of the task the run began with, and where it comes from; (None, "") when there
    is none to compare with."""
    from mstar.run.store import RunFormatError, dumps
    if cfg.task.startswith(PYTHON_PREFIX):
        try:
            data = store.read_json(TASK_FILE)
        except RunFormatError:   # missing: the task given is the only one there is (see load_saved_task)
            return None, ""
        return (data, str(store.root / TASK_FILE)) if isinstance(data, dict) else (None, "")
    try:
        named = task_for_run(None, cfg)
    except Exception:   # a module named by --task is the user's code and may raise anything: the
        return None, ""  # name cannot be loaded here (why the task was given), so only the split is checked
    return json.loads(dumps(task_record(named))), f"task {cfg.task!r} loaded again"


def load_saved_task(store) -> Task:
    """The task a run defined in Python saved in its folder, with its scorer imported again."""
    from mstar.run.store import RunFormatError
    try:
        data = store.read_json(TASK_FILE)
    except RunFormatError:
        data = None
    if not isinstance(data, dict):
        raise TaskError(f"{store.root / TASK_FILE} is missing: this run's task was defined in Python; "
                        "resume it from Python with the same task: mstar.resume(path, task=task)")
    scorer = data.pop("scorer", None)
    task = task_from_dict(data, str(store.root / TASK_FILE))
    if scorer is None:
        return task
    try:
        return with_recorded_scorer(task, scorer, "this run's task")
    except TaskError as exc:
        raise TaskError(f"{exc}; resume it from Python with the same task: "
                        f"mstar.resume({str(store.root)!r}, task=task)") from None

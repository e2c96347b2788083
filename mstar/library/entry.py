"""The library's front door: `mstar.evolve`, `mstar.resume`, `mstar.open_run`, `mstar.options`.

    import mstar
    run = mstar.evolve(task, iterations=3, out="runs/mine")   # a Task, or a name: "sample", "locomo", ...
    print(run.champion.test, run.champion.vs_best_seed)
    run.export("best.py")

`evolve` takes every option `mstar evolve` takes, as keywords named like the flags
(--static-size -> static_size=25; the list is `mstar.options()`), and goes the same way: the
keywords become the namespace the command line parses (mstar/library/options.py) and both call
mstar/library/launch.py. So the same options and seed write the same lineage from either.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from mstar.library.errors import SetupError
from mstar.library.options import OptionError, namespace_from_keywords, option_defaults
from mstar.library.run_handle import Run
from mstar.tasks import Task


def options() -> dict[str, Any]:
    """Every option of `mstar.evolve` with its default (the flags of `mstar evolve --help`)."""
    return option_defaults()


def evolve(task: Task | str = "sample", *, out: str | Path | None = None, llm=None,
           on_event: Callable[[Any], None] | None = None, **options: Any) -> Run:
    """Evolve a memory program for `task` and return the finished (or stopped) run.

    task      an mstar.Task (episodes, validation and test queries, a metric or your own scorer;
              see mstar.tasks.python_task), or what `--task` takes: a shipped task's name, a
              .json/.toml task file, "package.module:attribute"
    out       the run folder (default: runs/<task>-s<seed>-<time>, or runs_dir= and name=)
    llm       an mstar.api.llm_config(...) or a TOML file (default: offline, or base_url=/model=)
    on_event  called with each typed lineage event (mstar.run.events) right after it is written:
              the seeds, each iteration (its child, verdict and paired evidence), the race, the test
    options   as `mstar evolve` (mstar.options()): iterations=20, seed=0, track="mlflow", ...

    Raises SetupError (one line) when the run cannot start -- nothing is spent and no folder is
    made; OptionError for an unknown or mistyped option; RunInterrupted (a KeyboardInterrupt) on
    Ctrl-C, after the run is marked stopped: `mstar.resume(path)` continues it. A run stopped by
    its budget or a failing endpoint is returned with status "stopped".
    """
    if out is not None:
        options["out"] = str(out)
    task_obj = task if isinstance(task, Task) else None
    if task_obj is None and not isinstance(task, (str, Path)):
        raise SetupError(f"task must be an mstar.Task or a task name/file, got {type(task).__name__}")
    ns = namespace_from_keywords(task_obj.name if task_obj else str(task), options)
    from mstar.library.launch import evolve_namespace
    _, store = evolve_namespace(ns, task_obj, cli=False, on_event=on_event, llm=llm)
    return Run(store.root)


def resume(path: str | Path, *, task: Task | None = None, on_event: Callable[[Any], None] | None = None,
           max_usd: float | None = None, max_tokens: int | None = None, iterations: int | None = None,
           quiet: bool = False, no_preflight: bool = False) -> Run:
    """Continue a run that stopped (Ctrl-C, a crash, its budget, an endpoint) where it stopped.
    `task`: the Task the run began with, when it was defined in Python with a scorer that cannot
    be imported by name (mstar/library/task_files.py); it must be that task in all the run scores
    (episodes, queries, gold answers, metric or scorer), else SetupError names the differences.
    Other keywords as `mstar resume`. Every check comes before the folder changes: a resume
    refused (SetupError) leaves it as it was. A finished run is not resumed: iterations= more
    than it did is refused; without, it is returned as it is. OptionError for a mistyped keyword."""
    from mstar.library.launch import resume_folder
    from mstar.run.resume import load_state
    from mstar.run.store import RunFormatError, RunLockedError, RunStore, find_run

    _check_types(max_usd=(max_usd, float), max_tokens=(max_tokens, int), iterations=(iterations, int))
    if task is not None and not isinstance(task, Task):
        raise SetupError(f"task= takes the mstar.Task the run began with, got {type(task).__name__}")
    try:
        store = RunStore(find_run(str(path)))
        load_state(store)  # read-only checks first: never lock a folder that is not a run
        store.acquire_lock()
    except (RunFormatError, RunLockedError) as exc:
        raise SetupError(str(exc)) from None
    try:
        resume_folder(store, task_obj=task, cli=False, quiet=quiet, max_usd=max_usd, max_tokens=max_tokens,
                      iterations=iterations, no_preflight=no_preflight, on_event=on_event)
    except RunFormatError as exc:
        raise SetupError(str(exc)) from None
    finally:
        store.release_lock()
    return Run(store.root)


def _check_types(**values) -> None:
    """The types `mstar resume`'s parser gives its flags (their ranges are checked with the
    run, on the one code path: mstar/library/resuming.py); OptionError naming the keyword."""
    for name, (value, kind) in values.items():
        if value is None:
            continue
        ok = isinstance(value, (int, float) if kind is float else int) and not isinstance(value, bool)
        if not ok:
            what = "a number" if kind is float else "an integer"
            raise OptionError(f"mstar.resume: {name} must be {what}, got {value!r}")


def open_run(path: str | Path) -> Run:
    """Any run folder (finished, running or stopped) as a Run."""
    from mstar.run.store import find_run
    return Run(find_run(str(path)))

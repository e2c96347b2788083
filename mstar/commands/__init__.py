"""One module per CLI subcommand; each has `register(subparsers)`.

Adding a command = adding a module here and its name to COMMANDS in mstar/cli.py.
"""

import sys


def load_task_or_report(name: str, data: str | None, **kwargs):
    """Load a task for a command; on bad input print one clear line and return None
    (the command then exits with status 2)."""
    from mstar.tasks import TaskError, load_task

    try:
        return load_task(name, data, **kwargs)
    except (TaskError, FileNotFoundError, ValueError) as exc:
        print(f"mstar: cannot load task {name!r}: {exc}", file=sys.stderr)
        return None


def add_task_options(p, split_alias: bool = False) -> None:
    """A loader's own options, shared by evolve, eval and baselines (stored in the run's config).
    `split_alias`: also accept ALFWorld's --split seen|unseen (the issue's spelling) where --split
    does not already pick the evaluated queries (eval and baselines use it for test|validation)."""
    p.add_argument("--size", type=float, default=None,
                   help="size of the generated sample task (default 1: 50 sessions, 153 validation and "
                        "357 test questions; 0.1-3.5)")
    p.add_argument("--sample-seed", type=int, default=None, help="seed of the generated sample task (default 0)")
    flags = ("--task-split", "--split") if split_alias else ("--task-split",)
    p.add_argument(*flags, dest="task_split", choices=("seen", "unseen"), default=None,
                   help="ALFWorld games to validate and test on: seen (valid_seen) or unseen (valid_unseen, "
                        "with its corrupt games); default seen")


def task_options(args) -> dict:
    """The loader options given on the command line (see add_task_options)."""
    named = {"size": getattr(args, "size", None), "sample_seed": getattr(args, "sample_seed", None),
             "split": getattr(args, "task_split", None)}
    return {k: v for k, v in named.items() if v is not None}

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

"""`mstar evolve`: launch an evolution run (also `python evolve.py ...`).

A thin shell over the Python API: the options are defined once (mstar/library/options.py), the
parsed namespace goes the same way `mstar.evolve(...)` goes (mstar/library/launch.py), and a
run that cannot start is one line on stderr with its exit code (2 bad input, 3 an endpoint)."""
from __future__ import annotations

import sys

# Defined with the Python API; re-exported here, where the commands and tests found them before.
from mstar.library.options import (ALGORITHM_FIELDS, add_algorithm_args, add_evolve_args,  # noqa: F401
                                   check_numbers, resolve_config)
from mstar.library.printing import exit_code, print_done, test_line  # noqa: F401


def register(sub) -> None:
    p = sub.add_parser("evolve", help="launch an evolution run", allow_abbrev=False)
    add_evolve_args(p)
    p.set_defaults(func=cmd_evolve)


def cmd_evolve(args) -> int:
    from mstar.library.errors import SetupError
    from mstar.library.launch import evolve_namespace

    try:
        summary, _ = evolve_namespace(args, cli=True)
    except SetupError as exc:
        if str(exc):
            print(f"mstar: {exc}", file=sys.stderr)
        return exc.code
    return exit_code(summary)

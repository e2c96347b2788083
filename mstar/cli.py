"""The `mstar` command line. Each subcommand lives in its own module under mstar/commands/."""
from __future__ import annotations

import argparse
import importlib
import os
import sys

# Subcommand modules, in the order `mstar --help` lists them.
COMMANDS = ("evolve", "resume", "repair", "runs", "lineage", "show", "export", "eval", "report", "ui", "baselines",
            "check", "serve", "memory")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mstar", description="Evolve memory programs for LLM agents.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"mstar.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv[:1] == ["check"]:  # the sandbox checker parses its own flags (mstar/commands/check.py)
            from mstar.commands.check import cmd_check
            return cmd_check(argparse.Namespace(check_argv=argv[1:]))
        args = build_parser().parse_args(argv)
        return args.func(args)
    except BrokenPipeError:
        # The reader went away (`mstar runs --json | head`): stop quietly, as `cat` would. Whatever
        # is still buffered for stdout goes nowhere, so the interpreter's final flush cannot fail.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 141  # 128 + SIGPIPE, what a shell reports for a program a closed pipe stopped


if __name__ == "__main__":
    sys.exit(main())

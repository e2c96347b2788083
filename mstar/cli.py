"""The `mstar` command line. Each subcommand lives in its own module under mstar/commands/."""
from __future__ import annotations

import argparse
import importlib
import sys

# Subcommand modules, in the order `mstar --help` lists them.
COMMANDS = ("evolve", "resume", "runs", "lineage", "show", "export", "eval", "report", "baselines")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mstar", description="Evolve memory programs for LLM agents.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"mstar.commands.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

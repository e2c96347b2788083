"""The `mstar` command line. Each subcommand lives in its own module under mstar/commands/."""
from __future__ import annotations

import argparse
import difflib
import importlib
import sys

# Subcommand modules, in the order `mstar --help` lists them.
COMMANDS = ("evolve", "resume", "repair", "runs", "lineage", "show", "export", "eval", "report", "ui", "baselines",
            "check", "serve", "memory")


class Parser(argparse.ArgumentParser):
    """Every `mstar` parser and subcommand parser (add_subparsers makes them of this class).

    No abbreviations: `--iteration` must not silently mean `--iterations`, and a flag added later
    must not change what an old command line means. An unknown flag is refused by the parser it
    was given to, so `mstar evolve --iters 3` shows evolve's usage (argparse's own would show
    the top-level one) and names the flags it is close to."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and self.prog != "mstar":   # the top-level parser reports its own extras itself
            self.error(unknown_line(extras, self._option_string_actions))
        return parsed, extras


def unknown_line(extras: list[str], options) -> str:
    """'unrecognized arguments: --iters (did you mean --iterations?)'."""
    hints = []
    for arg in extras:
        flag = arg.split("=", 1)[0]
        if flag.startswith("-"):
            close = [o for o in options if o.startswith("--") and o.startswith(flag) and flag != "--"] or \
                difflib.get_close_matches(flag, [o for o in options if o.startswith("--")], n=2, cutoff=0.7)
            if close:
                hints.append(f"{flag}: did you mean {' or '.join(close)}?")
    return f"unrecognized arguments: {' '.join(extras)}" + (f" ({'; '.join(hints)})" if hints else "")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="mstar", description="Evolve memory programs for LLM agents.")
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
        # The reader went away (`mstar runs --json | head`): stop quietly, as `cat` would. A run
        # in progress was already marked stopped by its guard (mstar/library/exits.py).
        from mstar.library.exits import PIPE_CLOSED, discard_stdout
        discard_stdout()
        return PIPE_CLOSED


if __name__ == "__main__":
    sys.exit(main())

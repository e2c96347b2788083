"""The README's quickstart works as written (issue 40): every shell block marked
`<!-- readme-test: ... -->` runs, line by line, with the venv's bin on PATH (what
`source .venv/bin/activate` does), and every `mstar` command anywhere in the quickstart names a
real subcommand and flags its parser knows."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
MARK = "<!-- readme-test:"


def _marked_blocks() -> list[str]:
    blocks = []
    for part in README.split(MARK)[1:]:
        body = part.split("```bash\n", 1)[1].split("```", 1)[0]
        blocks.append(body)
    return blocks


def _quickstart() -> str:
    return README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]


def test_the_quickstart_has_a_block_that_runs_as_written():
    assert _marked_blocks(), "no block is marked to run"


@pytest.mark.parametrize("block", _marked_blocks())
def test_a_marked_block_runs_as_written(block, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "MSTAR_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"   # `source .venv/bin/activate`
    for line in (ln.strip() for ln in block.splitlines()):
        if not line or line.startswith("#"):
            continue
        proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=900)
        assert proc.returncode == 0, f"{line}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    assert (tmp_path / "best.py").exists() and (tmp_path / "runs" / "first" / "report.html").exists()


def test_every_mstar_command_of_the_quickstart_parses():
    """The commands not run above (a server, the UI, a model) still name real flags."""
    from mstar.cli import build_parser

    parser = build_parser()
    named = [c for c in re.findall(r"`(mstar [^`]+)`", _quickstart()) if len(c.split()) > 2 or c == "mstar ui"]
    commands = named + [ln.strip() for b in _marked_blocks() for ln in b.splitlines() if ln.strip().startswith("mstar ")]
    assert len(commands) >= 10
    for command in commands:
        words = [w for w in shlex.split(command.split("#")[0]) if "=" not in w or w.startswith("-")]
        try:
            parser.parse_args(words[1:])
        except SystemExit as exc:
            pytest.fail(f"`{command}` does not parse (exit {exc.code})")

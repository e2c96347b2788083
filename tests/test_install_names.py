"""The distribution is `mstar-evolve`: `mstar` on PyPI is someone else's project, so no text in
the repository may tell users to install it (issue 38)."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# `pip install mstar`, `pip install 'mstar[serve]'`, `pip install "mstar[x]" ...`, `pip install -U mstar`
BARE = re.compile(r"""pip3?\s+install\s+(?:-[-\w]+\s+)*['"]?mstar(?:['"\[\s]|$)""", re.M)
TEXT = {".py", ".md", ".toml", ".txt", ".cfg", ".js", ".html", ".sh", ".json", ".ipynb", ".yml", ".yaml", ""}


def _files():
    skip = {".git", ".venv", "venv", "runs", "build", "dist", "__pycache__", ".mstar-cache", "node_modules",
            "mlruns", "wandb"}
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if path.is_file() and not skip & set(parts) and path.suffix in TEXT \
                and not any(p.endswith(".egg-info") for p in parts):
            yield path


def test_the_distribution_has_a_name_of_our_own():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["name"] == "mstar-evolve" and meta["scripts"]["mstar"] == "mstar.cli:main"


def test_the_pattern_catches_the_bare_name_and_spares_ours():
    assert BARE.search("run pip install 'mstar[serve]' first") and BARE.search("pip install mstar\n")
    assert BARE.search('pip install -U "mstar[gepa]"')
    assert not BARE.search("pip install 'mstar-evolve[serve]'") and not BARE.search('pip install -e ".[serve]"')


def test_no_file_tells_users_to_install_the_bare_name():
    offenders = []
    for path in _files():
        if path == Path(__file__).resolve():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        offenders += [f"{path.relative_to(ROOT)}: {m.group(0)!r}" for m in BARE.finditer(text)]
    assert offenders == []

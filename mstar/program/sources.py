"""Where program sources come from: built-in programs by name, or files.

Built-in programs live in two source-only packages: `seeds/` (the paper's three seeds) and
`baselines/` (the systems the paper and our seed documents compare against). A name is looked up
in both; the two packages never share a name. Anything ending in `.py`, or naming a path, is read
from disk.
"""
from __future__ import annotations

from importlib import resources
from pathlib import Path

BUILTIN_SEEDS = ("vector_search", "llm_summarizer", "experience_learner")
PROGRAM_PACKAGES = ("seeds", "baselines")


def _names_in(package: str) -> list[str]:
    root = resources.files(package)
    return sorted(p.name[:-3] for p in root.iterdir() if p.name.endswith(".py") and not p.name.startswith("_"))


def seed_names() -> list[str]:
    return _names_in("seeds")


def baseline_names() -> list[str]:
    return _names_in("baselines")


def builtin_programs() -> dict[str, str]:
    """Every built-in program name -> the package that holds it."""
    out: dict[str, str] = {}
    for package in PROGRAM_PACKAGES:
        for name in _names_in(package):
            out.setdefault(name, package)
    return out


def load_program_source(ref: str) -> tuple[str, str]:
    """`ref` is a built-in program name (seed or baseline) or a path to a .py file.
    Returns (name, source)."""
    ref = ref.strip()
    path = Path(ref)
    builtins = builtin_programs()
    # A bare built-in name wins over a same-named file or folder in the working directory.
    if ref in builtins and not ref.endswith(".py") and len(path.parts) == 1:
        return ref, resources.files(builtins[ref]).joinpath(f"{ref}.py").read_text(encoding="utf-8")
    if ref.endswith(".py") or path.exists():
        if not path.is_file():
            raise FileNotFoundError(f"program file {ref} does not exist")
        return path.stem, path.read_text(encoding="utf-8")
    raise ValueError(f"unknown program {ref!r}; built-in seeds: {', '.join(seed_names())}; "
                     f"baselines: {', '.join(baseline_names())} (or give a .py path)")

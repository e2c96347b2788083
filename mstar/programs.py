"""Where program sources come from: built-in seeds by name, or files."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

BUILTIN_SEEDS = ("vector_search", "llm_summarizer", "experience_learner")


def seed_names() -> list[str]:
    root = resources.files("seeds")
    return sorted(p.name[:-3] for p in root.iterdir() if p.name.endswith(".py") and not p.name.startswith("_"))


def load_program_source(ref: str) -> tuple[str, str]:
    """`ref` is a built-in seed name or a path to a .py file. Returns (name, source)."""
    path = Path(ref)
    if ref.endswith(".py") or path.exists():
        if not path.is_file():
            raise FileNotFoundError(f"program file {ref} does not exist")
        return path.stem, path.read_text(encoding="utf-8")
    names = seed_names()
    if ref not in names:
        raise ValueError(f"unknown seed {ref!r}; built-in seeds are: {', '.join(names)} (or give a .py path)")
    return ref, resources.files("seeds").joinpath(f"{ref}.py").read_text(encoding="utf-8")

"""The sample task: generated from a seed by default, or loaded from a JSON task file.

`load_sample(None)` builds the procedural task of mstar/tasks/sample_gen.py (invented
LoCoMo-style multi-session chats, token F1) at the default seed and size; `seed=` and `size=`
pick another one. `load_sample(path)` loads a task file in the JSON task format instead, e.g.
the small hand-written task bundled as mstar/data/sample_task.json (`bundled_sample_path()`).
"""
from __future__ import annotations

from importlib import resources

from mstar.tasks.jsonfile import load_json_task
from mstar.tasks.model import Task, TaskError
from mstar.tasks.sample_gen import DEFAULT_SEED, DEFAULT_SIZE, generate_sample


def load_sample(data: str | None = None, *, seed: int | None = None, size: float | None = None,
                sample_seed: int | None = None) -> Task:
    # `data` lets a user point the sample loader at a JSON task file (an edited copy, the
    # bundled hand-written task); seed and size only apply to the generated task.
    # (`sample_seed` is the name the CLI and load_task use, beside the run's own --seed.)
    if data is not None:
        if size is not None or sample_seed is not None or seed is not None:
            raise TaskError("--size and --sample-seed shape the generated sample; a task file given with "
                            "--data has its own size")
        return load_json_task(data)
    chosen = sample_seed if sample_seed is not None else seed
    return generate_sample(seed=DEFAULT_SEED if chosen is None else chosen,
                           size=DEFAULT_SIZE if size is None else size)


def bundled_sample_path() -> str:
    """Path of the small hand-written sample task (20 sessions, 80 questions)."""
    return str(resources.files("mstar") / "data" / "sample_task.json")

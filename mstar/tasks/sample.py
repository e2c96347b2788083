"""The bundled toy task (mstar/data/sample_task.json): invented LoCoMo-style chats, token F1."""
from __future__ import annotations

import json
from importlib import resources

from mstar.tasks.jsonfile import load_json_task, task_from_dict
from mstar.tasks.model import Task, TaskError


def load_sample(data: str | None = None) -> Task:
    # `data` lets a user point the sample loader at an edited copy of the file.
    if data is not None:
        return load_json_task(data)
    resource = resources.files("mstar") / "data" / "sample_task.json"
    try:
        text = resource.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskError(f"{resource}: the bundled sample task is missing from the installation") from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskError(f"{resource}: not valid JSON: {exc.msg} at line {exc.lineno}") from None
    return task_from_dict(raw, str(resource), default_name="sample")

"""Reading task files with errors that name the file, the line (JSONL) or place (JSON), and the problem."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

from mstar.tasks.model import TaskError


def fail(source: str, where: str, problem: str) -> TaskError:
    return TaskError(f"{source}: {where}: {problem}")


def read_text(path: str | Path, what: str = "task file") -> str:
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TaskError(f"{path}: no such {what}") from None
    except IsADirectoryError:
        raise TaskError(f"{path}: is a folder, expected a {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path}: cannot read: {exc}") from None


def read_json(path: str | Path, what: str = "task file") -> Any:
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def iter_jsonl(path: str | Path, what: str = "JSONL file") -> Iterator[tuple[int, dict]]:
    """(line number, object) for every non-blank line; any bad line is a TaskError naming it."""
    text = read_text(path, what)
    seen = False
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskError(f"{path}: line {n}: not valid JSON: {exc.msg} at column {exc.colno}") from None
        if not isinstance(obj, dict):
            raise TaskError(f"{path}: line {n}: expected a JSON object, got {type(obj).__name__}")
        seen = True
        yield n, obj
    if not seen:
        raise TaskError(f"{path}: is empty; expected one JSON object per line")


def required_str(obj: dict, key: str, source: str, where: str) -> str:
    if key not in obj:
        raise fail(source, where, f"missing '{key}'")
    value = obj[key]
    if not isinstance(value, str) or not value.strip():
        raise fail(source, where, f"'{key}' must be a non-empty string, got {value!r:.60}")
    return value


def optional_meta(obj: dict, source: str, where: str) -> dict:
    meta = obj.get("meta", {})
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise fail(source, where, f"'meta' must be an object, got {type(meta).__name__}")
    return meta


def answer_text(obj: dict, source: str, where: str, key: str = "answer") -> str:
    """A gold answer as text; numbers are accepted (LoCoMo has answers like 2022) and kept as text."""
    if key not in obj:
        raise fail(source, where, f"missing '{key}'")
    answer = obj[key]
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise fail(source, where, f"'{key}' must be a string or number, got {type(answer).__name__}")
    return str(answer)


def category_text(obj: dict, source: str, where: str) -> str | None:
    category = obj.get("category")
    if category is None:
        return None
    if isinstance(category, bool) or not isinstance(category, (str, int)):
        raise fail(source, where, f"'category' must be a string or null, got {type(category).__name__}")
    return str(category)


def check_unique(ids: list[str], source: str, section: str) -> None:
    seen: set[str] = set()
    for i, item_id in enumerate(ids):
        if item_id in seen:
            raise fail(source, f"{section}[{i}]", f"duplicate id {item_id!r}")
        seen.add(item_id)


def three_way_split(n: int, episode_share: float, test_share: float, test_cap: int | None = None
                    ) -> tuple[int, int, int]:
    """Sizes (episodes, validation, test) for n shuffled rows of a task without a training split.

    Episodes take floor(episode_share·n); test round(test_share·n), at most test_cap; validation the
    rest. Validation gets at least one row whenever n >= 2 (episodes give way first), so tiny
    files still make a runnable task.
    """
    n_ep = int(episode_share * n)
    n_test = round(test_share * n)
    if test_cap is not None:
        n_test = min(n_test, test_cap)
    while n - n_ep - n_test < 1 and (n_ep > 1 or n_test > 0):
        if n_test > 0 and n_test >= n_ep:
            n_test -= 1
        else:
            n_ep -= 1
    return n_ep, n - n_ep - n_test, n_test

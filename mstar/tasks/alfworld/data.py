"""The released ALFWorld layout, read without playing a game.

    <data>/json_2.1.1/{train,valid_seen,valid_unseen,valid_train}/<task>-<Obj>-<MRecep>-<Recep>-<scene>/
        trial_*/traj_data.json + game.tw-pddl

`<data>` may also be the json_2.1.1 folder itself. A game is listed when both files exist, its
directory names one of the six task types (like alfworld's own loader, "movable" and sliced
tasks are left out), and its game file is not marked unsolvable. The goal text is read from the
game's grammar ("Your task is to: ..."), the task type from its directory name, so listing
thousands of training games reads no JSON.

Splits: --split seen -> valid_seen (valid_train when a download has only that), unseen ->
valid_unseen. Training episodes always come from train.
"""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

from mstar.tasks.alfworld.layouts import TASK_TYPES
from mstar.tasks.model import TaskError

SPLIT_DIRS = {"seen": ("valid_seen", "valid_train"), "unseen": ("valid_unseen",)}


@dataclass(frozen=True)
class GameRecord:
    name: str          # "<split dir>/<task dir>/<trial>"
    game_file: str
    task_type: str


def find_root(data: str | Path) -> Path:
    """The json_2.1.1 folder under (or at) `data`."""
    path = Path(data).expanduser()
    for candidate in (path, path / "json_2.1.1"):
        if candidate.is_dir() and (candidate / "train").is_dir():
            return candidate
    raise TaskError(f"{path}: not an ALFWorld data folder (expected json_2.1.1/train, "
                    f"json_2.1.1/valid_seen, json_2.1.1/valid_unseen under it)")


def split_dir(root: Path, split: str) -> Path:
    if split not in SPLIT_DIRS:
        raise TaskError(f"ALFWorld split must be one of {', '.join(SPLIT_DIRS)}, got {split!r}")
    for name in SPLIT_DIRS[split]:
        if (root / name).is_dir():
            return root / name
    raise TaskError(f"{root}: no {' or '.join(SPLIT_DIRS[split])} folder for split {split!r}")


def task_type_of(task_dir: str) -> str | None:
    """The task type a directory name starts with, or None for types mstar does not play."""
    if "movable" in task_dir or "Sliced" in task_dir:
        return None
    head = task_dir.split("-", 1)[0]
    return head if head in TASK_TYPES else None


def list_games(folder: Path) -> tuple[list[GameRecord], dict[str, int]]:
    """Playable games in one split folder, sorted by name; plus counts of what was skipped."""
    games, skipped = [], {"other task type": 0, "missing files": 0, "unsolvable": 0}
    for task_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        task_type = task_type_of(task_dir.name)
        for trial in sorted(p for p in task_dir.iterdir() if p.is_dir()):
            if task_type is None:
                skipped["other task type"] += 1
                continue
            game_file = trial / "game.tw-pddl"
            if not game_file.is_file() or not (trial / "traj_data.json").is_file():
                skipped["missing files"] += 1
                continue
            games.append(GameRecord(f"{folder.name}/{task_dir.name}/{trial.name}", str(game_file.resolve()),
                                    task_type))
    return games, skipped


def read_game(record: GameRecord) -> tuple[str, bool]:
    """(goal text, solvable flag) of a game file; TaskError when it is not a game."""
    try:
        game = json.loads(Path(record.game_file).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise TaskError(f"{record.game_file}: not a readable game file ({exc})") from None
    grammar = game.get("grammar") if isinstance(game, dict) else None
    if not isinstance(grammar, str) or "pddl_problem" not in game:
        raise TaskError(f"{record.game_file}: missing grammar or pddl_problem")
    m = re.search(r"Your task is to: (.*?)\.?\"", grammar)
    goal = m.group(1).strip() if m else ""
    if not goal or goal == "UNKNOWN GOAL":
        raise TaskError(f"{record.game_file}: the grammar carries no goal text (generate games with "
                        "the task added, as alfworld-generate does)")
    return goal, bool(game.get("solvable", True))


def known_plan(record: GameRecord) -> list[str] | None:
    """The expert plan a game's traj_data.json carries (synthetic games do), else None."""
    try:
        traj = json.loads((Path(record.game_file).parent / "traj_data.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    plan = (traj.get("mstar_synth") or {}).get("plan") if isinstance(traj, dict) else None
    return [str(c) for c in plan] if isinstance(plan, list) and plan else None


def pick_balanced(games: list[GameRecord], n: int | None, seed: int) -> list[GameRecord]:
    """Up to n games, as even across task types as the data allows, in a seeded order."""
    order = list(games)
    random.Random(seed).shuffle(order)
    if n is None or n >= len(order):
        return order
    by_type: dict[str, list[GameRecord]] = {}
    for g in order:
        by_type.setdefault(g.task_type, []).append(g)
    out: list[GameRecord] = []
    while len(out) < n:
        for t in TASK_TYPES:
            if by_type.get(t) and len(out) < n:
                out.append(by_type[t].pop(0))
    return out


def split_eval(games: list[GameRecord], n_valid: int, n_test: int, seed: int) -> tuple[list, list]:
    """(validation, test) drawn from one split's games in a seeded order; when the split is
    smaller than n_valid + n_test both shrink in proportion."""
    order = list(games)
    random.Random(seed + 1).shuffle(order)
    total = n_valid + n_test
    if total > len(order):
        n_test = round(len(order) * n_test / total) if total else 0
        n_valid = len(order) - n_test
    return order[n_test:n_test + n_valid], order[:n_test]

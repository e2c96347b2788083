"""The ALFWorld task loaders: `alfworld` (released data) and `alfworld-synth` (generated offline).

A task here is (episodes = expert trajectories of training games, validation/test = games to
play, metric "success"). Each query item is a game:
    question  the goal text ("put some apple on fridge")     category  the task type
    answer    the expert plan joined by " > " when known (for readers; never scored)
    meta      {"interactive": True, "task_type", "game_file", "split",
               "env": {"factory": "mstar.tasks.alfworld.env:AlfworldEnv", "kwargs": {"game_file"}},
               "evidence_text": the plan's take / appliance steps (mstar.tasks.evidence.plan_evidence)}
The evaluator plays it through mstar.interactive.evaluate_case.play_case; corrupt games (no
admissible command at reset, paper Appendix K) are found there and counted apart, not scored.

Synthetic games are generated once per (seed, sizes) under a cache folder in the released layout
and then read by the same code as real data, expert trajectories included.
"""
from __future__ import annotations

import json
from pathlib import Path

from mstar.tasks.alfworld import FACTORY, require
from mstar.tasks.alfworld.data import (GameRecord, find_root, known_plan, list_games, pick_balanced,
                                       read_game, split_dir, split_eval)
from mstar.tasks.alfworld.expert import cached_plan, expert_trajectories, trajectory_text
from mstar.tasks.alfworld.synth import SYNTH_VERSION, plan_split, write_games
from mstar.tasks.evidence import plan_evidence, with_evidence
from mstar.tasks.model import Episode, QueryItem, Task, TaskError

DEFAULT_CACHE = Path(".mstar-cache")   # beside the LLM response cache, as the CLI's other caches


def _item(record: GameRecord, goal: str, plan: list[str]) -> QueryItem:
    meta = {"interactive": True, "task_type": record.task_type, "game_file": record.game_file,
            "split": record.name.split("/", 1)[0],
            "env": {"factory": FACTORY, "kwargs": {"game_file": record.game_file}}}
    # The memory X-ray's evidence: where the expert found the object, which appliance it used.
    units, problems = plan_evidence(plan) if plan else ([], ["no expert plan is known for this game"])
    return QueryItem(id=record.name, question=goal, answer=" > ".join(plan), category=record.task_type,
                     meta=with_evidence(meta, units, problems))


def _episodes(train: list[GameRecord], cache_dir: Path, workers: int | None) -> tuple[list[Episode], int]:
    records = expert_trajectories([g.game_file for g in train], cache_dir, workers=workers,
                                  plans=[known_plan(g) for g in train])
    episodes, failed = [], 0
    for game, rec in zip(train, records):
        if not rec.get("won"):
            failed += 1
            continue
        episodes.append(Episode(id=game.name, text=trajectory_text(rec),
                                meta={"task_type": game.task_type, "game_file": game.game_file,
                                      "steps": len(rec["steps"])}))
    return episodes, failed


def build_task(name: str, root: Path, split: str, *, n_train: int | None, n_valid: int, n_test: int,
               seed: int, cache_dir: Path, workers: int | None,
               label: str = "ALFWorld household games") -> Task:
    """Read a released-layout folder into a Task (see module docstring)."""
    train_games, _ = list_games(root / "train")
    eval_folder = split_dir(root, split)
    eval_games, skipped = list_games(eval_folder)
    if not train_games or not eval_games:
        raise TaskError(f"{root}: no playable games in train/ or {eval_folder.name}/")
    episodes, failed = _episodes(pick_balanced(train_games, n_train, seed), cache_dir, workers)
    if not episodes:
        raise TaskError(f"{root}: the expert solved none of the training games")
    goals, unsolvable = {}, 0
    for g in eval_games:
        goal, solvable = read_game(g)
        if solvable:
            goals[g.name] = goal
        else:
            unsolvable += 1
    playable = [g for g in eval_games if g.name in goals]
    validation, test = split_eval(playable, n_valid, n_test, seed)
    # An evaluation game's answer is its expert plan when one is known (for readers; never
    # scored): playing the planner for every game would only cost time.
    plans = {g.name: known_plan(g) or cached_plan(g.game_file, cache_dir) for g in validation + test}
    make = lambda games: tuple(_item(g, goals[g.name], plans[g.name]) for g in games)  # noqa: E731
    notes = [f"{len(episodes)} expert trajectories of training games",
             f"{len(validation)} validation and {len(test)} test games from {eval_folder.name}"]
    if failed:
        notes.append(f"{failed} training games the expert could not solve were left out")
    if unsolvable or skipped["other task type"]:
        notes.append(f"skipped in {eval_folder.name}: {unsolvable} marked unsolvable, "
                     f"{skipped['other task type']} of other task types")
    return Task(name=name, episodes=tuple(episodes), validation=make(validation), test=make(test),
                metric_name="success",
                description=f"{label} (success within 50 steps); " + "; ".join(notes) + ".")


def load_alfworld(data: str | None, split: str = "seen", *, n_train: int | None = 250, n_valid: int = 50,
                  n_test: int = 50, seed: int = 0, cache_dir: str | Path | None = None,
                  workers: int | None = None) -> Task:
    """Released ALFWorld data (`--data DIR`, `--split seen|unseen`). Expert trajectories of
    `n_train` training games (balanced over task types) are played once and cached."""
    if not data:
        raise TaskError("task 'alfworld' needs --data: the folder holding json_2.1.1 (the released games); "
                        "for generated games use the task 'alfworld-synth'")
    require()
    root = find_root(data)
    return build_task("alfworld", root, split or "seen", n_train=n_train, n_valid=n_valid, n_test=n_test,
                      seed=seed, cache_dir=Path(cache_dir) if cache_dir else DEFAULT_CACHE / "alfworld",
                      workers=workers)


def synth_root(seed: int, per_type_train: int, per_type_eval: int, corrupt_unseen: int) -> Path:
    return (DEFAULT_CACHE / "alfworld-synth" /
            f"v{SYNTH_VERSION}-seed{seed}-train{per_type_train}-eval{per_type_eval}-corrupt{corrupt_unseen}")


def generate_synth(root: Path, splits: tuple[str, ...], *, per_type_train: int, per_type_eval: int,
                   seed: int, corrupt: dict[str, int] | None = None) -> Path:
    """Write the synthetic games of `splits` under root/json_2.1.1 unless already complete.
    Deterministic: the same arguments write the same files on any machine."""
    corrupt = corrupt or {}
    for split in splits:
        marker = root / "json_2.1.1" / f".complete-{split}"
        if marker.exists():
            continue
        per_type = per_type_train if split == "train" else per_type_eval
        specs = plan_split(split, per_type, seed, corrupt=corrupt.get(split, 0))
        write_games(root, split, specs)
        marker.write_text(json.dumps({"games": len(specs), "seed": seed}), encoding="utf-8")
    return root / "json_2.1.1"


def load_alfworld_synth(data: str | None = None, split: str = "seen", *, per_type_train: int = 10,
                        per_type_eval: int = 8, seed: int = 0, corrupt_unseen: int = 2,
                        workers: int | None = None) -> Task:
    """Generated ALFWorld games (no download): six task types over a few rooms, seeded, cached
    under `data` (default .mstar-cache/alfworld-synth/...). `per_type_eval` games of each type
    are split half validation, half test; the unseen split also holds `corrupt_unseen` corrupt
    games, as the paper's unseen split does."""
    require()
    split = split or "seen"
    if split not in ("seen", "unseen"):
        raise TaskError(f"ALFWorld split must be seen or unseen, got {split!r}")
    root = Path(data).expanduser() if data else synth_root(seed, per_type_train, per_type_eval, corrupt_unseen)
    eval_split = "valid_seen" if split == "seen" else "valid_unseen"
    json_root = generate_synth(root, ("train", eval_split), per_type_train=per_type_train,
                               per_type_eval=per_type_eval, seed=seed,
                               corrupt={"valid_unseen": corrupt_unseen})
    n_eval = per_type_eval * 6 + (corrupt_unseen if split == "unseen" else 0)
    task = build_task("alfworld-synth", json_root, split, n_train=None, n_valid=n_eval - n_eval // 2,
                      n_test=n_eval // 2, seed=seed, cache_dir=root, workers=workers,
                      label=f"Synthetic ALFWorld-format games generated offline (seed {seed})")
    return task

"""Expert trajectories of ALFWorld games: the planner's plan, played, as text -- cached on disk.

An episode to memorise is what an expert did in a training game: the goal, the first
observation, and each command with what the game answered. For released games the plan comes
from alfworld's AlfredExpert in planner mode (Fast Downward over the game's PDDL); a synthetic
game carries its generator's plan (synth.expert_plan: Fast Downward's optimal search takes
seconds to minutes on two-object kitchens, which would make generation depend on the machine's
speed). Either is played in the game's own process (mstar.interactive.game_process), so
TextWorld's global state never meets another game, and only a plan that wins is an episode.

Cache: one JSON per game under `cache_dir/experts/`, named by the SHA-1 of the game file's bytes,
so a regenerated or edited game is never served a stale trajectory, and the same game in two
places is played once. A lasting failure (no plan, plan does not win, engine error) is cached too
-- as a failure with its reason -- so a broken game is not replayed on every load; a crashed or
hung game process (an overloaded machine, a script without a __main__ guard) is not.
"""
from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Sequence

from mstar.interactive.env import EnvSpec
from mstar.interactive.game_process import GameError, GameProcess
from mstar.tasks.alfworld import FACTORY

EXPERT_TIMEOUT_S = 60.0
CACHE_VERSION = 3


def game_digest(game_file: str | Path) -> str:
    return hashlib.sha1(Path(game_file).read_bytes()).hexdigest()


def run_expert(game_file: str | Path, *, plan: Sequence[str] | None = None, timeout_s: float = EXPERT_TIMEOUT_S,
               max_steps: int = 60) -> dict:
    """Play an expert plan in `game_file` and record what the game answered. Without `plan`, ask
    alfworld's planner (each in the game's own process: the planner re-plans after every step,
    which costs seconds on two-object games, so the plan is played in a plain game). Returns
    {"goal", "intro", "plan", "source", "steps": [[command, observation], ...], "won", "error"}."""
    record = {"version": CACHE_VERSION, "goal": "", "intro": "", "plan": list(plan or []),
              "source": "given" if plan else "planner", "steps": [], "won": False, "error": None}
    try:
        if not plan:
            with GameProcess(EnvSpec(FACTORY, {"game_file": str(game_file), "expert": True}),
                             timeout_s=timeout_s, call_timeout_s=timeout_s) as planner:
                record["plan"] = list(planner.reset().extra.get("expert_plan") or [])
        with GameProcess(EnvSpec(FACTORY, {"game_file": str(game_file)}),
                         timeout_s=timeout_s, call_timeout_s=timeout_s) as game:
            obs = game.reset()
            record.update(goal=obs.task, intro=obs.text)
            if not obs.admissible:
                record["error"] = "no admissible command after reset (corrupt game)"
                return record
            for command in record["plan"][:max_steps]:
                result = game.step(command)
                record["steps"].append([command, result.observation.text])
                if result.won:
                    record["won"] = True
                    break
    except GameError as exc:
        record["error"] = str(exc)
        record["transient"] = exc.kind != "env"   # a crash or a hang may not happen next time
        return record
    except Exception as exc:  # the process could not start
        record["error"] = f"{type(exc).__name__}: {exc}"
        record["transient"] = True
        return record
    if not record["won"]:
        record["error"] = "the expert plan did not win" if record["plan"] else "the planner found no plan"
    return record


def _cache_path(cache_dir: Path, digest: str) -> Path:
    return Path(cache_dir) / "experts" / f"{digest}.json"


def cached_plan(game_file: str | Path, cache_dir: str | Path) -> list[str]:
    """The winning expert plan of a game if one is in the cache, else [] (nothing is played)."""
    path = _cache_path(Path(cache_dir), game_digest(game_file))
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return []
    return list(record.get("plan") or []) if record.get("won") and record.get("version") == CACHE_VERSION else []


def expert_trajectories(game_files: Sequence[str | Path], cache_dir: str | Path, *,
                        plans: Sequence[Sequence[str] | None] | None = None, workers: int | None = None,
                        timeout_s: float = EXPERT_TIMEOUT_S) -> list[dict]:
    """The expert record of each game (same order), from the cache or played and cached; a game
    with a known plan (`plans[i]`, e.g. the synthetic generator's) is played with it, the others
    with the planner's."""
    plans = list(plans) if plans is not None else [None] * len(game_files)
    cache_dir = Path(cache_dir)
    digests = [game_digest(f) for f in game_files]
    out: list[dict | None] = [None] * len(game_files)
    todo = []
    for i, digest in enumerate(digests):
        path = _cache_path(cache_dir, digest)
        if path.exists():
            try:
                cached = json.loads(path.read_text(encoding="utf-8"))
                if cached.get("version") == CACHE_VERSION:
                    out[i] = cached
                    continue
            except (OSError, json.JSONDecodeError):
                pass
        todo.append(i)
    if todo:
        n = workers or max(1, min(len(todo), os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=n) as pool:
            play = lambda j: run_expert(game_files[j], plan=plans[j], timeout_s=timeout_s)  # noqa: E731
            for i, record in zip(todo, pool.map(play, todo)):
                out[i] = record
                if record.get("transient"):   # not cached: a lasting failure is, a passing one is retried
                    continue
                path = _cache_path(cache_dir, digests[i])
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(record), encoding="utf-8")
                tmp.replace(path)
    return out  # type: ignore[return-value]


def trajectory_text(record: dict) -> str:
    """The episode text of an expert record: goal first (what retrieval should match on), then
    the first observation and the transcript, then the outcome."""
    lines = [f"Your task is to: {record['goal']}"]
    intro = [ln.strip() for ln in record.get("intro", "").splitlines()
             if ln.strip() and not ln.startswith("-=") and not ln.startswith("Your task is to:")]
    lines += intro
    for command, observation in record.get("steps", []):
        lines.append(f"> {command}")
        lines += [ln.strip() for ln in observation.splitlines() if ln.strip()]
    n = len(record.get("steps", []))
    lines.append(f"Task completed in {n} steps." if record.get("won") else f"Task not completed after {n} steps.")
    return "\n".join(lines)

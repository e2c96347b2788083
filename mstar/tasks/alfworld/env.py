"""One ALFWorld game as an mstar.interactive Environment, over TextWorld's PDDL engine.

Built inside the game's own child process (mstar.interactive.game_process) from
EnvSpec("mstar.tasks.alfworld.env:AlfworldEnv", {"game_file": ...}): TextWorld's parsers and gym
registry are process-global, so one game per process is the only safe use. The wrappers are
alfworld's: AlfredDemangler (ids -> "apple 1"), AlfredInfos (the game file in the infos) and,
with expert=True, AlfredExpert in planner mode, whose plan (Fast Downward, bundled with
textworld[pddl]) arrives in Observation.extra["expert_plan"] after reset.
"""
from __future__ import annotations

import copy
import re

from mstar.interactive.env import Observation, StepResult
from mstar.tasks.alfworld import EXTRA_HINT   # FACTORY there names AlfworldEnv below

try:   # at import, so the game processes' fork server loads the engine once for all games
    import textworld
    import textworld.gym
    from alfworld.agents.environment.alfred_tw_env import (AlfredDemangler, AlfredExpert,
                                                            AlfredExpertType, AlfredInfos)
except ImportError as exc:   # the optional extra is missing: say so when a game is built
    _IMPORT_ERROR: ImportError | None = exc
else:
    _IMPORT_ERROR = None


def _memoize_template_parsing() -> None:
    """Parse each grammar template once per process instead of once per use.

    After every step TextWorld's PDDL engine renders every admissible command and the feedback
    from grammar templates, and it parses the template text with tatsu each time -- most of a
    step's cost. The parse of a given text is always the same, so it is kept and handed out as
    a deep copy (the engine sets a context on the symbols it gets). Measured on a 33-receptacle
    kitchen: 58 -> 33 ms a step, byte-identical observations and commands. textworld is pinned
    (1.7.0); if its private function is not there, nothing is changed.
    """
    from textworld.envs.pddl import textgen
    original = getattr(textgen, "_parse_and_convert", None)
    if original is None or getattr(original, "mstar_memoized", False):
        return
    parsed: dict = {}

    def parse_once(text, rule_name=None, **kwargs):
        if kwargs.get("trace"):
            return original(text, rule_name=rule_name, **kwargs)
        key = (text, rule_name)
        if key not in parsed:
            parsed[key] = original(text, rule_name=rule_name)
        return copy.deepcopy(parsed[key])

    parse_once.mstar_memoized = True
    textgen._parse_and_convert = parse_once


if _IMPORT_ERROR is None:
    _memoize_template_parsing()
_GOAL_RE = re.compile(r"Your task is to:\s*(.+?)\s*$", re.M)


def goal_of(text: str) -> str:
    """The goal in an ALFWorld intro ("put some apple on fridge."), or ""."""
    m = _GOAL_RE.search(text or "")
    return m.group(1).strip() if m else ""


class AlfworldEnv:
    def __init__(self, game_file: str, expert: bool = False, max_episode_steps: int = 10_000):
        if _IMPORT_ERROR is not None:
            raise RuntimeError(f"{EXTRA_HINT} ({_IMPORT_ERROR})")
        extras = ["gamefile"] + (["expert_plan"] if expert else [])
        infos = textworld.EnvInfos(admissible_commands=True, won=True, extras=extras)
        wrappers = [AlfredDemangler(), AlfredInfos]
        if expert:
            wrappers.append(AlfredExpert(expert_type=AlfredExpertType.PLANNER))
        env_id = textworld.gym.register_games([str(game_file)], infos, max_episode_steps=max_episode_steps,
                                              wrappers=wrappers)
        self._env = textworld.gym.make(env_id)
        self._expert = expert
        self._goal = ""

    def _observation(self, text: str, info: dict) -> Observation:
        extra = {}
        if self._expert:
            extra["expert_plan"] = list(info.get("extra.expert_plan") or [])
        return Observation(text=str(text), task=self._goal, admissible=list(info.get("admissible_commands") or []),
                           extra=extra)

    def reset(self) -> Observation:
        text, info = self._env.reset()
        self._goal = goal_of(text)
        return self._observation(text, info)

    def step(self, command: str) -> StepResult:
        text, _score, done, info = self._env.step(command)
        return StepResult(self._observation(text, info), done=bool(done), won=bool(info.get("won")))

    def close(self) -> None:
        try:
            self._env.close()
        except Exception:   # closing a finished game must not turn a result into an error
            pass

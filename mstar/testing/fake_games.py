"""Tiny text games for tests and benchmarks of mstar.interactive (no game engine needed).

`CorridorGame`: the goal is to walk to the end of a corridor; "step forward" advances one room,
"wait" and "look" do nothing. Knobs make it misbehave on purpose, in the child process that runs
it: `corrupt` (no admissible command at reset), `hang_at` (sleep forever on that step),
`crash_at` (the process exits with code 3), `raise_at` (the engine raises). Build it through an
EnvSpec: EnvSpec("mstar.testing.fake_games:CorridorGame", {"length": 3, ...}).
"""
from __future__ import annotations

import os
import time

from mstar.interactive.env import Observation, StepResult

FACTORY = "mstar.testing.fake_games:CorridorGame"


class CorridorGame:
    def __init__(self, length: int = 3, corrupt: bool = False, hang_at: int | None = None,
                 crash_at: int | None = None, raise_at: int | None = None, hang_on_reset: bool = False):
        self.length, self.corrupt = length, corrupt
        self.hang_at, self.crash_at, self.raise_at, self.hang_on_reset = hang_at, crash_at, raise_at, hang_on_reset
        self.position = self.steps = 0

    def _obs(self, text: str) -> Observation:
        commands = [] if self.corrupt else ["look", "step forward", "wait"]
        return Observation(text=text, task="reach the end of the corridor.", admissible=commands)

    def reset(self) -> Observation:
        if self.hang_on_reset:
            time.sleep(3600)
        self.position = self.steps = 0
        return self._obs(f"You are in room 0 of a corridor of {self.length} rooms.\n"
                         "Your task is to: reach the end of the corridor.")

    def step(self, command: str) -> StepResult:
        self.steps += 1
        if self.steps == self.hang_at:
            time.sleep(3600)
        if self.steps == self.crash_at:
            os._exit(3)
        if self.steps == self.raise_at:
            raise RuntimeError("the engine broke")
        if command == "step forward":
            self.position += 1
            text = f"You walk into room {self.position}."
        else:
            text = "Nothing happens."
        won = self.position >= self.length
        return StepResult(self._obs(text), done=won, won=won)

    def close(self) -> None:
        pass

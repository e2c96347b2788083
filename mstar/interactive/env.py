"""The environment protocol of interactive tasks: reset -> observation, step -> observation + done + won.

An interactive query is not answered in one reply: the task agent acts in an environment for up to
a step budget and is scored on whether it reached the goal. This module fixes the shape of that
conversation and nothing else, so the step loop (episode.py), the game process (game_process.py)
and every concrete environment (e.g. mstar/tasks/alfworld/env.py) agree on it:

    env = build_env(spec)            # in the game's own process
    obs = env.reset()                # Observation(text, task, admissible, extra)
    res = env.step("go to fridge 1") # StepResult(observation, done, won)
    env.close()

`EnvSpec` names the environment by import path ("package.module:factory") plus JSON-able keyword
arguments, so a child process started with "spawn"/"forkserver" can build it without pickling
live objects. Records are plain dataclasses: they cross the process pipe and land in run records.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Observation:
    text: str                                  # what the agent is shown after reset / a step
    task: str                                  # the goal, e.g. "put some apple on fridge."
    admissible: list[str]                      # the commands the environment accepts now
    extra: dict = field(default_factory=dict)  # environment-specific data (e.g. an expert plan)


@dataclass(frozen=True)
class StepResult:
    observation: Observation
    done: bool      # the environment ended the game (won, lost, or its own step limit)
    won: bool


@runtime_checkable
class Environment(Protocol):
    """One game. Not thread-safe and possibly global-state-bound: run one per process."""

    def reset(self) -> Observation: ...

    def step(self, command: str) -> StepResult: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class EnvSpec:
    """How to build one game: `factory` is "module:callable", called as factory(**kwargs)."""
    factory: str
    kwargs: dict = field(default_factory=dict)

    @property
    def module(self) -> str:
        return self.factory.partition(":")[0]

    def to_dict(self) -> dict:
        return {"factory": self.factory, "kwargs": dict(self.kwargs)}


def build_env(spec: EnvSpec) -> Environment:
    """Import the factory named by `spec` and call it; ValueError when the name is malformed."""
    module_name, sep, attr = spec.factory.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"environment factory must be 'module:callable', got {spec.factory!r}")
    factory: Any = getattr(importlib.import_module(module_name), attr)
    env = factory(**spec.kwargs)
    if not isinstance(env, Environment):
        raise TypeError(f"{spec.factory} returned {type(env).__name__}, which lacks reset/step/close")
    return env

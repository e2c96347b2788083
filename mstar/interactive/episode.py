"""The step loop of an interactive task: one game played by the task agent, to a GameOutcome.

    play(env, memory_text, constants, choose, max_steps=50, history_lines=40)

1. `env.reset()`; a game that starts with no admissible command is *corrupt* (paper Appendix K:
   such games cannot be played whatever the memory) and ends here, flagged, unscored.
2. Each step: build the act prompt (mstar.interactive.prompt) from ALWAYS_ON_KNOWLEDGE + the memory
   text (read once for the game, before the first step), the goal, the last `history_lines`
   lines of history, the admissible commands and INSTRUCTION_RESPONSE; `choose(messages)` returns
   the agent's reply; the reply is mapped to an admissible command (a guess is recorded as a
   warning); `env.step(command)`.
3. Stop when the game is won, when the environment says it is over, or after `max_steps`.

`env` is anything with reset()/step() returning mstar.interactive.env records -- a GameProcess
in the engine, a plain environment in tests. Nothing raises out of `play`: a game error
(timeout, crash, engine exception) or a failing `choose` ends the game with `error` set.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from mstar.interactive.env import Observation, StepResult
from mstar.interactive.game_process import GameError
from mstar.interactive.prompt import build_act_messages, match_command, memory_text as join_memory

MAX_REPLY_IN_RECORD = 400
Choose = Callable[[list[dict]], str]


@dataclass
class GameOutcome:
    won: bool
    steps: int
    trajectory: list[dict] = field(default_factory=list)  # one dict per step (see _step_record)
    error: str | None = None
    corrupt: bool = False
    goal: str = ""
    intro: str = ""                                      # the observation after reset
    first_prompt: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def _step_record(n: int, reply: str, command: str, warning: str | None, result: StepResult) -> dict:
    return {"step": n, "reply": reply[:MAX_REPLY_IN_RECORD], "command": command, "warning": warning,
            "observation": result.observation.text, "won": result.won, "done": result.done}


def play(env, memory_text: str, constants: dict, choose: Choose, max_steps: int = 50,
         history_lines: int = 40) -> GameOutcome:
    """Play one game; see the module docstring. Never raises for game or agent failures."""
    t0 = time.perf_counter()
    memory = join_memory(str(constants.get("ALWAYS_ON_KNOWLEDGE") or ""), memory_text or "")
    instruction = str(constants.get("INSTRUCTION_RESPONSE") or "")
    outcome = GameOutcome(won=False, steps=0)
    try:
        obs: Observation = env.reset()
    except GameError as exc:
        outcome.error = f"reset failed: {exc}"
        return _done(outcome, t0)
    except Exception as exc:  # a local environment may raise anything
        outcome.error = f"reset failed: {type(exc).__name__}: {exc}"
        return _done(outcome, t0)
    outcome.goal, outcome.intro = obs.task, obs.text
    if not obs.admissible:
        outcome.corrupt = True
        outcome.error = "corrupt game: no admissible command after reset"
        return _done(outcome, t0)
    history = _lines(obs.text)
    admissible = list(obs.admissible)
    for n in range(1, max_steps + 1):
        messages = build_act_messages(memory, obs.task, history[-history_lines:] if history_lines > 0 else [],
                                      admissible, instruction)
        if n == 1:
            outcome.first_prompt = messages
        try:
            reply = choose(messages)
        except Exception as exc:
            outcome.error = f"task agent failed at step {n}: {type(exc).__name__}: {exc}"
            break
        command, warning = match_command(str(reply or ""), admissible)
        if warning:
            outcome.warnings.append(f"step {n}: {warning}")
        try:
            result: StepResult = env.step(command)
        except GameError as exc:
            outcome.error = f"step {n} failed: {exc}"
            break
        except Exception as exc:
            outcome.error = f"step {n} failed: {type(exc).__name__}: {exc}"
            break
        outcome.steps = n
        outcome.trajectory.append(_step_record(n, str(reply or ""), command, warning, result))
        history += [f"> {command}"] + _lines(result.observation.text)
        if result.won:
            outcome.won = True
            break
        if result.done:
            break
        admissible = list(result.observation.admissible)
        if not admissible:
            outcome.error = f"no admissible command after step {n}"
            break
    return _done(outcome, t0)


def _done(outcome: GameOutcome, t0: float) -> GameOutcome:
    outcome.seconds = time.perf_counter() - t0
    return outcome

"""Interactive tasks: the task agent acts in an environment instead of answering once.

Map (the life of one interactive query; nothing here knows a particular game):
  0. env.py            the protocol -- EnvSpec (how to build a game, by import path), Observation,
                       StepResult, Environment (reset/step/close)
  1. game_process.py   the game in its own child process (forkserver), a wall-clock limit per
                       game, killed on timeout; crash/hang/engine error -> GameError
  2. prompt.py         the per-step <task>act</task> prompt; reply -> admissible command
  3. episode.py        the step loop: reset -> (prompt, choose, step)* -> GameOutcome(won, steps,
                       trajectory, error, corrupt); a game with no admissible command is corrupt
  4. evaluate_case.py  the evaluator's seam: play_case(item, memory_text, constants, choose) ->
                       CaseOutcome(score, answer "won"/"lost", conversation, ...), and
                       summarize() (success without corrupt games, per category) and
                       success_table() (the paper's Table 10 shape)
Concrete games live with their task (mstar/tasks/alfworld/env.py); the offline agent's policy for
the act prompt is mstar/offline/act_policy.py.
"""
from mstar.interactive.env import EnvSpec, Environment, Observation, StepResult, build_env
from mstar.interactive.episode import GameOutcome, play
from mstar.interactive.evaluate_case import CaseOutcome, play_case, success_table, summarize
from mstar.interactive.game_process import GameError, GameProcess
from mstar.interactive.prompt import build_act_messages, match_command

__all__ = ["EnvSpec", "Environment", "Observation", "StepResult", "build_env", "GameOutcome", "play",
           "CaseOutcome", "play_case", "success_table", "summarize", "GameError", "GameProcess",
           "build_act_messages", "match_command"]

"""One interactive query of an evaluation: after the memory was read, the game is the answer.

The evaluator (run._case) formulates the Query and calls read() once, as for any query; for an
item with meta["interactive"] it then hands the case here instead of asking for an answer:
  1. the game is played in its own process (mstar.interactive.evaluate_case.play_case) with the
     program's constants, the task agent choosing one admissible command per step through the
     same `ask("task", messages)` the answer step would use;
  2. the outcome fills the case: answer "won"/"lost", score 1.0/0.0, the game's conversation
     after the query turns, steps in score_details, and the act requests in waits["act"].
Failures keep the evaluator's meanings: an act call that failed after its retries ends the game
and leaves the case unscored (llm_error), as a failed answer call would; an error no retry can
fix propagates; a game that crashed or hung is this case's error (score 0, the run goes on); a
corrupt game (no admissible command at reset) is flagged and counted apart, not scored.
"""
from __future__ import annotations

from typing import Callable

from mstar.evaluation.records import CaseResult
from mstar.interactive.evaluate_case import play_case
from mstar.llm.types import FatalLLMError
from mstar.tasks import QueryItem

DEFAULT_MAX_STEPS = 50     # the paper's ALFWorld step budget
# An item may set its own limits in meta: "max_steps", "game_timeout_s" (engine time of the whole
# game) and "step_timeout_s" (one reset/step); otherwise play_case's defaults hold.
LIMIT_KEYS = {"max_steps": "max_steps", "game_timeout_s": "timeout_s", "step_timeout_s": "call_timeout_s"}
MAX_GAME_WARNINGS = 10     # replies mapped to a command by guess: the first few tell the story

Ask = Callable[[str, list[dict]], "tuple[str, str | None, int]"]   # (reply, error, waited)


def play_query(case: CaseResult, q: QueryItem, constants: dict, ask: Ask) -> CaseResult:
    """Play `q`'s game with `case.retrieved` as the memory; fills and returns `case`."""
    failures: list[str] = []
    fatal: list[FatalLLMError] = []

    def choose(messages: list[dict]) -> str:
        try:
            text, err, waited = ask("task", messages)
        except FatalLLMError as exc:  # the step loop would swallow it as this game's error
            fatal.append(exc)
            raise
        case.waits["act"] = case.waits.get("act", 0) + waited
        if err is not None:
            failures.append(err)
            raise RuntimeError(err)
        return text

    limits = {arg: q.meta[key] for key, arg in LIMIT_KEYS.items() if q.meta.get(key) is not None}
    limits.setdefault("max_steps", DEFAULT_MAX_STEPS)
    out = play_case(q, case.retrieved, constants, choose, **limits)
    if fatal:
        raise fatal[0]
    case.conversation += out.conversation
    case.answer, case.score, case.corrupt = out.answer, out.score, out.corrupt
    case.score_details = {"steps": out.steps, "seconds": round(out.seconds, 3)}
    case.warnings += out.warnings[:MAX_GAME_WARNINGS]
    if failures:
        case.llm_error = f"task agent failed while acting: {failures[-1]}"
    elif out.error:
        case.error = out.error
    return case

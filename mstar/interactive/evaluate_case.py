"""The seam between the evaluator and interactive tasks: one query item played as one game.

The evaluator handles an interactive item (item.meta["interactive"] is true) like this:
  1. formulate a Query from item.question (the goal text) and call read() ONCE -> memory_text;
  2. `play_case(item, memory_text, constants, choose)` where `constants` are the program's four
     instruction constants and `choose(messages) -> str` is the task agent (router role "task");
  3. record CaseOutcome.answer ("won"/"lost") as the prediction, CaseOutcome.score as the score
     (the task metric "success" gives the same value from the answer), CaseOutcome.conversation
     as the case's conversation, and keep CaseOutcome.corrupt cases OUT of the mean: they are
     counted, not scored (`summarize` does this for a list of cases).

The game is built in its own process from item.meta["env"] = {"factory": "module:callable",
"kwargs": {...}} (see mstar.interactive.env.EnvSpec) and killed at its wall-clock limit. A crash,
hang or engine error is an error on this case (score 0, `error` set), never an exception.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

from mstar.interactive.env import EnvSpec
from mstar.interactive.episode import GameOutcome, play
from mstar.interactive.game_process import DEFAULT_CALL_TIMEOUT_S, DEFAULT_TIMEOUT_S, GameProcess

MAX_CONVERSATION_CHARS = 16_000


@dataclass
class CaseOutcome:
    score: float
    answer: str                   # "won" or "lost"
    conversation: list[dict]      # first prompt in full, then observation/reply pairs (trimmed)
    steps: int
    error: str | None = None
    corrupt: bool = False
    warnings: list[str] = field(default_factory=list)
    trajectory: list[dict] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def env_spec(item) -> EnvSpec:
    """The EnvSpec stored on an interactive item; ValueError when it is missing or malformed."""
    raw = (item.meta or {}).get("env")
    if not isinstance(raw, dict) or not isinstance(raw.get("factory"), str):
        raise ValueError(f"query {item.id!r} is not playable: meta['env'] must be "
                         "{'factory': 'module:callable', 'kwargs': {...}}")
    return EnvSpec(raw["factory"], dict(raw.get("kwargs") or {}))


def play_case(item, memory_text: str, constants: dict, choose: Callable[[list[dict]], str], *,
              max_steps: int = 50, timeout_s: float = DEFAULT_TIMEOUT_S,
              call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S, history_lines: int = 40) -> CaseOutcome:
    """Play `item`'s game in its own process with the given memory; see the module docstring."""
    try:
        spec = env_spec(item)
        with GameProcess(spec, timeout_s=timeout_s, call_timeout_s=call_timeout_s) as game:
            outcome = play(game, memory_text, constants, choose, max_steps=max_steps,
                           history_lines=history_lines)
    except Exception as exc:  # cannot start a process, bad spec: an error for this case only
        return CaseOutcome(0.0, "lost", [], 0, error=f"game not started: {type(exc).__name__}: {exc}")
    return outcome_to_case(outcome, max_steps)


def outcome_to_case(outcome: GameOutcome, max_steps: int = 50) -> CaseOutcome:
    return CaseOutcome(
        score=1.0 if outcome.won else 0.0, answer="won" if outcome.won else "lost",
        conversation=conversation(outcome, max_steps), steps=outcome.steps, error=outcome.error,
        corrupt=outcome.corrupt, warnings=list(outcome.warnings), trajectory=outcome.trajectory,
        seconds=outcome.seconds)


def _result_line(outcome: GameOutcome, max_steps: int) -> str:
    if outcome.corrupt:
        return "Game not played: it started with no admissible command (corrupt; not scored)."
    if outcome.won:
        return f"Game won after {outcome.steps} steps."
    if outcome.error:
        return f"Game ended with an error after {outcome.steps} steps: {outcome.error}"
    if outcome.steps >= max_steps:
        return f"Game lost: the step budget of {max_steps} was used up."
    return f"Game lost after {outcome.steps} steps."


def _observation_turn(text: str) -> dict:
    return {"role": "user", "content": f"<observation>\n{text}\n</observation>"}


def conversation(outcome: GameOutcome, max_steps: int = 50,
                 limit: int = MAX_CONVERSATION_CHARS) -> list[dict]:
    """The case's conversation for the reflector and the report: the first act prompt in full,
    each reply with the observation it led to, and the result; middle steps are dropped (with a
    marker) when the whole would exceed `limit` characters."""
    head = list(outcome.first_prompt)
    pairs: list[list[dict]] = []
    previous = None   # the observation the step before led to: the user turn of this step
    for rec in outcome.trajectory:
        pair = [] if previous is None else [_observation_turn(previous)]
        note = f"\n[taken as: {rec['command']}]" if rec.get("warning") else ""
        pair.append({"role": "assistant", "content": rec["reply"] + note})
        pairs.append(pair)
        previous = rec["observation"]
    last = []
    if outcome.trajectory:
        last.append(_observation_turn(outcome.trajectory[-1]["observation"]))
    last.append({"role": "user", "content": _result_line(outcome, max_steps)})
    size = lambda msgs: sum(len(m["content"]) for m in msgs)  # noqa: E731
    budget = limit - size(head) - size(last)
    dropped = 0
    while pairs and sum(size(p) for p in pairs) > budget and len(pairs) > 2:
        pairs.pop(len(pairs) // 2)
        dropped += 1
    middle = [m for p in pairs for m in p]
    if dropped:
        cut = len(pairs) // 2
        marker = {"role": "user", "content": f"[{dropped} steps omitted]"}
        middle = [m for p in pairs[:cut] for m in p] + [marker] + [m for p in pairs[cut:] for m in p]
    return head + middle + last


def summarize(outcomes: Sequence[CaseOutcome], categories: Sequence[str | None]) -> dict:
    """Success rate over the playable games, per category, with corrupt games counted apart:
    {"success", "n", "corrupt", "errors", "per_category": {cat: rate}, "per_category_n": {cat: n}}."""
    if len(outcomes) != len(categories):
        raise ValueError(f"summarize: {len(outcomes)} outcomes but {len(categories)} categories")
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    scored = [(o, "none" if c is None else str(c)) for o, c in zip(outcomes, categories) if not o.corrupt]
    for o, cat in scored:
        sums[cat] = sums.get(cat, 0.0) + o.score
        counts[cat] = counts.get(cat, 0) + 1
    return {
        "success": sum(o.score for o, _ in scored) / len(scored) if scored else 0.0,
        "n": len(scored),
        "corrupt": sum(1 for o in outcomes if o.corrupt),
        "errors": sum(1 for o in outcomes if o.error and not o.corrupt),
        "per_category": {c: sums[c] / counts[c] for c in sorted(sums)},
        "per_category_n": {c: counts[c] for c in sorted(counts)},
    }


def success_table(summaries: dict[str, dict], labels: dict[str, str] | None = None) -> str:
    """A markdown table of success by category (the paper's Table 10 shape): one row per name in
    `summaries` (each a `summarize` result), one column per category with its n, then overall
    and the corrupt games left out. `labels` shortens category names for the header."""
    labels = labels or {}
    cats = sorted({c for s in summaries.values() for c in s["per_category"]})
    first = next(iter(summaries.values()), {"per_category_n": {}})
    head = [f"{labels.get(c, c)} (n={first['per_category_n'].get(c, 0)})" for c in cats]
    lines = ["| program | " + " | ".join(head) + " | overall | corrupt |",
             "|---|" + "---:|" * (len(cats) + 2)]
    for name, s in summaries.items():
        cells = [f"{s['per_category'][c]:.2f}" if c in s["per_category"] else "-" for c in cats]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {s['success']:.2f} (n={s['n']}) | {s['corrupt']} |")
    return "\n".join(lines)

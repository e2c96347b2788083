"""The task agent's per-step prompt in an interactive task, and how its reply becomes a command.

One user message, XML-like tags on their own lines (the style of mstar/agent.py, so an LLM and the
offline task model read the same thing):

    <task>act</task>
    <retrieved_memory>   ALWAYS_ON_KNOWLEDGE + what read() returned for this game (read once)
    <task_goal>          the game's goal text
    <history>            the last `history_lines` lines of observations and "> command" lines
    <admissible_commands> one command per line
    <instruction>        INSTRUCTION_RESPONSE
    closing line: reply with exactly one admissible command

A reply is mapped to an admissible command leniently: exact; then ignoring case, spacing, quotes,
a leading "> " / "Action:" and a trailing period; then a command written inside a longer reply
(the longest one wins); then the closest command by string similarity. The last two are guesses
and come back with a warning, so the reflector can see the agent and the game disagreeing.
"""
from __future__ import annotations

import difflib
import re

CLOSING = ("Reply with exactly one command from <admissible_commands>, copied as written, "
           "and nothing else.")
_PREFIX_RE = re.compile(r"^\s*(?:>+|\*+|-|(?:next\s+)?(?:action|command|act)\s*[:：])\s*", re.I)
_FENCE_RE = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?```$", re.S)


def _block(tag: str, body: str) -> str:
    return f"<{tag}>\n{body.strip()}\n</{tag}>"


def memory_text(always_on: str, retrieved: str) -> str:
    """ALWAYS_ON_KNOWLEDGE in front of what read() returned (the answer prompt's rule)."""
    return f"{always_on}\n{retrieved}" if always_on.strip() else retrieved


def build_act_messages(memory: str, goal: str, history: list[str], admissible: list[str],
                       instruction: str) -> list[dict]:
    """The prompt for one step; `memory` already holds ALWAYS_ON_KNOWLEDGE (see memory_text)."""
    content = "\n".join([
        "<task>act</task>",
        "You are an agent acting in a text environment. Below are what your memory returned for "
        "this goal, the goal, what happened so far, and the commands you can issue now.",
        _block("retrieved_memory", memory),
        _block("task_goal", goal),
        _block("history", "\n".join(history)),
        _block("admissible_commands", "\n".join(admissible)),
        _block("instruction", instruction),
        CLOSING,
    ])
    return [{"role": "user", "content": content}]


def _norm(text: str) -> str:
    text = text.strip().strip("`\"'").strip()
    text = _PREFIX_RE.sub("", text)
    text = text.strip().strip("`\"'").rstrip(".!").strip()
    return " ".join(text.lower().split())


def match_command(reply: str, admissible: list[str]) -> tuple[str, str | None]:
    """(admissible command, warning or None) for a reply; `admissible` must not be empty."""
    if not admissible:
        raise ValueError("match_command needs at least one admissible command")
    raw = (reply or "").strip()
    fenced = _FENCE_RE.match(raw)
    if fenced:
        raw = fenced.group(1).strip()
    if raw in admissible:
        return raw, None
    by_norm: dict[str, str] = {}
    for command in admissible:
        by_norm.setdefault(_norm(command), command)
    lines = [line for line in raw.splitlines() if line.strip()]
    if not lines:
        fallback = "look" if "look" in admissible else admissible[0]
        return fallback, f"empty reply; took {fallback!r}"
    first = _norm(lines[0])
    if first in by_norm:
        return by_norm[first], None
    for n, line in enumerate(lines[1:], 2):
        if _norm(line) in by_norm:
            return by_norm[_norm(line)], f"took the command on line {n} of a {len(lines)}-line reply"
    whole = " ".join(_norm(line) for line in lines)
    inside = [c for key, c in by_norm.items() if re.search(rf"(?<![\w]){re.escape(key)}(?![\w])", whole)]
    if inside:
        best = max(inside, key=lambda c: (len(c), -admissible.index(c)))
        return best, f"reply {_short(raw)} is not a command; took {best!r} written inside it"
    ratio = {c: difflib.SequenceMatcher(None, first, key).ratio() for key, c in by_norm.items()}
    best = max(admissible, key=lambda c: (ratio.get(c, 0.0), -admissible.index(c)))
    return best, f"reply {_short(raw)} is not an admissible command; took the closest, {best!r}"


def _short(text: str, limit: int = 80) -> str:
    one = " ".join(text.split())
    return repr(one if len(one) <= limit else one[: limit - 1] + "…")

"""What a query needs from memory -- its evidence, as text -- in the query's meta.

Tasks that know where a question's answer is said put it in two meta keys, read by the memory
X-ray (mstar.evaluation.attribution, mstar.evaluation.xray):

    meta["evidence_text"]     [{"id": "D1:3", "text": "Caroline: I went to ...",
                                "episode": "conv-26/session_1"}, ...]
                              one unit per turn / fact / plan step; "episode" names the episode
                              that says it (None: any episode may)
    meta["evidence_problem"]  why the task's evidence could not be turned into text (an id that
                              names no turn, an empty list): the case is "unattributed", never guessed

Who fills them:
    locomo   each dialogue id ("D1:3") -> that turn of that session, as the episode renders it
    sample   the generator's fact lines (+ the session's date line for a temporal question)
    jsonl / json   a query's own "evidence": a text, a list of texts, or a list of
             {"text": ..., "episode": ...} objects (`parse_evidence`)
    alfworld the expert plan's steps that say where the object is and which appliance it needs
             (`plan_evidence`)
Resolution happens at load time, over every episode of the task: an evidence episode that a run
does not write is then correctly "never stored", not unknown.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any

TEXT_KEY = "evidence_text"
PROBLEM_KEY = "evidence_problem"


def unit(uid: str, text: str, episode: str | None = None) -> dict:
    return {"id": uid, "text": text, "episode": episode}


def with_evidence(meta: dict, units: list[dict], problems: list[str]) -> dict:
    """`meta` with the evidence keys set: the units, or the problem when there is one."""
    out = dict(meta)
    if problems or not units:
        out[PROBLEM_KEY] = "; ".join(problems) or "the task gives no evidence for this question"
    out[TEXT_KEY] = units
    return out


def parse_evidence(value: Any, where: str) -> tuple[list[dict], list[str]]:
    """A JSONL / JSON task query's "evidence" value -> (units, problems). Raises ValueError (with
    `where`) for a value of the wrong shape; an empty text is a problem of that case, not of the file."""
    items = value if isinstance(value, list) else [value]
    units, problems = [], []
    for i, item in enumerate(items, 1):
        episode = None
        if isinstance(item, dict):
            unknown = sorted(set(item) - {"text", "episode", "id"})
            if unknown:
                raise ValueError(f"{where}: evidence[{i - 1}] has unknown key(s) {', '.join(unknown)}; "
                                 "known: text, episode, id")
            episode, text = item.get("episode"), item.get("text")
            if episode is not None and not isinstance(episode, str):
                raise ValueError(f"{where}: evidence[{i - 1}].episode must be an episode id string")
        else:
            text = item
        if not isinstance(text, str):
            raise ValueError(f"{where}: evidence must be a text, a list of texts or of "
                             f"{{\"text\", \"episode\"}} objects, got {type(text).__name__}")
        if not text.strip():
            problems.append(f"evidence {i} is empty")
            continue
        uid = item.get("id") if isinstance(item, dict) and isinstance(item.get("id"), str) else f"e{i}"
        units.append(unit(uid, " ".join(text.split()), episode))
    return units, problems


def check_episodes(queries: list, known: set[str]) -> list:
    """The queries, with an evidence unit naming an episode the task does not have turned into
    that query's problem (a typo in a user's file is then visible, not a silent "never stored")."""
    out = []
    for q in queries:
        missing = sorted({u["episode"] for u in q.meta.get(TEXT_KEY) or [] if u.get("episode") not in (None, *known)})
        if missing:
            problem = "; ".join(filter(None, [q.meta.get(PROBLEM_KEY), f"evidence names no episode {', '.join(missing)}"]))
            q = dataclasses.replace(q, meta={**q.meta, PROBLEM_KEY: problem})
        out.append(q)
    return out


# ALFWorld commands that say where the object was found and which appliance the task needs.
_TAKE_RE = re.compile(r"^take (.+?) \d+ from (.+?) \d+$")
_APPLIANCE_RE = re.compile(r"^(heat|cool|clean|slice) (.+?) \d+ with (.+?) \d+$")
_USE_RE = re.compile(r"^use (.+?) \d+$")


def plan_evidence(plan: list[str]) -> tuple[list[dict], list[str]]:
    """The steps of an ALFWorld expert plan a memory could help with, without instance numbers
    (a memory of another game says "apple ... countertop", not "countertop 2"):
    "take apple 1 from countertop 2" -> "take apple from countertop", "heat apple 1 with
    microwave 1" -> "heat apple with microwave", "use desklamp 1" -> "use desklamp"."""
    units = []
    for step in plan:
        step = " ".join(step.lower().split())
        if m := _TAKE_RE.match(step):
            text = f"take {m.group(1)} from {m.group(2)}"
        elif m := _APPLIANCE_RE.match(step):
            text = f"{m.group(1)} {m.group(2)} with {m.group(3)}"
        elif m := _USE_RE.match(step):
            text = f"use {m.group(1)}"
        else:
            continue
        if all(u["text"] != text for u in units):
            units.append(unit(f"plan{len(units) + 1}", text))
    return units, ([] if units else ["the expert plan names no object to take or appliance to use"])

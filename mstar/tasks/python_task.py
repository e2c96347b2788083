"""Tasks defined in Python: helpers that build the records, and the check a task passes before a
run spends anything.

A task is `mstar.Task(name, episodes, validation, test, scorer=...)` (mstar/tasks/model.py), the
same record every shipped loader returns, so a user's task goes through the same subset
selection, splits, X-ray and reflector view as LoCoMo. The helpers here fill in what the engine
reads from a query's meta:

    query(id, question, answer, category=..., evidence=[texts], evidence_episodes=[episode ids])
        evidence (what the answer rests on) feeds the memory X-ray: texts are matched as they
        are; an episode id stands for that whole episode's text (coarser, but free to give).
        A single text or id may be given alone: evidence_episodes="ada-1" is ["ada-1"]
    game(id, goal, factory="pkg.module:make_env", kwargs={...})
        an interactive query: the agent plays the environment the factory builds (reset / step /
        close, mstar/interactive/env.py) in its own process, scored 1 when it wins

`prepare_task(task)` is what `mstar.evolve` runs first: every record has the right type, ids are
unique and non-empty, no split is empty, evidence names known episodes, and the task's own
scorer is tried on a few queries with their gold answers (and an empty answer): a scorer that
raises, returns NaN or a value outside [0, 1] is refused there, naming the task, the query and
the problem, before any LLM call. It returns the task with evidence ids resolved into text.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from mstar.tasks import evidence as ev
from mstar.tasks.model import Episode, QueryItem, ScorerError, Task, TaskError, own_score

EPISODE_IDS_KEY = "evidence_episodes"
PROBE_QUERIES = 5   # per split: scorers may be costly (a call into the user's own evaluator)


def query(id: str, question: str, answer: str = "", *, category: str | None = None,
          evidence: str | Iterable[str] = (), evidence_episodes: str | Iterable[str] = (), rubric: list | None = None,
          meta: dict | None = None) -> QueryItem:
    """One validation or test query. `rubric` ([{"criterion", "points"}]) is for the "rubric" metric."""
    out = dict(meta or {})
    if rubric is not None:
        out["rubric"] = rubric
    texts = _listed(evidence, "evidence", id, (str, dict))
    ids = _listed(evidence_episodes, "evidence_episodes", id, (str,))
    if texts:
        units, problems = ev.parse_evidence(texts, f"query {id!r}")
        out = ev.with_evidence(out, units, problems)
    if ids:
        out[EPISODE_IDS_KEY] = ids
    return QueryItem(id, question, str(answer), None if category is None else str(category), out)


def _listed(value: Any, field: str, query_id: str, single: tuple[type, ...]) -> list:
    """`value` as a list: one text (or evidence object) alone is one item -- list("ada-1") would be
    its characters, each then "no episode" -- and any other iterable is read once."""
    if isinstance(value, single):
        return [value]
    try:
        items = iter(value)
    except TypeError:
        raise TaskError(f"query {query_id!r}: {field} must be a text or a list of them, "
                        f"got {type(value).__name__}") from None
    return list(items)   # outside the try: an error inside the user's generator stays its own


def game(id: str, goal: str, *, factory: str, kwargs: dict | None = None, category: str | None = None,
         plan: str = "") -> QueryItem:
    """One interactive query: `factory` is "module:callable" returning an environment with
    reset() -> Observation, step(command) -> StepResult, close() (mstar.interactive.env); it is
    imported in the game's own process, so it must be importable (not a notebook's local function).
    Score with the "success" metric (the task's default when every query is a game)."""
    if ":" not in factory:
        raise TaskError(f"game {id!r}: factory must be 'module:callable', got {factory!r}")
    meta = {"interactive": True, "env": {"factory": factory, "kwargs": dict(kwargs or {})}}
    return QueryItem(id, goal, plan, category, meta)


def prepare_task(task: Any) -> Task:
    """The task, checked (TaskError naming the task, the item and the problem) and with its
    evidence episode ids turned into the X-ray's evidence text."""
    if not isinstance(task, Task):
        raise TaskError(f"expected an mstar.Task, a task name or a task file, got {type(task).__name__}")
    name = task.name
    if not isinstance(name, str) or not name.strip():
        raise TaskError(f"a task needs a non-empty name, got {name!r}")
    _check_episodes(task)
    known = {e.id for e in task.episodes}
    seen: dict[str, str] = {}
    for split in ("validation", "test"):
        queries = getattr(task, split)
        if not queries:
            raise TaskError(f"task {name!r}: the {split} split is empty; give at least one query "
                            f"(mstar.query(...)) -- the run {'evolves on' if split == 'validation' else 'is tested on'} it")
        for i, q in enumerate(queries):
            _check_query(task, split, i, q, seen, known)
    if task.interactive and task.metric_name != "success" and task.scorer is None:
        raise TaskError(f"task {name!r}: its queries are games; score them with scorer='success'")
    _probe_scorer(task)
    return _resolve_episode_evidence(task)


def _check_episodes(task: Task) -> None:
    if not task.episodes:
        raise TaskError(f"task {task.name!r}: no episodes; give at least one mstar.Episode(id, text) to memorise")
    seen: set[str] = set()
    for i, e in enumerate(task.episodes):
        where = f"task {task.name!r}: episodes[{i}]"
        if not isinstance(e, Episode):
            raise TaskError(f"{where}: expected mstar.Episode(id, text), got {type(e).__name__}")
        if not isinstance(e.id, str) or not e.id.strip():
            raise TaskError(f"{where}: the id must be a non-empty string, got {e.id!r}")
        if e.id in seen:
            raise TaskError(f"{where}: duplicate episode id {e.id!r}")
        seen.add(e.id)
        if not isinstance(e.text, str) or not e.text.strip():
            raise TaskError(f"{where} ({e.id!r}): the text must be a non-empty string")


def _check_query(task: Task, split: str, i: int, q: Any, seen: dict[str, str], known: set[str]) -> None:
    where = f"task {task.name!r}: {split}[{i}]"
    if not isinstance(q, QueryItem):
        raise TaskError(f"{where}: expected a query (mstar.query(...) or mstar.QueryItem), got {type(q).__name__}")
    if not isinstance(q.id, str) or not q.id.strip():
        raise TaskError(f"{where}: the id must be a non-empty string, got {q.id!r}")
    if q.id in seen:
        raise TaskError(f"{where}: duplicate query id {q.id!r} (first in {seen[q.id]})")
    seen[q.id] = split
    where = f"{where} ({q.id!r})"
    if not isinstance(q.question, str) or not q.question.strip():
        raise TaskError(f"{where}: the question must be a non-empty string")
    if not isinstance(q.answer, str):
        raise TaskError(f"{where}: the answer must be a string, got {type(q.answer).__name__}")
    if q.category is not None and not isinstance(q.category, str):
        raise TaskError(f"{where}: the category must be a string or None, got {type(q.category).__name__}")
    if not isinstance(q.meta, dict):
        raise TaskError(f"{where}: meta must be a dict, got {type(q.meta).__name__}")
    ids = q.meta.get(EPISODE_IDS_KEY) or []
    if not isinstance(ids, list) or not all(isinstance(x, str) for x in ids):
        raise TaskError(f"{where}: evidence_episodes must be a list of episode ids")
    unknown = [x for x in ids if x not in known]
    if unknown:
        raise TaskError(f"{where}: evidence names no episode {', '.join(map(repr, unknown))}")


def _probe_scorer(task: Task) -> None:
    """The task's own scorer on the first queries of each split, with the gold answer and with
    an empty one: what it must survive during the run, tried before anything is spent."""
    if task.scorer is None:
        return
    for q in [*task.validation[:PROBE_QUERIES], *task.test[:PROBE_QUERIES]]:
        for answer in (q.answer, ""):
            try:
                own_score(task.scorer, answer, q, task.name)
            except ScorerError as exc:
                raise TaskError(f"{exc} (tried with {'the gold answer' if answer else 'an empty answer'}, "
                                "before the run spent anything)") from None


def _resolve_episode_evidence(task: Task) -> Task:
    texts = {e.id: e.text for e in task.episodes}

    def resolve(q: QueryItem) -> QueryItem:
        ids = q.meta.get(EPISODE_IDS_KEY)
        if not ids:
            return q
        units = list(q.meta.get(ev.TEXT_KEY) or [])
        have = {u.get("id") for u in units}   # a task saved with its run was resolved already
        units += [ev.unit(f"episode:{x}", " ".join(texts[x].split()), x) for x in ids if f"episode:{x}" not in have]
        return dataclasses.replace(q, meta=ev.with_evidence(q.meta, units, []))

    return dataclasses.replace(task, validation=tuple(map(resolve, task.validation)),
                               test=tuple(map(resolve, task.test)))

"""The task records: episodes an agent may memorise, queries it is scored on, and the metric.

A task is `(episodes, validation queries, test queries, metric)` (DESIGN.md §2). Records are
frozen dataclasses that serialise with `dataclasses.asdict` / `Task.to_dict()`.

Scoring goes through `Task.score(prediction, item, judge)`, which returns a `Score` (value,
warnings, details). Pure metrics (mstar/tasks/metrics.py) ignore the judge; judged metrics
(mstar/tasks/judging.py: "rubric", "llm_judge") call it once per criterion / question; a task
defined in Python may bring its own scorer, `scorer(answer, query) -> float in [0, 1]`
(checked in mstar/tasks/checks.py before a run spends anything, guarded here during one).
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Callable

from mstar.tasks.judging import JUDGED_METRICS, JudgeFn, Score
from mstar.tasks.metrics import METRICS, parse_number


class TaskError(ValueError):
    """A task cannot be loaded; the message names the file (and line) and what is wrong with it."""


class ScorerError(RuntimeError):
    """A task's own scorer raised or returned something that is not a score in [0, 1]. During a
    run the case is then an error -- left out of the mean and counted -- never a score of 0."""


Scorer = Callable[["str", "QueryItem"], float]


def case_scored(case) -> bool:
    """Does a case count in the mean? Not when an LLM call of it failed, its game was corrupt,
    or the task's scorer failed on it. `case`: an evaluation's CaseResult or its dict (a cases
    file). The one rule for means, paired comparisons and no-change checks."""
    get = case.get if isinstance(case, dict) else (lambda k: getattr(case, k, None))
    return get("llm_error") is None and not get("corrupt") and get("score_error") is None


def metric_names() -> list[str]:
    return sorted(set(METRICS) | set(JUDGED_METRICS))


@dataclass(frozen=True)
class Episode:
    id: str
    text: str
    meta: dict = field(default_factory=dict)


@dataclass(frozen=True)
class QueryItem:
    id: str
    question: str
    answer: str                      # gold answer; rubric tasks render their rubric here, for readers
    category: str | None = None
    meta: dict = field(default_factory=dict)   # rubric tasks: meta["rubric"], meta["messages"]


@dataclass(frozen=True)
class Task:
    name: str
    episodes: tuple[Episode, ...]
    validation: tuple[QueryItem, ...]
    test: tuple[QueryItem, ...]
    metric_name: str = "token_f1"
    description: str = ""
    # The task's own default for the training budget (episodes = ratio × static items):
    # None -> the engine's default (5, paper Table 7); 0 -> every episode (LoCoMo: the paper
    # wrote all 272 sessions). A ratio given on the command line wins over both.
    train_ratio: int | None = None
    # The task's own scorer (a Python task): `scorer(answer, query) -> float in [0, 1]`, used
    # instead of the metric; `metric_name` then only names it (default: the function's name).
    scorer: Scorer | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("episodes", "validation", "test"):
            object.__setattr__(self, name, _records(self.name, name, getattr(self, name)))
        if isinstance(self.scorer, str):   # scorer="exact_match": a built-in metric by name
            object.__setattr__(self, "metric_name", self.scorer)
            object.__setattr__(self, "scorer", None)
        if self.train_ratio is not None and (not isinstance(self.train_ratio, int) or self.train_ratio < 0):
            raise TaskError(f"task {self.name!r}: train_ratio must be a non-negative integer or None, "
                            f"got {self.train_ratio!r}")
        if self.scorer is not None:
            if not callable(self.scorer):
                raise TaskError(f"task {self.name!r}: scorer must be a function (answer, query) -> float "
                                f"or a metric name, got {type(self.scorer).__name__}")
            if self.metric_name == "token_f1":   # the default: name the metric after the scorer
                object.__setattr__(self, "metric_name", getattr(self.scorer, "__name__", "scorer"))
            return   # the metric's own checks of gold answers do not apply to the task's scorer
        if self.metric_name not in METRICS and self.metric_name not in JUDGED_METRICS:
            raise TaskError(f"task {self.name!r}: unknown metric {self.metric_name!r}; "
                            f"known metrics: {', '.join(metric_names())}")
        for q in self.validation + self.test:
            problem = gold_problem(self.metric_name, q)
            if problem:
                raise TaskError(f"task {self.name!r}: query {q.id!r}: {problem}")

    @property
    def needs_judge(self) -> bool:
        return self.scorer is None and self.metric_name in JUDGED_METRICS

    @property
    def interactive(self) -> bool:
        """Queries are games to play (meta["interactive"]; see mstar.interactive.evaluate_case),
        not questions to answer."""
        return any(q.meta.get("interactive") for q in self.validation + self.test)

    def score(self, prediction: str, item: QueryItem, judge: JudgeFn | None = None) -> Score:
        """Score one prediction against the item's gold answer / rubric, value in [0, 1]."""
        if self.scorer is not None:
            return Score(own_score(self.scorer, prediction, item, self.name))
        if self.metric_name in METRICS:
            return Score(float(METRICS[self.metric_name](prediction, item.answer)))
        if judge is None:
            raise ValueError(f"metric {self.metric_name!r} calls the judge role; pass judge=")
        return JUDGED_METRICS[self.metric_name](prediction, item, judge)

    def metric(self, prediction: str, item: QueryItem, judge: JudgeFn | None = None) -> float:
        """The score value alone (see `score`)."""
        return self.score(prediction, item, judge).value

    def to_dict(self) -> dict:
        """The task's data as JSON-able records (the JSON task format); a scorer is not data: its
        metric's name is kept under "metric"."""
        d = {f: getattr(self, f) for f in ("name", "description", "train_ratio")}
        d["episodes"] = [asdict(e) for e in self.episodes]
        d["validation"] = [asdict(q) for q in self.validation]
        d["test"] = [asdict(q) for q in self.test]
        d["metric"] = self.metric_name
        return d


def own_score(scorer: Scorer, prediction: str, item: QueryItem, task_name: str) -> float:
    """A task's own scorer, called on one case: its value, or ScorerError naming the task, the
    query and what went wrong (raised, not a number, NaN, outside [0, 1])."""
    where = f"task {task_name!r}: scorer on query {item.id!r}"
    try:
        value = scorer(prediction, item)
    except Exception as exc:   # the user's code: any error is this case's, reported with its type
        raise ScorerError(f"{where} raised {type(exc).__name__}: {exc}") from exc
    if _is_bool(value):
        raise ScorerError(f"{where} returned {type(value).__name__} {value!r}; give a float in [0, 1] "
                          "(a bool is refused: wrap a pass/fail check in float(...))")
    if not isinstance(value, numbers.Real):   # numpy's float32 / int64 are Real; a str or None is not
        raise ScorerError(f"{where} returned {type(value).__name__} {value!r:.40}; give a float in [0, 1]")
    try:
        number = float(value)
    except (OverflowError, ValueError):   # an int or Fraction too large for a float
        raise ScorerError(f"{where} returned {value!r:.40}, outside [0, 1]") from None
    if math.isnan(number):
        raise ScorerError(f"{where} returned NaN; give a float in [0, 1]")
    if not 0.0 <= number <= 1.0:
        raise ScorerError(f"{where} returned {number!r}, outside [0, 1]")
    return number


def _is_bool(value) -> bool:
    """Python's bool or numpy's bool_. Refused as scores, both alike: a bool is an int in Python
    (numpy's is not even a number), so taking it would make a predicate that was meant to grade
    ("is the answer right?" where partial credit was wanted) score silently in 0/1. Saying so costs
    one float(...) in the scorer. numpy is not imported for this: its bool type is known by name."""
    kind = type(value)
    return isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool_", "bool"))


def _records(task_name, split: str, value) -> tuple:
    """A split as the record keeps it: a tuple, made once from a list, a generator, a `map`, any
    iterable -- so the checks and the run read the same items (a generator read by the checks
    would be empty for the run). A text or a mapping is refused: iterated, it gives characters or
    keys, not records."""
    if isinstance(value, tuple):
        return value
    what = "mstar.Episode" if split == "episodes" else "queries (mstar.query(...))"
    problem = TaskError(f"task {task_name!r}: {split} must be a list (or any iterable) of {what}, "
                        f"got {type(value).__name__}")
    if isinstance(value, (str, bytes, Mapping)):
        raise problem
    try:
        items = iter(value)
    except TypeError:   # not iterable (one Episode, None): named here, not as Python's own error
        raise problem from None
    return tuple(items)   # outside the try: an error inside the user's generator stays its own


def gold_problem(metric_name: str, item: QueryItem) -> str | None:
    """Why `item` cannot be scored by `metric_name` (None when it can): caught at load time,
    so a bad gold answer is a clear data error, not a crash in the middle of a run."""
    if metric_name == "rubric":
        rubric = item.meta.get("rubric")
        if not isinstance(rubric, list) or not rubric:
            return "metric 'rubric' needs a non-empty meta['rubric'] list"
        for i, c in enumerate(rubric):
            if not (isinstance(c, dict) and isinstance(c.get("criterion"), str) and c["criterion"].strip()
                    and isinstance(c.get("points"), (int, float)) and not isinstance(c.get("points"), bool)):
                return f"rubric[{i}] must be {{'criterion': non-empty str, 'points': number}}, got {c!r:.80}"
        if not any(c["points"] > 0 for c in rubric):
            return "rubric has no criterion with positive points, so no score can be earned"
    elif metric_name == "numeric_match" and parse_number(item.answer) is None:
        return f"metric 'numeric_match' needs a numeric gold answer, got {item.answer!r:.60}"
    elif metric_name == "tag_list_match" and not item.answer.strip():
        return "metric 'tag_list_match' needs a comma-separated list of gold tags"
    return None

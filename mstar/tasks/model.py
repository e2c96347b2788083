"""The task records: episodes an agent may memorise, queries it is scored on, and the metric.

A task is `(episodes, validation queries, test queries, metric)` (DESIGN.md §2). Records are
frozen dataclasses that serialise with `dataclasses.asdict` / `Task.to_dict()`.

Scoring goes through `Task.score(prediction, item, judge)`, which returns a `Score` (value,
warnings, details). Pure metrics (mstar/tasks/metrics.py) ignore the judge; judged metrics
(mstar/tasks/judging.py: "rubric", "llm_judge") call it once per criterion / question.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from mstar.tasks.judging import JUDGED_METRICS, JudgeFn, Score
from mstar.tasks.metrics import METRICS, parse_number


class TaskError(ValueError):
    """A task cannot be loaded; the message names the file (and line) and what is wrong with it."""


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

    def __post_init__(self) -> None:
        if self.metric_name not in METRICS and self.metric_name not in JUDGED_METRICS:
            raise TaskError(f"task {self.name!r}: unknown metric {self.metric_name!r}; "
                            f"known metrics: {', '.join(metric_names())}")
        if self.train_ratio is not None and (not isinstance(self.train_ratio, int) or self.train_ratio < 0):
            raise TaskError(f"task {self.name!r}: train_ratio must be a non-negative integer or None, "
                            f"got {self.train_ratio!r}")
        for q in self.validation + self.test:
            problem = gold_problem(self.metric_name, q)
            if problem:
                raise TaskError(f"task {self.name!r}: query {q.id!r}: {problem}")

    @property
    def needs_judge(self) -> bool:
        return self.metric_name in JUDGED_METRICS

    @property
    def interactive(self) -> bool:
        """Queries are games to play (meta["interactive"]; see mstar.interactive.evaluate_case),
        not questions to answer."""
        return any(q.meta.get("interactive") for q in self.validation + self.test)

    def score(self, prediction: str, item: QueryItem, judge: JudgeFn | None = None) -> Score:
        """Score one prediction against the item's gold answer / rubric, value in [0, 1]."""
        if self.metric_name in METRICS:
            return Score(float(METRICS[self.metric_name](prediction, item.answer)))
        if judge is None:
            raise ValueError(f"metric {self.metric_name!r} calls the judge role; pass judge=")
        return JUDGED_METRICS[self.metric_name](prediction, item, judge)

    def metric(self, prediction: str, item: QueryItem, judge: JudgeFn | None = None) -> float:
        """The score value alone (see `score`)."""
        return self.score(prediction, item, judge).value

    def to_dict(self) -> dict:
        d = asdict(self)
        d["metric"] = d.pop("metric_name")
        return d


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

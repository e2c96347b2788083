"""Lineage events: one typed record per line of a run's lineage.jsonl.

The loop writes them (mstar/loop.py) and every reader -- resume, the run views behind `mstar
lineage` / `show` / `runs`, the report, the progress printer, the live spend line, the benches
-- reads them through `from_dict`, so a key is spelled in exactly one place: here.

    SeedEvent       a seed program was evaluated on the static set
    IterationEvent  one iteration: parent, rotating evaluation, reflector attempts, the child
    ConfirmationEvent  before the test, the best programs on more validation items (mstar.final.champion)
    TestEvent       the best program on the held-out test set; a run is finished exactly when
                    its lineage ends with one
    StoppedEvent    the run stopped before its end (a budget, a failing endpoint or scorer); resumable

Older run folders lack some optional keys; `from_dict` fills their defaults. Unknown event kinds
(written by a later version) come back as None and carry no state.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Union


@dataclass
class SeedEvent:
    KIND: ClassVar[str] = "seed"
    program_id: str
    title: str = ""
    static_score: float = 0.0
    per_category: dict = field(default_factory=dict)
    error: dict | None = None               # the whole-program verdict when the evaluation failed
    case_errors: int = 0                    # cases left unscored: an LLM call or the task's scorer failed
                                            # (counted apart, not as wrong)
    ingest_errors: int = 0                  # episodes not ingested: an LLM call failed (mstar.evaluation.ingest)
    xray: dict | None = None                # where its static answers were lost (mstar.evaluation.xray.summary)
    llm: dict = field(default_factory=dict)  # the ledger's sums for this step (mstar.llm.ledger)
    timing: dict = field(default_factory=dict)
    seconds: float = 0.0

    iteration: ClassVar[int] = 0
    parent_id: ClassVar[None] = None


@dataclass
class IterationEvent:
    KIND: ClassVar[str] = "iteration"
    iteration: int
    parent_id: str
    status: str = "failed"                  # "ok" (a child entered the pool) | "failed" | "duplicate"
    title: str = ""
    body: str = ""
    attempts: list = field(default_factory=list)   # each reflector / compile-fix attempt with its error
    parent_static_score: float | None = None
    rotating_batch: list = field(default_factory=list)
    rotating_score: float | None = None
    rotating_scores: dict = field(default_factory=dict)   # query id -> score of each scored rotating case
                                            # (paired evidence for the confirmation, mstar/final/champion.py)
    rotating_mode: str = "fresh"            # "fresh" (paper: evaluated now) | "reuse" (the parent's own cases)
    failed_case_ids: list = field(default_factory=list)
    program_id: str | None = None           # the child, when status == "ok"
    static_score: float | None = None
    per_category: dict = field(default_factory=dict)
    delta: float | None = None              # child's static score minus the parent's
    evidence: dict | None = None            # the same, paired item by item: mean, low, high, n, significant
    reference_id: str | None = None         # the best program as of the run's last significant gain
    progress_evidence: dict | None = None   # the child against it, paired: a gain of the run when
                                            # significant (strategies/stopping.py)
    no_change: bool = False                 # the child answered every static item as its parent did
    runtime_fixes: list = field(default_factory=list)  # rounds of fixing a child that failed at run time
    eval_error: dict | None = None
    case_errors: int = 0
    ingest_errors: int = 0
    xray: dict | None = None                # the child's static X-ray (mstar.evaluation.xray.summary)
    best_static_score: float | None = None  # the pool's best after this iteration
    patience: dict | None = None            # --patience after this iteration: quiet (iterations in a row
                                            # without progress), climbing (strategies/stopping.py)
    pool_seen: list = field(default_factory=list)  # program ids in the pool when the iteration began
    llm: dict = field(default_factory=dict)
    replay_keys: list = field(default_factory=list)  # reflector prompts asked (resume restores the counters)
    timing: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def added_child(self) -> bool:
        return self.status == "ok" and self.program_id is not None


@dataclass
class ConfirmationEvent:
    """Before the test: the best programs by static score, scored on more validation items."""
    KIND: ClassVar[str] = "confirmation"
    items: int = 0                          # validation items outside the static set
    scores: dict = field(default_factory=dict)   # program id -> static, confirm, union, n
    confirmed_id: str | None = None         # best on static + confirmation items
    static_id: str | None = None            # best static score (the paper's rule)
    rule: str = "confirmed"                 # which of the two is the run's champion
    rounds: list = field(default_factory=list)   # each look of the race: items bought before it, programs,
                                            # leader, runner_up, gap, gaps (each with its verdict), spent
    stop: str = ""                          # why it stopped buying: decided, tied, budget, cap, run budget
    bought: list = field(default_factory=list)   # the validation indices bought, in order
    budget: dict = field(default_factory=dict)   # unit (tokens / questions), share, allowance, spent, writes, racer_items
    llm: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)   # seconds (the test's are apart), chain_calls
    entry: dict = field(default_factory=dict)    # program id -> estimate (mean, se, n, basis), entered
    item_scores: dict = field(default_factory=dict)  # program id -> source_sha, scores {query id: score}: its
                                            # confirmation items, read by a later race (mstar/final/champion.py)


@dataclass
class TestEvent:
    KIND: ClassVar[str] = "test"
    program_id: str
    test_score: float | None = None
    per_category: dict = field(default_factory=dict)
    case_errors: int = 0                     # test cases left unscored: an LLM call or the task's scorer failed
    score_errors: int = 0                    # ... of them, those the task's scorer failed on
    best_seed_id: str | None = None          # the best seed by static score, scored on the same questions
    best_seed_test_score: float | None = None
    gain: dict | None = None                 # paired difference to it: mean, low, high, n (mstar.final.stats)
    picks: dict = field(default_factory=dict)  # rule ("confirmed", "static") -> {program_id, test_score}
    llm: dict = field(default_factory=dict)
    timing: dict = field(default_factory=dict)


@dataclass
class StoppedEvent:
    KIND: ClassVar[str] = "stopped"
    reason: str
    iteration: int = 0                      # iterations done when it stopped
    kind: str = "budget"                    # "budget" | "endpoint" | "scorer" | "interrupted"
    llm: dict = field(default_factory=dict)


Event = Union[SeedEvent, IterationEvent, ConfirmationEvent, TestEvent, StoppedEvent]
KINDS: dict[str, type] = {cls.KIND: cls for cls in (SeedEvent, IterationEvent, ConfirmationEvent, TestEvent,
                                                    StoppedEvent)}
KIND_KEY = "event"


def to_dict(event: Event) -> dict:
    """The JSON object written to lineage.jsonl: the kind first, then the fields; no NaN
    (a float that is not finite becomes null, which every JSON reader accepts)."""
    return {KIND_KEY: event.KIND, **{k: _finite(v) for k, v in dataclasses.asdict(event).items()}}


def from_dict(data: dict) -> Event | None:
    """The event of one lineage line; None for a kind this version does not know. Raises
    ValueError naming the missing key when a required one is absent."""
    if not isinstance(data, dict):
        raise ValueError(f"a lineage event is a JSON object, got {type(data).__name__}")
    cls = KINDS.get(data.get(KIND_KEY))
    if cls is None:
        return None
    known = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {k: v for k, v in data.items() if k in known}
    for name, f in known.items():
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and kwargs.get(name) is None:
            raise ValueError(f"{cls.KIND} event without {name!r}")
        if name in kwargs and kwargs[name] is None and not required and f.default_factory is not dataclasses.MISSING:
            kwargs[name] = f.default_factory()   # null where an older version wrote nothing useful
    return cls(**kwargs)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def seeds(events: list) -> list[SeedEvent]:
    return [e for e in events if isinstance(e, SeedEvent)]


def iterations(events: list) -> list[IterationEvent]:
    return [e for e in events if isinstance(e, IterationEvent)]


def finished(events: list) -> bool:
    return any(isinstance(e, TestEvent) for e in events)


def read_lineage(path) -> list:
    """Every complete event of a lineage.jsonl file, typed (benches and scripts; the run views
    read through RunStore, which also handles a half-written last line)."""
    import json
    from pathlib import Path

    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            ev = from_dict(json.loads(line))
            if ev is not None:
                out.append(ev)
    return out

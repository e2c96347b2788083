"""What the loop asks an executor to do: an evaluation job, and the executor's interface."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from mstar.evaluation import EvalResult

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class EvalJob:
    """One evaluation: `source` scored on `queries` ("validation" or "test" with indices into
    that list; None = all) after writing the training episodes, or all episodes with
    `all_episodes` (the held-out test). `keep`: keep the ingested knowledge base for the next
    evaluation of the same program. `take_prestart`: use the worker started ahead for this
    program's coming static evaluation (False: a guess made beside that evaluation,
    mstar/iteration/rotating_prefetch.py, must not take it). `read_kept`: a test may read the
    knowledge base the program's validation kept, when its episodes are those (local.run_job)."""
    source: str
    split: str = "validation"
    indices: tuple[int, ...] | None = None
    all_episodes: bool = False
    keep: bool = True
    take_prestart: bool = True
    read_kept: bool = False


class Executor(Protocol):
    """Runs evaluation jobs; thread-safe (several iterations may be in flight)."""

    def run(self, job: EvalJob) -> EvalResult: ...

    def close(self) -> None: ...


class ExecutorError(RuntimeError):
    """The executor cannot be used (Ray missing, cluster unreachable); the message says what to do."""

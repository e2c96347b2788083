"""gepa's GEPAAdapter over mstar's evaluator: a candidate is a seed program whose
ALWAYS_ON_KNOWLEDGE is the candidate's text.

`evaluate(batch, candidate)` writes the program's source with the candidate's constant, runs
mstar.evaluation.evaluate on the batch of queries (the training episodes written into a sandbox
worker first) and returns one score per query. ALWAYS_ON_KNOWLEDGE reaches only the task agent's
answer prompt -- the program's write() and read() never see it when the seed does not use the name
-- so every candidate reads the same knowledge base: `SharedKnowledgeBases` keeps the one the
first evaluation ingested and hands it to every later candidate with that candidate's constant.
A seed that mentions ALWAYS_ON_KNOWLEDGE in its code gets a fresh knowledge base per evaluation.

`make_reflective_dataset` builds GEPA's side information from the failed cases (score below 1;
all cases when none failed): the question and what memory returned, the answer, and feedback
with the score, the expected answer and -- for rubric tasks -- the judge's verdict per criterion.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable, Sequence

from mstar.evaluation import EvalResult, SessionCache, evaluate, session_key
from mstar.evaluation.sessions import KeptSession
from mstar.gepa import COMPONENT
from mstar.offline.source_edits import constant_value, replace_constant
from mstar.prompts.sections import cut, rubric_verdicts

MAX_RETRIEVED_SHOWN = 1500


def with_constant(source: str, text: str) -> str:
    """The seed's source with ALWAYS_ON_KNOWLEDGE set to `text`."""
    return replace_constant(source, COMPONENT, text)


def kb_ignores_constant(source: str) -> bool:
    """True when the program names ALWAYS_ON_KNOWLEDGE only where it defines it."""
    return source.count(COMPONENT) == 1


class SharedKnowledgeBases(SessionCache):
    """A session cache in which every candidate of one seed shares the seed's ingested knowledge
    base; a leased view carries the candidate's constants (see module doc)."""

    def __init__(self, keep: int = 2) -> None:
        super().__init__(keep)
        self._alias: dict[str, tuple[str, str]] = {}    # candidate key -> (seed key, constant)
        self._views: dict[int, KeptSession] = {}
        self._views_lock = threading.Lock()

    def register(self, source: str, seed_source: str, episode_ids: Sequence[str]) -> None:
        self._alias[session_key(source, episode_ids)] = (session_key(seed_source, episode_ids),
                                                         constant_value(source, COMPONENT) or "")

    def lease(self, key: str) -> KeptSession | None:
        canonical, constant = self._alias.get(key, (key, None))
        kept = super().lease(canonical)
        if kept is None or constant is None:
            return kept
        info = dataclasses.replace(kept.info, constants={**kept.info.constants, COMPONENT: constant})
        view = KeptSession(kept.session, info, kept.writes, kept.toolkit, kept.write_tokens)
        with self._views_lock:
            self._views[id(view)] = kept
        return view

    def release(self, kept: KeptSession) -> None:
        with self._views_lock:
            original = self._views.pop(id(kept), kept)
        super().release(original)

    def put(self, key: str, session, info, writes: list, toolkit=None, write_tokens: int = 0) -> bool:
        canonical, _ = self._alias.get(key, (key, None))
        return super().put(canonical, session, info, writes, toolkit, write_tokens)


class MemoryProgramAdapter:
    """gepa.core.adapter.GEPAAdapter for one seed program on one task (duck-typed: gepa checks
    the methods, not the class). Data instances are mstar QueryItems."""

    propose_new_texts = None    # gepa's own reflective proposal, served by the reflector role

    def __init__(self, seed_source: str, episodes: Sequence, *, metric: Callable, router, sandbox,
                 workers: int = 8, embed: Any = "current", on_eval: Callable[[EvalResult], None] | None = None):
        self.seed_source = seed_source
        self.episodes = list(episodes)
        self.metric, self.router, self.sandbox, self.workers, self.embed = metric, router, sandbox, workers, embed
        self.sessions = SharedKnowledgeBases() if kb_ignores_constant(seed_source) else None
        self.on_eval = on_eval or (lambda res: None)
        self.evaluations = 0

    def source_for(self, candidate: dict[str, str]) -> str:
        return with_constant(self.seed_source, candidate.get(COMPONENT, ""))

    def evaluate(self, batch: list, candidate: dict[str, str], capture_traces: bool = False):
        from gepa.core.adapter import EvaluationBatch

        source = self.source_for(candidate)
        if self.sessions is not None:
            self.sessions.register(source, self.seed_source, [ep.id for ep in self.episodes])
        res = evaluate(source, self.episodes, list(batch), metric=self.metric, router=self.router,
                       sandbox=self.sandbox, workers=self.workers, sessions=self.sessions, embed=self.embed)
        self.evaluations += 1
        self.on_eval(res)
        # A case an LLM call failed on is not a verdict on the candidate; gepa needs a number, and
        # 0 is the one that cannot make a candidate look better than it is.
        scores = [c.score if c.scored else 0.0 for c in res.cases]
        outputs = [c.answer for c in res.cases]
        trajectories = [dataclasses.asdict(c) for c in res.cases] if capture_traces else None
        return EvaluationBatch(outputs=outputs, scores=scores, trajectories=trajectories)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch, components_to_update: list[str]):
        cases = list(eval_batch.trajectories or [])
        failed = [c for c in cases if c.get("score", 0.0) < 1.0] or cases
        return {name: [reflective_record(c) for c in failed] for name in components_to_update}

    def close(self) -> None:
        if self.sessions is not None:
            self.sessions.close()


def reflective_record(case: dict) -> dict:
    """One example of GEPA's side information (the keys its proposal prompt renders as headers)."""
    lines = [f"Score: {case.get('score', 0.0):.2f} (1.00 is a perfect answer)",
             f"Expected answer: {' '.join(str(case.get('expected', '')).split())}"]
    if case.get("error"):
        lines.append(f"The memory program failed on this question: {case['error']}")
    if case.get("llm_error"):
        lines.append(f"Not scored, an LLM call failed: {case['llm_error']}")
    verdicts = rubric_verdicts(case)
    if verdicts:
        lines.append("Rubric verdicts (the score is the points of the met criteria over the positive points):\n"
                     + verdicts)
    return {"Inputs": {"question": case.get("question", ""),
                       "retrieved_memory": cut(case.get("retrieved", "") or "(nothing)", MAX_RETRIEVED_SHOWN)},
            "Generated Outputs": case.get("answer", "") or "(empty answer)",
            "Feedback": "\n".join(lines)}

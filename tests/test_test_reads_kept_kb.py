"""A held-out test writes every episode of the task. When the training episodes are every episode
(in order), that is the knowledge base the program's validation wrote and kept, so the test reads
it instead (mstar/execution/local.py, run_job) -- and scores exactly as on one of its own. Not
when the training episodes are fewer, nor for a program whose reads may ask the LLM
(mstar/evaluation/read_state.py, read_may_ask_llm) or change its state, nor for a test started
early, beside the iterations (mstar/final/held_out.py says why)."""
from __future__ import annotations

import pytest

from mstar.config import LLMConfig, RunConfig
from mstar.evaluation.read_state import read_may_ask_llm
from mstar.execution import EvalJob
from mstar.execution.local import LocalExecutor
from mstar.final.held_out import held_out_job
from mstar.llm.router import LLMRouter
from mstar.pool import PoolEntry
from mstar.program.sources import load_program_source
from mstar.tasks import load_task

VECTOR = load_program_source("vector_search")[1]
SUMMARIZER = load_program_source("llm_summarizer")[1]


def _executor(task, train):
    cfg = RunConfig("test", llm=LLMConfig(cache_dir=None))
    return LocalExecutor(task, train, LLMRouter.from_config(cfg.llm), cfg)


def _tested(source: str, train_all: bool, validated_first: bool, read_kept: bool = True):
    task = load_task("sample", size=0.3)
    train = list(range(len(task.episodes) if train_all else len(task.episodes) - 1))
    ex = _executor(task, train)
    try:
        if validated_first:
            ex.run(EvalJob(source, "validation", (0, 1)))
        result = ex.run(held_out_job(PoolEntry("p", None, 0, source, 0.0), read_kept))
        return result, len(ex.sessions)
    finally:
        ex.close()


def test_a_test_over_the_training_episodes_reads_the_kept_knowledge_base_and_scores_the_same():
    shared, kept = _tested(VECTOR, train_all=True, validated_first=True)
    alone, _ = _tested(VECTOR, train_all=True, validated_first=False)
    assert shared.reused_kb and not alone.reused_kb
    assert kept == 1                                     # the test kept nothing of its own
    assert [(c.retrieved, c.answer, c.score) for c in shared.cases] == \
        [(c.retrieved, c.answer, c.score) for c in alone.cases]
    assert shared.mean_score == alone.mean_score and len(shared.cases) > 10


@pytest.mark.parametrize("source, train_all, read_kept", [(VECTOR, False, True), (SUMMARIZER, True, True),
                                                          (VECTOR, True, False)])
def test_fewer_training_episodes_reads_that_ask_the_llm_or_an_early_test_write_the_test_s_own(source, train_all,
                                                                                               read_kept):
    result, _ = _tested(source, train_all=train_all, validated_first=True, read_kept=read_kept)
    assert not result.reused_kb


def test_which_reads_may_ask_the_llm():
    assert not read_may_ask_llm(VECTOR)                  # its docstring says "No toolkit LLM call": not code
    assert read_may_ask_llm(SUMMARIZER)                  # read() calls toolkit.llm_completion
    in_write = VECTOR.replace("        chunks = self.chunk(raw_text, max_chars=500)",
                              "        self.toolkit.llm_completion([])\n        chunks = self.chunk(raw_text, max_chars=500)", 1)
    assert in_write != VECTOR and not read_may_ask_llm(in_write)
    helper = VECTOR + "\n\ndef ask(toolkit):\n    return getattr(toolkit, 'llm_' + 'completion')\n"
    assert read_may_ask_llm(helper)
    assert read_may_ask_llm("def (")

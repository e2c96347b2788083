"""A child that changed only what the task agent is told reads its parent's knowledge base instead
of writing every episode again (mstar/evaluation/knowledge_identity.py), with its own prompts,
and scores exactly as it would on a knowledge base of its own. Anything that can change what is
written or read -- code, the extraction prompt, a constant the code names, reads that change
state -- keeps a knowledge base of its own."""
from __future__ import annotations

import pytest
from run_helpers import SEED_A

from mstar.config import LLMConfig, SandboxConfig
from mstar.evaluation import SessionCache, evaluate
from mstar.evaluation.knowledge_identity import knowledge_identity, own_constants, relocate
from mstar.llm.router import LLMRouter
from mstar.program.sources import load_program_source
from mstar.tasks import load_task

VECTOR = load_program_source("vector_search")[1]
ANSWER = 'INSTRUCTION_RESPONSE = "Answer in at most three words."'
ANSWER_LINE = next(line for line in VECTOR.splitlines() if line.startswith("INSTRUCTION_RESPONSE = "))


def _setting(n_queries: int):
    """The sample task's episodes, its first validation queries, and evaluate()'s other arguments
    (the offline models, no response cache, hashing embeddings in the worker)."""
    task = load_task("sample", size=0.3)
    router = LLMRouter.from_config(LLMConfig(cache_dir=None))
    kw = dict(metric=task.score, router=router, sandbox=SandboxConfig(), embed=None)
    return list(task.episodes), list(task.validation[:n_queries]), kw


def _shared_and_alone(parent: str, child: str, n_queries: int):
    """`child` evaluated after `parent` with one session cache, and on a knowledge base of its own."""
    episodes, queries, kw = _setting(n_queries)
    sessions = SessionCache(keep=4)
    try:
        evaluate(parent, episodes, queries, sessions=sessions, **kw)
        shared = evaluate(child, episodes, queries, sessions=sessions, **kw)
    finally:
        sessions.close()
    return shared, evaluate(child, episodes, queries, **kw)


def _set(source: str, name: str, value: str) -> str:
    """`source` with the one-line literal assignment of `name` replaced."""
    lines = source.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"{name} = "))
    assert lines[at].rstrip().endswith('"'), "a one-line literal"
    lines[at] = f"{name} = {value!r}"
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("name", ["INSTRUCTION_RESPONSE", "ALWAYS_ON_KNOWLEDGE", "INSTRUCTION_QUERY"])
def test_a_prompt_the_engine_alone_reads_is_not_part_of_the_knowledge_base(name):
    child = _set(VECTOR, name, "Something else entirely.")
    assert child != VECTOR
    assert knowledge_identity(child) == knowledge_identity(VECTOR)
    assert own_constants(child)[name] == "Something else entirely."
    assert own_constants(VECTOR)[name] != "Something else entirely."


def test_an_appended_reassignment_and_an_unused_constant_keep_the_identity_and_the_last_value_counts():
    child = VECTOR + '\n' + ANSWER + '\nCHILD_OF_ITERATION = 3\n'
    assert knowledge_identity(child) == knowledge_identity(VECTOR)
    assert own_constants(child)["INSTRUCTION_RESPONSE"] == "Answer in at most three words."


def test_what_decides_what_is_written_or_read_makes_another_knowledge_base():
    base = knowledge_identity(VECTOR)
    assert knowledge_identity(VECTOR + '\nINSTRUCTION_KNOWLEDGE_ITEM = "Keep only dates."\n') != base
    assert knowledge_identity(VECTOR.replace("n_results=min(5,", "n_results=min(3,", 1)) != base
    # A constant the code reads is the program's state, not only a prompt.
    named = VECTOR + "\n\ndef _unused():\n    return INSTRUCTION_RESPONSE\n"
    assert knowledge_identity(named + "\n" + ANSWER + "\n") != knowledge_identity(named)
    by_string = VECTOR + '\n\ndef _unused():\n    return globals()["INSTRUCTION_RESPONSE"]\n'
    assert knowledge_identity(by_string + "\n" + ANSWER + "\n") != knowledge_identity(by_string)
    # A line added inside the code moves the line numbers a traceback names after it.
    moved = VECTOR.replace("class KnowledgeBase", "# a note\nclass KnowledgeBase", 1)
    assert moved != VECTOR and knowledge_identity(moved) != base
    assert knowledge_identity(VECTOR + "\n# a note at the end\n") == base


def test_a_prompt_rewritten_over_several_lines_moves_the_code_below_it_and_an_error_s_line_moves_with_it():
    long = VECTOR.replace(ANSWER_LINE, 'INSTRUCTION_RESPONSE = (\n    "Answer in at most"\n    " three words."\n)', 1)
    assert long != VECTOR and knowledge_identity(long) == knowledge_identity(VECTOR)
    read_at = next(i for i, line in enumerate(VECTOR.splitlines(), 1) if "def read(" in line)
    assert long.splitlines()[read_at + 3 - 1] == VECTOR.splitlines()[read_at - 1]   # three lines down
    assert relocate(read_at, VECTOR, long) == read_at + 3
    assert relocate(1, VECTOR, long) == 1                                            # above the rewrite


def test_a_program_whose_reads_change_its_state_never_shares():
    notes = VECTOR.replace("    def read(self, query", "    def read(self, query", 1).replace(
        "        results = self.collection.query(", "        self.last = query\n        results = self.collection.query(", 1)
    assert notes != VECTOR
    assert knowledge_identity(_set(notes, "INSTRUCTION_RESPONSE", "Other.")) != knowledge_identity(notes)
    assert own_constants(notes) == {}


def test_a_text_that_does_not_parse_is_its_own_identity():
    assert knowledge_identity("def (") != knowledge_identity("def  (")


def test_a_child_that_changed_only_its_answer_prompt_reads_the_parent_s_knowledge_base_with_its_own_prompt():
    episodes, queries, kw = _setting(6)
    child = _set(VECTOR, "INSTRUCTION_RESPONSE", "Answer in at most three words.")
    sessions = SessionCache(keep=4)
    try:
        parent = evaluate(VECTOR, episodes, queries, sessions=sessions, **kw)
        shared = evaluate(child, episodes, queries, sessions=sessions, **kw)
        assert not parent.reused_kb and shared.reused_kb
        assert len(sessions) == 1 and sessions.hits == 1          # one worker, written once
    finally:
        sessions.close()
    alone = evaluate(child, episodes, queries, **kw)               # the child on a knowledge base of its own
    assert not alone.reused_kb
    for mine, its in zip(shared.cases, alone.cases):
        assert mine.retrieved == its.retrieved and mine.answer == its.answer and mine.score == its.score
        answer_turn = mine.conversation[2]["content"]
        assert "Answer in at most three words." in answer_turn     # the child's prompt, not the parent's
    assert [c.score for c in shared.cases] == [c.score for c in alone.cases]


def test_a_child_with_new_code_writes_a_knowledge_base_of_its_own():
    episodes, queries, kw = _setting(2)
    sessions = SessionCache(keep=4)
    try:
        evaluate(SEED_A, episodes, queries, sessions=sessions, **kw)
        other = evaluate(SEED_A + "\nVARIANT = [1]\n", episodes, queries, sessions=sessions, **kw)
        assert not other.reused_kb and len(sessions) == 2
    finally:
        sessions.close()


def test_a_run_s_scores_and_the_race_s_allowance_do_not_depend_on_whether_a_parent_was_still_kept(tmp_path):
    """With knowledge bases kept, children that changed only prompts read their parents'; with none
    kept (`keep_sessions=0`) each writes its own. The seeds and iterations score the same either
    way, and the tokens the race's allowance is a share of are the same: a shared child's writes
    are counted at what they would have asked (mstar/final/race_budget.py)."""
    import mstar
    from mstar.final.race_budget import tokens_asked
    from mstar.run import events as ev_types

    small = dict(size=0.2, iterations=3, static_size=4, seed=3, quiet=True, no_preflight=True, no_cache=True)
    kept = mstar.evolve("sample", out=tmp_path / "kept", **small)
    alone = mstar.evolve("sample", out=tmp_path / "alone", keep_sessions=0, **small)

    def scored(run):
        return [(e.program_id, getattr(e, "parent_id", None), e.static_score) for e in run.events
                if isinstance(e, (ev_types.SeedEvent, ev_types.IterationEvent))]

    shared = [e for e in kept.events if isinstance(e, ev_types.IterationEvent) and (e.llm or {}).get("shared_write_tokens")]
    assert shared, "no child of this run read its parent's knowledge base: the test shows nothing"
    assert not any((e.llm or {}).get("shared_write_tokens") for e in alone.events
                   if isinstance(e, (ev_types.SeedEvent, ev_types.IterationEvent)))
    assert scored(kept) == scored(alone)
    assert tokens_asked(kept.events) == tokens_asked(alone.events)


def test_an_error_in_a_read_on_the_parent_s_knowledge_base_names_the_child_s_own_line():
    raises = SEED_A.replace('''    def read(self, query: Query) -> str:
        return''', '''    def read(self, query: Query) -> str:
        raise ValueError("this memory cannot be read")
        return''')
    child = raises.replace('INSTRUCTION_RESPONSE = "Answer briefly."',
                           'INSTRUCTION_RESPONSE = (\n    "Answer"\n    " in one word."\n)')
    assert raises != SEED_A and child != raises
    line = next(i for i, text in enumerate(child.splitlines(), 1) if "cannot be read" in text)
    shared, alone = _shared_and_alone(raises, child, 2)
    assert shared.reused_kb and not alone.reused_kb
    assert [c.error for c in shared.cases] == [c.error for c in alone.cases]
    assert all(f"(line {line})" in c.error for c in shared.cases)

"""A child that changed read() (and perhaps its prompts) but nothing that writes runs its own read()
on its parent's knowledge base, in the parent's worker, instead of writing every episode again
(mstar/evaluation/knowledge_identity.py, writer_identity; mstar/evaluation/sessions.py, fit;
sandbox/worker/loader.py, load_reader). It must read, answer, score and fail exactly as it would
on a knowledge base of its own."""
from __future__ import annotations

import pytest
from test_knowledge_identity import ANSWER_LINE, VECTOR, _setting, _shared_and_alone

from mstar.config import SandboxConfig
from mstar.evaluation import SessionCache, evaluate
from mstar.evaluation.knowledge_identity import knowledge_identity, writer_identity
from mstar.evaluation.run import sandbox_limits
from mstar.evaluation.sessions import session_key
from sandbox.engine.session import ProgramSession, SandboxError

FEWER = VECTOR.replace("n_results=min(5,", "n_results=min(2,", 1)
LONG_PROMPT = 'INSTRUCTION_RESPONSE = (\n    "Answer in at most"\n    " three words."\n)'


def _read_raising(source: str, extra_lines: int, statement: str) -> str:
    """`source` whose read() has `extra_lines` more lines and then runs `statement` (which raises)."""
    padding = "".join(f"        pad_{i} = {i}\n" for i in range(extra_lines))
    return source.replace("        results = self.collection.query(",
                          padding + f"        {statement}\n        results = self.collection.query(", 1)


def test_a_child_that_changed_only_how_it_reads_builds_the_parent_s_knowledge_base():
    assert knowledge_identity(FEWER) != knowledge_identity(VECTOR)
    assert writer_identity(FEWER) == writer_identity(VECTOR)
    # Its prompts too, over more lines (the class moves down), a longer read() and an unused constant after it.
    both = _read_raising(FEWER.replace(ANSWER_LINE, LONG_PROMPT, 1), 3, "pass") + "\nCHILD_OF_ITERATION = 2\n"
    assert writer_identity(both) == writer_identity(VECTOR)


@pytest.mark.parametrize("child", [
    VECTOR.replace("max_chars=500)", "max_chars=400)", 1),                                   # writes otherwise
    VECTOR.replace("min(5, self.doc_count)", "min(TOP, self.doc_count)", 1) + "\nTOP = 2\n",  # a constant read() names
    VECTOR.replace("    def read(self", "    def read(self, query: Query, extra=1) -> str:\n"
                   "        return ''\n\n    def old_read(self", 1),                         # a default; read() not last
    VECTOR.replace("        if self.doc_count == 0:", "        super().__init__\n        if self.doc_count == 0:", 1),
    VECTOR + "\n\ndef helper():\n    return 1\n",                                             # code after the class
])
def test_what_changes_what_is_written_or_what_read_sees_keeps_a_knowledge_base_of_its_own(child):
    assert child != VECTOR
    assert writer_identity(child) != writer_identity(VECTOR)


def test_the_child_reads_answers_and_scores_on_the_parent_s_knowledge_base_as_on_its_own():
    episodes, queries, kw = _setting(6)
    sessions = SessionCache(keep=4)
    try:
        parent = evaluate(VECTOR, episodes, queries, sessions=sessions, **kw)
        shared = evaluate(FEWER, episodes, queries, sessions=sessions, **kw)
        again = evaluate(FEWER, episodes, queries, sessions=sessions, **kw)     # its read() is there already
        parent_again = evaluate(VECTOR, episodes, queries, sessions=sessions, **kw)
        assert not parent.reused_kb and shared.reused_kb and again.reused_kb and parent_again.reused_kb
        assert len(sessions) == 1 and sessions.hits == 3                       # one worker, written once
    finally:
        sessions.close()
    alone = evaluate(FEWER, episodes, queries, **kw)
    assert [c.retrieved for c in shared.cases] == [c.retrieved for c in alone.cases] \
        == [c.retrieved for c in again.cases]
    assert [(c.answer, c.score) for c in shared.cases] == [(c.answer, c.score) for c in alone.cases]
    assert [c.retrieved for c in parent_again.cases] == [c.retrieved for c in parent.cases]
    assert [c.retrieved for c in shared.cases] != [c.retrieved for c in parent.cases]   # 2 chunks, not 5
    assert shared.shared_write_tokens == parent.write_tokens > 0   # the race prices it as if it wrote its own


@pytest.mark.parametrize("statement", [
    'raise ValueError("this memory cannot be read")',   # in the child's own read()
    "self.chunk(None, 10)",                              # in the parent's code, called from it
])
def test_an_error_names_the_line_the_child_s_own_worker_would_name(statement):
    # The prompt over three more lines moves the class; read() is five lines longer than the parent's.
    child = _read_raising(FEWER.replace(ANSWER_LINE, LONG_PROMPT, 1), 5, statement)
    assert writer_identity(child) == writer_identity(VECTOR)
    shared, alone = _shared_and_alone(VECTOR, child, 2)
    assert shared.reused_kb and not alone.reused_kb
    assert all(c.error for c in alone.cases)
    assert [c.error for c in shared.cases] == [c.error for c in alone.cases]


def test_a_new_read_waits_for_the_worker_to_itself_and_never_fails_another_program_s_reads():
    episodes, queries, kw = _setting(2)
    kw["sandbox"] = SandboxConfig(call_timeout_s=3.0)
    sessions = SessionCache(keep=4)
    try:
        parent = evaluate(VECTOR, episodes, queries, sessions=sessions, **kw)
        held = sessions.lease(session_key(VECTOR, [ep.id for ep in episodes]))   # another evaluation reads there
        busy = evaluate(FEWER, episodes, queries, sessions=sessions, **kw)
        assert not busy.reused_kb                                               # it wrote its own
        sessions.release(held)
        # A read() that never returns: its evaluation fails, and the parent's worker with it -- alone.
        stuck = evaluate(_read_raising(FEWER, 0, "while True:\n            pass"), episodes, queries,
                         sessions=sessions, **kw)
        assert stuck.reused_kb and stuck.error and "timeout" in str(stuck.error).lower()
        after = evaluate(VECTOR, episodes, queries, sessions=sessions, **kw)   # written again, same answers
        assert not after.reused_kb
        assert [c.retrieved for c in after.cases] == [c.retrieved for c in parent.cases]
    finally:
        sessions.close()


def test_the_worker_refuses_a_read_it_cannot_run_as_the_program_s_own_and_goes_on():
    uses_class = VECTOR.replace("        if self.doc_count == 0:", "        if super() and self.doc_count == 0:", 1)
    session = ProgramSession(VECTOR, limits=sandbox_limits(SandboxConfig()))
    try:
        session.start()
        session.write({}, "Caroline went to the park on Sunday.")
        with pytest.raises(SandboxError, match="cannot be run on another program"):
            session.reader(uses_class)
        with pytest.raises(SandboxError, match="syntax"):
            session.reader("def (")
        with pytest.raises(SandboxError, match="__class__"):   # refused by the sandbox's policy, as in a load
            session.reader(uses_class.replace("super()", "__class__", 1))
        number = session.reader(FEWER)
        query = {"query_text": "park"}
        assert session.read(query, number).output == session.read(query).output   # one chunk stored
        assert session.alive()
    finally:
        session.close()


class _Worker:
    """A kept worker as SessionCache.fit sees it: the builder's text, and the reader op."""
    source = VECTOR

    def __init__(self):
        self.asked = []

    def alive(self):
        return True

    def reader(self, source, line_shift):
        self.asked.append(source)
        return 7

    def close(self):
        pass


@pytest.mark.parametrize("writing_took, freed_after, shares", [(5.0, 0.2, True), (0.2, None, False)])
def test_a_new_read_waits_for_the_other_leases_at_most_as_long_as_writing_took(writing_took, freed_after, shares):
    import threading
    import time
    from types import SimpleNamespace

    sessions, worker = SessionCache(keep=2), _Worker()
    assert sessions.put("k", worker, None, [SimpleNamespace(seconds=writing_took / 2)] * 2)
    other, mine = sessions.lease("k"), sessions.lease("k")
    if freed_after is not None:
        threading.Timer(freed_after, sessions.release, (other,)).start()
    t0 = time.monotonic()
    fitted, number = sessions.fit(mine, FEWER)
    waited = time.monotonic() - t0
    if shares:
        assert fitted is mine and number == 7 and worker.asked == [FEWER] and waited < writing_took
        assert sessions.lease("k") is None                    # its first evaluation has the worker alone
        sessions.release(mine)
        assert sessions.lease("k") is mine and sessions.fit(mine, FEWER) == (mine, 7)   # then shared as any
    else:
        assert fitted is None and number is None and worker.asked == [] and waited >= writing_took - 0.05

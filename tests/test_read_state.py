"""Issue 30, finding 7: reads overlap, and a program whose read() changes its own state has its
reads run one at a time (mstar/evaluation/read_state.py); the interface spec says so."""
from __future__ import annotations

import time

import pytest

from mstar.config import LLMConfig, SandboxConfig
from mstar.evaluation import evaluate
from mstar.evaluation.read_state import read_changes_state
from mstar.llm.router import LLMRouter
from mstar.tasks import load_task

# A legitimate program (the issue's): it notes the question it is answering before its LLM call,
# and adds the rewritten query's words to a word table that every read scans.
NOTES_THE_QUESTION = '''
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Write down the facts."
INSTRUCTION_QUERY = "Ask for the fact."
INSTRUCTION_RESPONSE = "Answer briefly."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    content: str = field(default="", metadata={"description": "facts"})


@dataclass
class Query:
    query_text: str = field(default="", metadata={"description": "what to look up"})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.words = {}
        self.current = ""

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        for word in raw_text.lower().split():
            self.words[word] = self.words.get(word, 0) + 1

    def read(self, query: Query) -> str:
        self.current = query.query_text
        reply = self.toolkit.llm_completion([{"role": "user", "content": "Rewrite: " + query.query_text}])
        for word in reply.lower().split():
            self.words.setdefault(word, 0)
        hits = [w for w, n in self.words.items() if n and w in self.current.lower()]
        return "question: " + self.current + " | " + " ".join(hits[:10])
'''
READS_ONLY = NOTES_THE_QUESTION.replace('''        self.current = query.query_text
''', '''        current = query.query_text
''').replace('''        for word in reply.lower().split():
            self.words.setdefault(word, 0)
''', "").replace("self.current.lower()", "current.lower()").replace('"question: " + self.current', '"question: " + current')


class SlowToolkit:
    """The offline router, with toolkit replies that take 50 ms (as a provider's would): the reads'
    calls are in flight together."""

    def __init__(self):
        self.router = LLMRouter.from_config(LLMConfig())

    def call(self, role, messages, **kw):
        if role == "toolkit":
            time.sleep(0.05)
        return self.router.call(role, messages, **kw)

    def __getattr__(self, name):
        return getattr(self.router, name)


def test_reads_of_a_program_that_notes_its_question_on_self_do_not_see_each_other():
    """Before: 32 reads at once; 18-29 of 32 answers named another read's question, and 3-13 reads
    raised "dictionary changed size during iteration"."""
    task = load_task("sample")
    res = evaluate(NOTES_THE_QUESTION, task.episodes[:3], task.validation[:32], metric=task.score,
                   router=SlowToolkit(), sandbox=SandboxConfig(), workers=64, embed=None)
    assert [c.error for c in res.cases if c.error] == []
    wrong = [c for c in res.cases if c.retrieved.split(" | ")[0] != "question: " + c.query["query_text"]]
    assert wrong == []


def test_which_reads_run_one_at_a_time():
    assert read_changes_state(NOTES_THE_QUESTION) and not read_changes_state(READS_ONLY)
    base = READS_ONLY.replace('''        return "question: "''', '''        CHANGE
        return "question: "''')
    changes = {
        "self.hits += 1": True,
        "self.seen[current] = 1": True,
        "del self.words[current]": True,
        "table = self.words\n        table[current] = 1": True,
        "for row in self.rows.values():\n            row['hits'] = 1": True,
        "self.rows.append(current)": True,
        "self.toolkit.db.execute('INSERT INTO log VALUES (?)', (current,))": True,
        "self.toolkit.db.execute(f'DELETE FROM log WHERE q = {current!r}')": True,
        "self.toolkit.db.commit()": True,
        "col = self.toolkit.chroma.get_collection('mem')\n        col.add(ids=['x'], documents=[current])": True,
        "LOG.append(current)": True,
        "self.remember(current)": True,                       # a helper that changes state, below
        "self.toolkit.db.execute('SELECT * FROM log WHERE q = ?', (current,)).fetchall()": False,
        "sql = 'WITH t AS (SELECT 1) SELECT * FROM t'\n        self.toolkit.db.execute(sql)": False,
        "self.toolkit.chroma.get_collection('mem').query(query_texts=[current], n_results=3)": False,
        "ranked = sorted(self.words)\n        ranked.sort()": False,
        "local = {}\n        local[current] = 1": False,
        "self.toolkit.logger.debug(current)": False,
        "self.score(current)": False,                         # a helper that only reads, below
    }
    helpers = '''
    def remember(self, text):
        self.last = text

    def score(self, text):
        return len(self.words.get(text, ""))
'''
    for change, expected in changes.items():
        source = base.replace("CHANGE", change).replace('ALWAYS_ON_KNOWLEDGE = ""', 'ALWAYS_ON_KNOWLEDGE = ""\nLOG = []')
        source = source.rstrip() + "\n" + helpers
        assert read_changes_state(source) is expected, change
    assert read_changes_state("def broken(:") is True


@pytest.mark.parametrize("wording", ["ours", "paper"])
def test_the_interface_spec_says_reads_overlap_and_which_run_alone(wording):
    from mstar.prompts.paper_reflector import paper_interface_spec
    from mstar.iteration.reflect import interface_spec
    spec = (interface_spec if wording == "ours" else paper_interface_spec)(SandboxConfig())
    assert "concurrently" in spec and "one at a time" in spec

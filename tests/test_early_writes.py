"""Writes that need not wait for their extraction (mstar/evaluation/item_use.py, ingest.py).

A program whose write() never reads its item is written at once, while the extractions are still
in flight; only the reflector's examples (the first WRITE_EXAMPLES episodes) are extracted, their
records get the items when they come back, and the knowledge base -- so every read and answer --
is the one the waiting path builds. The static check says "it may read
the item" at anything unusual: a name, a swapped method, reflection, an item class that runs code
when it is built."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from mstar.config import LLMConfig, SandboxConfig
from mstar.evaluation import evaluate
from mstar.evaluation.item_use import write_ignores_item
from mstar.evaluation.records import WRITE_EXAMPLES, CaseResult, WriteRecord, summarise
from mstar.llm.ledger import call_kind
from mstar.llm.router import LLMRouter, RolePolicy
from mstar.tasks import load_task
from run_helpers import SEED_A

ROOT = Path(__file__).resolve().parents[1]
VECTOR = (ROOT / "seeds" / "vector_search.py").read_text()
READS_ITEM = SEED_A.replace("self.items.append(raw_text)", "self.items.append(item.content + raw_text)")
assert READS_ITEM != SEED_A


def test_the_seeds_that_store_raw_text_are_recognised_and_the_one_that_stores_items_is_not():
    assert write_ignores_item(VECTOR)
    assert write_ignores_item((ROOT / "seeds" / "llm_summarizer.py").read_text())
    assert not write_ignores_item((ROOT / "seeds" / "experience_learner.py").read_text())
    assert write_ignores_item(SEED_A) and not write_ignores_item(READS_ITEM)


WRITE = "    def write(self, item: KnowledgeItem, raw_text: str) -> None:\n        self.items.append(raw_text)\n"
assert WRITE in SEED_A
# Each turns SEED_A (whose write() ignores its item) into a program that may read it.
MAY_READ = {
    "the item named in a nested lambda": (WRITE, WRITE.replace("self.items.append(raw_text)",
                                                               "f = lambda: item\n        self.items.append(raw_text)")),
    "write swapped on the instance": ("        self.items = []\n", "        self.items = []\n        self.write = self.read\n"),
    "the instance's class swapped": ("        self.items = []\n", "        self.items = []\n        self.__class__ = KnowledgeBase\n"),
    "setattr anywhere": ("        self.items = []\n", "        self.items = []\n        setattr(self, 'x', 1)\n"),
    "getattr anywhere": ("        self.items = []\n", "        self.items = []\n        getattr(self, 'items')\n"),
    "__dict__ anywhere": ("        self.items = []\n", "        self.items = []\n        d = self.__dict__\n"),
    "a decorated write": (WRITE, "    @staticmethod\n" + WRITE),
    "write taking *args": (WRITE, WRITE.replace("item: KnowledgeItem, raw_text: str", "*args")),
    "a second binding of write": ('    def read(', '    other = write\n\n    def read('),
    "KnowledgeBase with a base class": ("class KnowledgeBase:", "class KnowledgeBase(object):"),
    "KnowledgeBase rebound": ("class KnowledgeBase:", "KnowledgeBase = None\n\n\nclass KnowledgeBase:"),
    "an item class with code": ('    content: str = field(default="", metadata={"description": "facts"})\n',
                                '    content: str = field(default="", metadata={"description": "facts"})\n\n'
                                '    def __post_init__(self):\n        NOTES.append(self.content)\n'),
    "a program-made default factory": ('field(default="", metadata={"description": "facts"})',
                                       'field(default_factory=make, metadata={"description": "facts"})'),
    "dataclass options": ("@dataclass\nclass KnowledgeItem", "@dataclass(init=False)\nclass KnowledgeItem"),
    "a rebound factory name": ("ALWAYS_ON_KNOWLEDGE = \"\"\n", "ALWAYS_ON_KNOWLEDGE = \"\"\nlist = tuple\n"),
    "field not from dataclasses": ("from dataclasses import dataclass, field",
                                   "from dataclasses import dataclass\nfrom json import loads as field"),
    "not Python": ("class KnowledgeBase:", "class KnowledgeBase"),
    "too deep to walk": ('ALWAYS_ON_KNOWLEDGE = ""\n', 'ALWAYS_ON_KNOWLEDGE = ""\nDEEP = ' + "-" * 100_000 + "1\n"),
}


@pytest.mark.parametrize("case", sorted(MAY_READ))
def test_anything_unusual_counts_as_reading_the_item(case):
    old, new = MAY_READ[case]
    assert old in SEED_A
    assert not write_ignores_item(SEED_A.replace(old, new, 1)), case


class _HeldExtractions:
    """The offline task model, with every extraction held until the test lets it go."""

    def __init__(self, inner):
        self.inner, self.name, self.model = inner, inner.name, inner.model
        self.release = threading.Event()
        self.extractions = 0

    def complete(self, messages):
        if call_kind("task", messages) == "extract_knowledge_item":
            self.extractions += 1
            assert self.release.wait(20), "the extractions were never released"
        return self.inner.complete(messages)


def _evaluate_with_held_extractions(source, task):
    base = LLMRouter.from_config(LLMConfig())
    held = _HeldExtractions(base._backends["task"])
    router = LLMRouter({**base._backends, "task": held}, policies={r: RolePolicy() for r in base._backends})
    written, out = [], {}

    def progress(what, done, total):
        if what == "writes":
            written.append(done)

    def run():
        out["result"] = evaluate(source, task.episodes[:5], task.validation[:3], metric=task.score, router=router,
                                 sandbox=SandboxConfig(), workers=8, progress=progress, embed=None)
    t = threading.Thread(target=run)
    t.start()
    time.sleep(1.5)                  # ample time to start the worker and write five episodes
    before_release = max(written, default=0)
    held.release.set()
    t.join(60)
    return out["result"], before_release, held.extractions


def test_a_program_that_ignores_its_item_is_written_while_the_extractions_are_still_out():
    task = load_task("sample")
    early, written_early, asked_early = _evaluate_with_held_extractions(SEED_A, task)
    assert written_early == 5                        # every write before any extraction was back
    waited, written_waiting, asked_waiting = _evaluate_with_held_extractions(READS_ITEM, task)
    assert written_waiting == 0                      # this one waits: its write reads the item
    assert early.error is None and waited.error is None
    assert all(w.early for w in early.writes) and not any(w.early for w in waited.writes)
    # Only the reflector's write examples are extracted: their records hold the items the
    # waiting path extracted; the others were never asked for and say so.
    assert WRITE_EXAMPLES == 2 and asked_early == WRITE_EXAMPLES and asked_waiting == 5
    n = WRITE_EXAMPLES
    assert [w.item for w in early.writes[:n]] == [w.item for w in waited.writes[:n]]
    assert all(w.item.get("content") and w.extracted for w in early.writes[:n])
    assert all(not w.extracted and not w.item.get("content") for w in early.writes[n:])
    assert all(w.extracted for w in waited.writes)


def test_an_extraction_the_writes_did_not_wait_for_is_not_on_the_chain():
    def case(waits):
        return CaseResult("q", "question", "answer", "", 0.0, "c", {}, "", [], [], waits=waits)
    cases = [case({"formulate": 0, "answer": 1})]      # formulation from the cache
    waited = [WriteRecord("e", "text", {}, waits={"extract": 1})]
    early = [WriteRecord("e", "text", {}, waits={"extract": 1}, early=True)]
    assert summarise(cases, waited, None, 1.0, 0.5, 3, 0, reused=False).critical_chain() == 2   # extract, then answer
    assert summarise(cases, early, None, 1.0, 0.5, 3, 0, reused=False).critical_chain() == 1    # the answer only


def test_early_writes_build_the_same_knowledge_base_as_waiting_ones():
    """The vector-search seed, written early and written after its extractions (the same source
    with a no-op mention of the item, so that the check says it may read it): same reads."""
    task = load_task("sample")
    waiting = VECTOR.replace("        chunks = self.chunk(raw_text, max_chars=500)\n",
                             "        chunks = self.chunk(raw_text, max_chars=500)\n        unused = item\n", 1)
    assert waiting != VECTOR and not write_ignores_item(waiting)
    router = LLMRouter.from_config(LLMConfig())
    runs = [evaluate(src, task.episodes[:6], task.validation[:6], metric=task.score, router=router,
                     sandbox=SandboxConfig(), workers=8, embed=None) for src in (VECTOR, waiting)]
    assert [w.early for w in runs[0].writes] == [True] * 6 and not any(w.early for w in runs[1].writes)
    assert [c.retrieved for c in runs[0].cases] == [c.retrieved for c in runs[1].cases]
    assert [c.answer for c in runs[0].cases] == [c.answer for c in runs[1].cases]
    n = WRITE_EXAMPLES      # the reflector's examples: extracted either way, the same items
    assert [w.item for w in runs[0].writes[:n]] == [w.item for w in runs[1].writes[:n]]


def test_the_check_parses_safely_beside_other_threads_parsing():
    """CPython 3.11 keeps its AST constructors' recursion depth per interpreter: two threads
    building trees at once can fail with "AST constructor recursion depth mismatch" (seen in a
    run with four iterations in flight, beside the offline reflector's edits). The check takes the
    engine's AST lock, as the reflector does: with collections running Python code mid-parse, no
    thread fails and every answer is right."""
    import gc
    from mstar.ast_guard import AST_LOCK

    class Cycle:
        def __del__(self):
            sum(range(50))       # Python code run by the collector, in the middle of a parse

    sources = [VECTOR + f"\n# variant {i}\n" for i in range(200)]   # distinct: no cached answer
    errors, answers = [], []

    def check(part):
        for src in sources[part::4]:
            junk = [Cycle() for _ in range(50)]
            for j in junk:
                j.me = j
            del junk
            try:
                answers.append(write_ignores_item(src))
            except SystemError as exc:
                errors.append(str(exc))

    def other_parser():
        import ast
        for _ in range(100):
            with AST_LOCK:
                ast.parse(VECTOR * 3)
    threads = [threading.Thread(target=check, args=(i,)) for i in range(4)]
    threads += [threading.Thread(target=other_parser) for _ in range(2)]
    gc.collect()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and answers == [True] * 200

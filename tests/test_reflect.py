"""Reflector prompt sections and reply parsing."""
import pytest

from mstar.config import SandboxConfig
from mstar.iteration.reflect import (ReflectionInput, ReplyError, build_compile_fix_messages,
                           build_reflection_messages, parse_reply)

SRC = open("seeds/vector_search.py").read()


def _input(**kw):
    base = dict(source=SRC, iteration=4, score=0.25,
                failed_cases=[{"query_id": "q1", "question": "When did Maya adopt the cat?", "expected": "3 May, 2024",
                               "answer": "a grey kitten", "score": 0.0, "retrieved": "Maya: I adopted a grey kitten",
                               "conversation": [{"role": "user", "content": "PROMPT"}, {"role": "assistant", "content": "a grey kitten"}]}],
                success_cases=[], write_examples=[], lineage=[], references=[], debug_logs=[])
    base.update(kw)
    return ReflectionInput(**base)


def test_prompt_has_required_sections_and_real_whitelist():
    cfg = SandboxConfig(allowed_imports=("json", "re", "heapq"))
    text = build_reflection_messages(_input(), cfg)[0]["content"]
    for tag in ("<interface_spec>", "<rules>", "<patch_format>", '<current_program iteration="4">',
                "<evaluation_score>0.2500</evaluation_score>", "<underperforming_cases>", "<question>When did Maya"):
        assert tag in text
    assert "Allowed imports: json, re, heapq." in text
    assert SRC.strip().splitlines()[0] in text
    # optional sections appear only when there is data for them
    assert "<lineage>" not in text and "<reference_programs>" not in text


def test_optional_sections_when_available():
    inp = _input(lineage=["- [child] iter_002: smaller chunks (score 0.2, \u0394 -0.050) \u2190 REGRESSION"],
                 references=[("seed_b", 0.4, "x = 1\n")], debug_logs=["stored 3 chunks"],
                 write_examples=[{"episode_id": "e1", "raw_text": "[date] A: hi", "item": {"topic": "hi"}}],
                 success_cases=[{"question": "Q?", "expected": "a", "answer": "a", "score": 1.0}])
    text = build_reflection_messages(inp, SandboxConfig())[0]["content"]
    for tag in ("<lineage>", "REGRESSION", "<reference_programs>", "<memory_debug_logs>", "<write_examples>",
                "<success_cases>"):
        assert tag in text


def test_compile_fix_prompt_carries_code_and_error():
    text = build_compile_fix_messages("x = (\n", "SyntaxError: line 1", SandboxConfig())[0]["content"]
    assert "<task>compile_fix</task>" in text and "x = (" in text and "SyntaxError: line 1" in text


def test_parse_reply_with_commit_message_and_patch():
    reply = ("I looked at it.\n*** Commit Message\nTitle: Stamp dates on chunks\n- dates were lost\n- add them\n\n"
             "*** Begin Patch\n*** Update File: program.py\n@@\n-a\n+b\n*** End Patch\n")
    r = parse_reply(reply)
    assert r.title == "Stamp dates on chunks"
    assert "dates were lost" in r.body
    assert r.patch is not None and r.full_program is None


def test_parse_reply_accepts_a_whole_program_in_a_code_block():
    r = parse_reply("*** Commit Message\nTitle: rewrite\n\n```python\n" + SRC + "```\n")
    assert r.patch is None and "class KnowledgeBase" in r.full_program


@pytest.mark.parametrize("reply,msg", [
    ("", "empty"),
    ("I think we should use BM25.", "no '\\*\\*\\* Begin Patch'"),
    ("*** Commit Message\nTitle: x\n*** Begin Patch\n", "cut off"),
])
def test_parse_reply_rejects_unusable_replies(reply, msg):
    with pytest.raises(ReplyError, match=msg):
        parse_reply(reply)


# ---------------------------------------------------------------- snapshot and budget

import os
from pathlib import Path

from mstar.iteration.reflect import fit_to_budget, reflection_sections

SNAPSHOT = Path(__file__).parent / "snapshots" / "reflection_prompt.txt"


ATTRIBUTED_CASE = {
    "query_id": "q1", "question": "When did Maya adopt the cat?", "expected": "3 May, 2024", "answer": "a grey kitten",
    "score": 0.0, "retrieved": "Maya: I adopted a grey kitten",
    "conversation": [{"role": "user", "content": "PROMPT"}, {"role": "assistant", "content": "a grey kitten"}],
    "attribution": {"label": "not_retrieved", "recall": 0.5, "precision": 0.4, "evidence": [
        {"id": "c1_s2:4", "text": "Maya: I adopted a grey kitten today!", "stored": True, "retrieved": True},
        {"id": "c1_s2:0", "text": "[2:00 pm on 3 May, 2024] Session 2 — Maya and Tom", "stored": True,
         "retrieved": False}]}}


def _fixture_input():
    return _input(
        failed_cases=[ATTRIBUTED_CASE],
        lineage=["- [current] seed_vector_search: seed: vector_search (score 0.180)",
                 "- [child] iter_002: Smaller chunks (score 0.150, \u0394 -0.030) \u2190 REGRESSION"],
        already_tried=["- [tried] attempt_003: Use os (failed: gate failed at stage [static])"],
        references=[("seed_llm_summarizer", 0.31, "x = 1\n")],
        debug_logs=["stored 4 chunks (total 4)"],
        write_examples=[{"episode_id": "c1_s1", "raw_text": "[2:00 pm on 3 May, 2024] Session 1\nMaya: hi",
                         "item": {"topic": "greeting", "content": "Maya says hi"}}],
        success_cases=[{"question": "Where does Tom work?", "expected": "a bakery", "answer": "a bakery", "score": 1.0}])


def test_reflection_prompt_snapshot():
    """The whole prompt is pinned: a prompt change must show up as a diff of this file.
    Regenerate with MSTAR_UPDATE_SNAPSHOTS=1 after checking the change is intended."""
    text = build_reflection_messages(_fixture_input(), SandboxConfig())[0]["content"]
    if os.environ.get("MSTAR_UPDATE_SNAPSHOTS") or not SNAPSHOT.exists():
        SNAPSHOT.write_text(text)
    assert text == SNAPSHOT.read_text()


def test_tight_budget_keeps_the_important_sections_and_marks_the_cut():
    inp = _fixture_input()
    inp.references = [("seed_big", 0.5, "# filler line for the reference program\n" * 400)]
    full = build_reflection_messages(inp, SandboxConfig())[0]["content"]
    budget = len(full) // 4 - 3000          # about 12,000 characters too long
    text = build_reflection_messages(inp, SandboxConfig(), budget)[0]["content"]
    assert len(text) < len(full) - 8000
    for must in ("<interface_spec>", "<current_program", "<underperforming_cases>", "<question>When did Maya",
                 "<lineage>", "<already_tried>"):
        assert must in text
    assert "section 'reference_programs'" in text          # the lowest priority went first, visibly
    sections, cut = fit_to_budget(reflection_sections(inp, SandboxConfig()), budget)
    assert cut[0] == "reference_programs" and "underperforming_cases" not in cut


def test_budget_far_too_small_drops_every_optional_section_but_never_the_program():
    sections, cut = fit_to_budget(reflection_sections(_fixture_input(), SandboxConfig()), 500)
    names = {s.name for s in sections if "left out" not in s.text}
    assert {"current_program", "interface_spec", "rules", "patch_format"} <= names
    assert set(cut) >= {"reference_programs", "write_examples", "success_cases", "memory_debug_logs"}

"""--prompts paper: the paper's templates (Appendix G.1-G.3, H) in our words, pinned by one snapshot
per prompt, answered by the offline models, and chosen per call, per context or per process."""
import os
from pathlib import Path

import pytest

from mstar import prompts
from mstar.agent import build_answer_messages, build_extraction_messages, build_query_messages
from mstar.config import LLMConfig, SandboxConfig
from mstar.evaluation import evaluate
from mstar.llm.router import LLMRouter
from mstar.offline.judge_model import OfflineJudgeModel
from mstar.offline.reflector_model import OfflineReflectorModel
from mstar.offline.task_model import OfflineTaskModel
from mstar.iteration.reflect import ReflectionInput, build_compile_fix_messages, build_reflection_messages, parse_reply
from mstar.tasks import load_task
from mstar.tasks.judging import answer_judge_messages, rubric_messages

SNAPSHOTS = Path(__file__).parent / "snapshots"
SRC = open("seeds/vector_search.py").read()
ITEM_SCHEMA = [{"name": "topic", "type": "str", "description": "what the text is about", "default": ""},
               {"name": "facts", "type": "list[str]", "description": "atomic facts", "default": []}]
QUERY_SCHEMA = [{"name": "query_text", "type": "str", "description": "a search query", "default": ""}]
EPISODE = "[2:00 pm on 3 May, 2024] Session 1\nMaya: I adopted a grey kitten called Miso today!"
HASHING = "feature hashing of words and word stems (lexical, no model)"


def _rubric_case():
    return {"query_id": "hb1", "question": "user: My LDL is 92. Is that normal?", "expected": "(rubric)",
            "answer": "It is fine.", "score": 0.5, "retrieved": "LDL under 100 is optimal.",
            "conversation": [{"role": "user", "content": "PROMPT"}, {"role": "assistant", "content": "It is fine."}],
            "score_details": {"criteria": [
                {"criterion": "States that an LDL of 92 is in the optimal range", "points": 5, "met": True,
                 "explanation": "it says fine"},
                {"criterion": "Asks about other lipid values", "points": 5, "met": False,
                 "explanation": "no question asked"}]}}


NOT_STORED_CASE = {
    "query_id": "q7", "question": "What is the name of Ines's cat?", "expected": "Miso", "answer": "unknown",
    "score": 0.0, "retrieved": "No information stored.",
    "conversation": [{"role": "user", "content": "PROMPT"}, {"role": "assistant", "content": "unknown"}],
    "attribution": {"label": "not_stored", "recall": 0.0, "precision": 0.0, "evidence": [
        {"id": "c2_s5:3", "text": "Ines: We adopted a cat and named her Miso.", "stored": False, "retrieved": False}]}}


def _reflection_input(**kw):
    base = dict(source=SRC, iteration=3, score=0.25, failed_cases=[_rubric_case(), NOT_STORED_CASE],
                success_cases=[_rubric_case(), {"query_id": "hb2", "question": "Q2?", "expected": "(rubric)",
                                                "answer": "A2", "score": 1.0}],
                write_examples=[{"episode_id": "e1", "raw_text": EPISODE, "item": {"topic": "kitten"}}],
                lineage=["- [current] seed_vector_search: seed: vector_search (score 0.180)"],
                already_tried=["- [tried] attempt_002: Use os (failed: gate failed at stage [static])"],
                references=[("seed_llm_summarizer", 0.31, "x = 1\n")], debug_logs=["stored 4 chunks"],
                prompts="paper", embeddings=HASHING)
    base.update(kw)
    return ReflectionInput(**base)


def _all_paper_prompts() -> dict[str, str]:
    sb = SandboxConfig()
    query = build_query_messages("Name the people.", "What did Maya adopt?", QUERY_SCHEMA, style="paper")
    turns = query + [{"role": "assistant", "content": '{"query_text": "Maya adopt"}'}]
    answer = build_answer_messages("Give dates exactly.", EPISODE, "What did Maya adopt?", "Be brief.",
                                   query_turns=turns, style="paper")
    return {
        "paper_extraction_prompt": build_extraction_messages("Keep dates.", EPISODE, ITEM_SCHEMA, style="paper"),
        "paper_query_prompt": query,
        "paper_answer_prompt": answer,
        "paper_reflection_prompt": build_reflection_messages(_reflection_input(), sb),
        "paper_compile_fix_prompt": build_compile_fix_messages("x = (\n", "SyntaxError: '(' was never closed",
                                                               sb, style="paper", embeddings=HASHING),
        "paper_rubric_judge_prompt": rubric_messages("user: Is 92 normal?\n\nassistant: It is fine.",
                                                     "Asks about other lipid values", 5, style="paper"),
        "paper_answer_judge_prompt": answer_judge_messages("What did Maya adopt?", "a grey kitten",
                                                           "a kitten", style="paper"),
    }


def _render(messages: list[dict]) -> str:
    return "\n".join(f"=== {m['role']}\n{m['content']}" for m in messages) + "\n"


@pytest.mark.parametrize("name", sorted(_all_paper_prompts()))
def test_paper_prompt_snapshot(name):
    """Each paper-worded prompt is pinned: a change shows up as a diff of its file.
    Regenerate with MSTAR_UPDATE_SNAPSHOTS=1 after checking the change is intended."""
    text = _render(_all_paper_prompts()[name])
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("MSTAR_UPDATE_SNAPSHOTS") or not path.exists():
        path.write_text(text)
    assert text == path.read_text()


def test_paper_prompts_keep_the_papers_structure():
    p = {k: "\n".join(m["content"] for m in v) for k, v in _all_paper_prompts().items()}
    refl = p["paper_reflection_prompt"]
    order = ["<interface_spec>", "## Runtime Constraints", "## Instruction Constants (required)", "<rules>",
             "<patch_format>", "*** Commit Message", '<current_program iteration="3">', "<evaluation_score>",
             "<lineage>", "<write_examples>", "<memory_debug_logs>", "<success_cases>", "<reference_programs>",
             "<underperforming_cases>", '<case id="1">', "<task>\n1."]
    positions = [refl.index(tag) for tag in order]
    assert positions == sorted(positions)
    case = refl.split('<case id="1">')[1].split("</case>")[0]
    inside = [case.index(t) for t in ("<question>", "<rationale>", "<model_generation>", "<score>",
                                      "<rubric_verdicts>", "<conversation>")]
    assert inside == sorted(inside)
    assert "**Prompt Optimization**" in refl and "**Memory Design**" in refl
    assert "[tried] attempt_002" in refl.split("<lineage>")[1].split("</lineage>")[0]   # failure memory joins it
    fix = p["paper_compile_fix_prompt"]
    assert fix.index("## Broken Code") < fix.index("## Error") and "**SyntaxError**: '(' was never closed" in fix
    assert "<task>" not in fix and "<task>" not in p["paper_extraction_prompt"]
    for name in ("paper_rubric_judge_prompt", "paper_answer_judge_prompt"):
        text = p[name]
        assert text.index("# Conversation") < text.index("# Rubric item") < text.index("# Instructions")
        assert '"criteria_met"' in text
    assert "[5] Asks about other lipid values" in p["paper_rubric_judge_prompt"]
    answer = _all_paper_prompts()["paper_answer_prompt"]
    assert [m["role"] for m in answer] == ["user", "assistant", "user"]
    assert answer[-1]["content"].startswith("<retrieved_memory>\nGive dates exactly.\n[2:00 pm")


def test_offline_models_answer_the_paper_prompts_like_the_tagged_ones():
    task_model = OfflineTaskModel()
    for style in ("mstar", "paper"):
        extraction = build_extraction_messages("Keep dates.", EPISODE, ITEM_SCHEMA, style=style)
        query = build_query_messages("Name the people.", "What did Maya adopt?", QUERY_SCHEMA, style=style)
        answer = build_answer_messages("", EPISODE, "What did Maya adopt?", "Be brief.",
                                       query_turns=query + [{"role": "assistant", "content": "{}"}], style=style)
        replies = [task_model.complete(m) for m in (extraction, query, answer)]
        if style == "mstar":
            tagged = replies
        else:
            assert replies == tagged          # the same model reads both forms the same way
    assert "kitten" in tagged[2]
    judge = OfflineJudgeModel()
    convo = "user: What did Maya adopt?\n\nassistant: a grey kitten called Miso"
    for style in ("mstar", "paper"):
        assert '"criteria_met": true' in judge.complete(rubric_messages(convo, "Names the grey kitten", 5, style=style))


def test_offline_reflector_patches_from_a_paper_reflection_prompt_and_fixes_a_paper_compile_error():
    reflector = OfflineReflectorModel(seed=1)
    reply = reflector.complete(build_reflection_messages(_reflection_input(), SandboxConfig()))
    parsed = parse_reply(reply)
    assert parsed.patch is not None and parsed.title
    broken = SRC.replace("import json", "import os", 1) if "import json" in SRC else "import os\n" + SRC
    fix = reflector.complete(build_compile_fix_messages(
        broken, "static: import 'os' is not allowed (allowed: json, re)", SandboxConfig(), style="paper"))
    assert "*** Commit Message" in fix


def test_style_is_chosen_per_call_then_context_then_process(monkeypatch):
    assert prompts.current() == "mstar"
    tagged = build_query_messages("i", "q?", QUERY_SCHEMA)[0]["content"]
    assert tagged.startswith("<task>formulate_query</task>")
    with prompts.using("paper"):
        assert not build_query_messages("i", "q?", QUERY_SCHEMA)[0]["content"].startswith("<task>")
        assert build_query_messages("i", "q?", QUERY_SCHEMA, style="mstar")[0]["content"] == tagged
    monkeypatch.setattr(prompts, "_process_default", ["paper"])
    assert prompts.current() == "paper" and "# Rubric item" in rubric_messages("c", "x", 1)[0]["content"]
    with pytest.raises(ValueError, match="unknown prompt wording 'papr'"):
        prompts.use("papr")


def test_an_offline_evaluation_with_the_papers_prompts_scores_like_the_projects_own():
    task = load_task("sample")
    router = LLMRouter.from_config(LLMConfig())
    scores = {}
    for style in ("mstar", "paper"):
        with prompts.using(style):
            res = evaluate(SRC, task.episodes[:12], task.validation[:10], metric=task.score, router=router,
                           sandbox=SandboxConfig(), workers=4, embed=None)
        scores[style] = res.mean_score
        conv = res.cases[0].conversation
        if style == "paper":   # the answer turn continues the query conversation, as in the paper
            assert len(conv) == 4 and conv[0]["content"].count("Question:") == 1
            assert conv[2]["content"].startswith("<retrieved_memory>")
    assert scores["paper"] == pytest.approx(scores["mstar"]) and scores["mstar"] > 0


@pytest.mark.parametrize("mode", ["instructions", "code"])
def test_an_ablation_run_in_the_papers_wording_still_gets_patches_of_the_free_part(mode):
    from mstar.program.frozen import check_frozen
    from mstar.patch import apply_patch
    inp = _reflection_input(mode=mode, failed_cases=[], success_cases=[])
    reply = parse_reply(OfflineReflectorModel(seed=2).complete(build_reflection_messages(inp, SandboxConfig())))
    assert reply.patch is not None
    check_frozen(SRC, apply_patch(SRC, reply.patch), mode)       # raises when the frozen part moved

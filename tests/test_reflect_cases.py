"""What the reflector sees of a case (both wordings): a rubric case's per-criterion verdicts, and
every case in one section only -- failed or success, never both."""
import pytest

from mstar.config import SandboxConfig
from mstar.offline.reflector_model import OfflineReflectorModel, parse_reflection_prompt
from mstar.offline.paper_forms import tagged_reflector_prompt
from mstar.prompts.sections import rubric_verdicts, split_cases
from mstar.iteration.reflect import ReflectionInput, build_reflection_messages

SRC = open("seeds/vector_search.py").read()


def _case(qid, score, question="Is an LDL of 92 normal?", details=None):
    return {"query_id": qid, "question": question, "expected": "(rubric)", "answer": "It is fine.",
            "score": score, "retrieved": "LDL under 100 is optimal.", "conversation": [],
            "score_details": details or {}}


RUBRIC = {"criteria": [
    {"criterion": "Says 92 is in the optimal range", "points": 5, "met": True, "explanation": "it does"},
    {"criterion": "Asks about HDL and triglycerides", "points": 3, "met": False, "explanation": "it does not"},
    {"criterion": "Recommends a statin", "points": -4, "met": None, "explanation": "judge call failed"}]}


def _prompt(style, failed, success):
    inp = ReflectionInput(SRC, 2, 0.4, failed, success, [], [], [], [], prompts=style)
    return build_reflection_messages(inp, SandboxConfig())[0]["content"]


def test_rubric_verdicts_list_every_criterion_with_points_and_the_judges_reason():
    text = rubric_verdicts(_case("a", 0.625, details=RUBRIC))
    assert text.splitlines() == [
        "- [MET] (+5 points) Says 92 is in the optimal range -- judge: it does",
        "- [NOT MET] (+3 points) Asks about HDL and triglycerides -- judge: it does not",
        "- [NOT MET (no verdict)] (-4 points) Recommends a statin -- judge: judge call failed"]
    assert rubric_verdicts(_case("b", 0.0)) == ""                       # token-F1 case: nothing to show
    lj = rubric_verdicts(_case("c", 0.0, details={"judge": {"met": False, "explanation": "wrong person"}}))
    assert lj == "- [NOT MET] the answer gives the expected answer -- judge: wrong person"


@pytest.mark.parametrize("style", ["mstar", "paper"])
def test_the_reflector_sees_the_verdicts_of_a_failed_rubric_case(style):
    text = _prompt(style, [_case("a", 0.625, details=RUBRIC)], [])
    block = text.split("<underperforming_cases>")[1]
    assert "<rubric_verdicts>" in block and "[NOT MET] (+3 points) Asks about HDL and triglycerides" in block
    assert "[MET] (+5 points) Says 92" in block


@pytest.mark.parametrize("style", ["mstar", "paper"])
def test_a_case_scoring_between_half_and_one_is_shown_once(style):
    """The loop samples failures by weight 1 - score and calls every case >= 0.5 a success: a 0.625
    case can be both. It is shown as failed, and left out of the success cases."""
    both = _case("a", 0.625, details=RUBRIC)
    other = _case("b", 1.0, question="What is a normal HDL?")
    text = _prompt(style, [both], [both, other])
    success = text.split("<success_cases>")[1].split("</success_cases>")[0]
    assert "What is a normal HDL?" in success and "Is an LDL of 92 normal?" not in success
    assert text.count("Is an LDL of 92 normal?") == 1
    only = _prompt(style, [both], [both])
    assert "<success_cases>" not in only                   # nothing left to show: no section at all


def test_split_cases_uses_ids_and_falls_back_to_questions():
    failed = [_case("a", 0.6)]
    assert split_cases(failed, [_case("a", 0.6), _case("b", 0.9, question="Q2")]) == [_case("b", 0.9, question="Q2")]
    no_ids = [{"question": "Q1", "score": 0.7}, {"question": "Q2", "score": 0.8}]
    assert split_cases([{"question": "Q1", "score": 0.7}], no_ids) == [no_ids[1]]


def test_the_offline_reflector_reads_the_cases_of_both_wordings_alike():
    case = _case("a", 0.0, question="When did Maya adopt the kitten?")
    case["conversation"] = [{"role": "user", "content": "<retrieved_memory>\nLDL under 100 is optimal.\n"
                                                        "</retrieved_memory>\n\nBe brief."},
                            {"role": "assistant", "content": "It is fine."}]
    views = [parse_reflection_prompt(tagged_reflector_prompt(_prompt(style, [case], []))) for style in ("mstar", "paper")]
    assert views[0].cases == views[1].cases
    assert views[0].cases[0].expected == "(rubric)" and views[0].cases[0].retrieved == "LDL under 100 is optimal."
    reply = OfflineReflectorModel(seed=0).complete([{"role": "user", "content": _prompt("paper", [case], [])}])
    assert "*** Begin Patch" in reply

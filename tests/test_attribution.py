"""Memory X-ray: where a wrong answer was lost (mstar/evaluation/attribution.py, xray.py).

Built cases run through a real evaluation (sandboxed programs, the offline task agent): a
program that stores nothing, one that stores but never returns the fact, one that returns it to
an answerer that ignores it, one that answers right -- each must get its label. Then the 50
LoCoMo cases I labelled by hand (tests/fixtures/xray_locomo_cases.json), and bad evidence."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from mstar.config import LLMConfig, SandboxConfig
from mstar.evaluation import evaluate
from mstar.evaluation.attribution import attribute, overlap, parts, words
from mstar.evaluation.xray import summary, write_inputs
from mstar.llm.ledger import call_kind
from mstar.llm.router import LLMRouter, RolePolicy
from mstar.tasks import task_from_dict
from mstar.tasks.evidence import plan_evidence
from run_helpers import SEED_A

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = json.loads((ROOT / "tests" / "fixtures" / "xray_locomo_cases.json").read_text(encoding="utf-8"))

E1 = ("[2:00 pm on 3 May, 2024] Session 1 — Maya and Tom\nMaya: I adopted a grey cat last week and named her "
      "Miso.\nTom: Lovely! I started pottery classes at the Blue Heron Studio.")
E2 = "[9:10 am on 9 May, 2024] Session 2 — Maya and Tom\nMaya: We drove to the coast on Sunday.\nTom: Sounds fun."
TASK = task_from_dict({
    "name": "xray", "metric": "token_f1",
    "episodes": [{"id": "e1", "text": E1}, {"id": "e2", "text": E2}],
    "validation": [
        {"id": "cat", "question": "What is the name of Maya's cat?", "answer": "Miso",
         "evidence": [{"text": "Maya: I adopted a grey cat last week and named her Miso.", "episode": "e1"}]},
        {"id": "studio", "question": "Where does Tom take pottery classes?", "answer": "Blue Heron Studio",
         "evidence": [{"text": "Tom: Lovely! I started pottery classes at the Blue Heron Studio.", "episode": "e1"}]},
        {"id": "plain", "question": "Where did Maya drive on Sunday?", "answer": "the coast"}],
    "test": []}, "test")

STORES_NOTHING = SEED_A.replace("self.items.append(raw_text)", "pass")
NEVER_RETURNS = SEED_A.replace('return "\\n".join(self.items)[:2000]', 'return "Nothing relevant found."')
assert STORES_NOTHING != SEED_A and NEVER_RETURNS != SEED_A


class _IgnoringAnswerer:
    """The offline task agent, except that every answer ignores the memory it was given."""

    def __init__(self, inner):
        self.inner, self.name, self.model = inner, inner.name, inner.model

    def complete(self, messages):
        reply = self.inner.complete(messages)
        if call_kind("task", messages) == "answer":
            return dataclasses.replace(reply, text="I could not say.")
        return reply


def _run(source, ignore_memory=False):
    base = LLMRouter.from_config(LLMConfig(cache_dir=None))
    router = base
    if ignore_memory:
        router = LLMRouter({**base._backends, "task": _IgnoringAnswerer(base._backends["task"])},
                           policies={r: RolePolicy() for r in base._backends})
    res = evaluate(source, TASK.episodes, TASK.validation, metric=TASK.score, router=router,
                   sandbox=SandboxConfig(), workers=4, embed=None)
    assert res.error is None
    return {c.query_id: c for c in res.cases}, res


@pytest.fixture(scope="module")
def built():
    return {"nothing": _run(STORES_NOTHING), "forgets": _run(NEVER_RETURNS),
            "ignored": _run(SEED_A, ignore_memory=True), "right": _run(SEED_A)}


@pytest.mark.parametrize("program,label", [("nothing", "not_stored"), ("forgets", "not_retrieved"),
                                           ("ignored", "not_used"), ("right", "right")])
def test_each_built_case_gets_the_stage_where_its_answer_was_lost(built, program, label):
    cases, res = built[program]
    for qid in ("cat", "studio"):
        att = cases[qid].attribution
        assert att["label"] == label, (program, qid, cases[qid].answer, att)
        assert att["recall"] == (1.0 if label in ("not_used", "right") else 0.0)
    assert cases["plain"].attribution is None        # no evidence given: no X-ray for it
    assert res.xray["labels"][label] == 2 and res.xray["cases"] == 2


def test_the_program_sums_recall_precision_and_the_score_when_retrieved(built):
    _, res = built["right"]
    x = res.xray
    assert x["recall"] == 1.0 and x["retrieved"] == 2 and x["score_when_retrieved"] == 1.0
    # SEED_A returns both sessions whole: each case's evidence turn is a small share of that text
    cases = built["right"][0]
    shares = [len(words(TASK.validation[i].meta["evidence_text"][0]["text"])) / len(words(cases[q].retrieved))
              for i, q in enumerate(("cat", "studio"))]
    assert x["precision"] == pytest.approx(sum(shares) / 2, abs=0.02) and 0.1 < x["precision"] < 0.4
    assert built["ignored"][1].xray["score_when_retrieved"] == 0.0
    assert built["forgets"][1].xray["recall"] == 0.0 and built["forgets"][1].xray["retrieved"] == 0


def test_what_write_keeps_is_read_from_the_source():
    seeds = {p.stem: p.read_text() for p in (ROOT / "seeds").glob("*.py") if p.stem != "__init__"}
    assert write_inputs(seeds["vector_search"]) == (True, frozenset())
    assert write_inputs(seeds["llm_summarizer"]) == (True, frozenset())
    assert write_inputs(seeds["experience_learner"]) == (False, frozenset({"lesson_learned", "fact_to_remember"}))
    assert write_inputs(STORES_NOTHING) == (False, frozenset())
    passes_item_on = SEED_A.replace("self.items.append(raw_text)", "self.items.append(str(item))")
    assert write_inputs(passes_item_on) == (False, None)          # the whole item: any field may be kept
    assert write_inputs("not python (") == (True, None)           # unknown: assume everything is kept


# ---------------------------------------------------------------- the matcher


def test_a_quoted_turn_is_found_and_its_words_scattered_over_a_long_text_are_not():
    unit = "Caroline: I went to a LGBTQ support group yesterday and it was so powerful."
    quoted = "Melanie: hi!\n" + unit.replace("so powerful", "really powerful") + "\nMelanie: wow"
    assert attribute([{"id": "u", "text": unit}], [""], quoted, 0.0)["evidence"][0]["retrieved"]
    scattered = ("Caroline: I went shopping. " + "Melanie: the weather is nice today. " * 8
                 + "Caroline: my support for you is powerful. " + "Melanie: ok. " * 8
                 + "Caroline: a group of us met yesterday.")
    assert overlap(words(unit), words(scattered))[0] < 0.5


def test_a_memory_that_kept_only_the_sentence_that_answers_still_counts():
    unit = ("John: Progress is progress, keep it up. By the way, I've been trying out cooking recipes. "
            "Made this tasty soup recently - it was real good!")
    kept = "John: Made this tasty soup recently - it was real good!"
    att = attribute([{"id": "u", "text": unit}], [kept], "", 0.0, question="What has John cooked?",
                    expected="Soup, a slow cooker meal")
    assert att["evidence"][0]["stored"] and att["label"] == "not_retrieved"
    # Without a question the key sentence is unknown: the whole turn must be there.
    assert attribute([{"id": "u", "text": unit}], [kept], "", 0.0)["label"] == "not_stored"
    # A key sentence carries its speaker: Jolene's sentence is not Deborah's turn.
    deborah = "Deborah: Yes, I also have a pendant that reminds me of my mother. We talk about her often."
    keys = parts(deborah, frozenset(words("What symbolic gifts do Deborah and Jolene have from their mothers?")))
    assert len(keys) == 2 and keys[1] == ("deborah", "yes", "pendant", "remind", "mother")
    jolene = "Jolene: This pendant reminds me of my mother, she gave it to me in 2010 in Paris."
    att = attribute([{"id": "D1:9", "text": deborah}], [jolene], jolene, 0.0,
                    question="What symbolic gifts do Deborah and Jolene have from their mothers?", expected="pendants")
    assert att["label"] == "not_stored"


def test_the_hand_labelled_locomo_cases_agree_with_the_matcher():
    """50 failed or mixed LoCoMo cases of the three seeds, each labelled by hand (fixture note)."""
    episodes, cases = FIXTURE["episodes"], FIXTURE["cases"]
    assert len(cases) == 50 and len({c["category"] for c in cases}) == 4 and len({c["program"] for c in cases}) == 3
    agree, unit_agree, units = 0, 0, 0
    for c in cases:
        stored = c.get("stored") or [episodes[u["episode"]] for u in c["evidence"]]
        att = attribute(c["evidence"], stored, c["retrieved"], c["score"], question=c["question"],
                        expected=c["expected"])
        agree += att["label"] == c["label"]
        for e in att["evidence"]:
            mine = c["units"][e["id"]]
            units += 1
            unit_agree += (e["stored"], e["retrieved"]) == (mine["stored"], mine["retrieved"])
    assert agree >= 45, f"case labels agree on {agree}/50"
    assert unit_agree >= 0.9 * units, f"unit verdicts agree on {unit_agree}/{units}"


# ---------------------------------------------------------------- bad input


def test_unusable_evidence_is_unattributed_and_counted_never_guessed():
    unit = {"id": "D1:3", "text": "Caroline: I went to a support group."}
    assert attribute([unit], [""], "", 0.0, problem="evidence id D9:99 names no turn") == {
        "label": "unattributed", "reason": "evidence id D9:99 names no turn", "evidence": [], "recall": None,
        "precision": None}
    assert attribute([], [], "", 0.0)["label"] == "unattributed"
    chinese = attribute([{"id": "z", "text": "卡罗琳：我昨天去了支持小组。"}], [""], "卡罗琳", 0.0)
    assert chinese["label"] == "unattributed" and "script" in chinese["reason"]
    short = attribute([{"id": "s", "text": "Yes!"}], ["Yes!"], "Yes!", 0.0)
    assert short["label"] == "unattributed" and "fewer than" in short["reason"]

    class Case:
        def __init__(self, att, category, score=0.0):
            self.attribution, self.category, self.score, self.scored = att, category, score, True
    right = attribute([unit], [unit["text"]], unit["text"], 1.0)
    x = summary([Case(chinese, "a"), Case(short, "a"), Case(right, "b", 1.0)])
    assert x["labels"]["unattributed"] == 2 and x["attributed"] == 1 and x["cases"] == 3
    assert x["recall"] == 1.0                                       # over the attributed case only
    assert x["per_category"]["a"]["recall"] is None


def test_a_task_file_gives_evidence_per_query_and_bad_shapes_are_named(tmp_path):
    q = TASK.validation[0]
    assert q.meta["evidence_text"][0]["episode"] == "e1" and "evidence_problem" not in q.meta
    bad_episode = task_from_dict({"episodes": [{"id": "e1", "text": "x"}], "test": [], "validation": [
        {"id": "q", "question": "Q?", "answer": "a", "evidence": {"text": "Maya: hi there", "episode": "e9"}}]}, "t")
    assert bad_episode.validation[0].meta["evidence_problem"] == "evidence names no episode e9"
    empty = task_from_dict({"episodes": [{"id": "e1", "text": "x"}], "test": [], "validation": [
        {"id": "q", "question": "Q?", "answer": "a", "evidence": ["  "]}]}, "t")
    assert "empty" in empty.validation[0].meta["evidence_problem"]
    from mstar.tasks import TaskError, load_task
    (tmp_path / "episodes.jsonl").write_text('{"id": "e1", "text": "Maya: I adopted a cat named Miso."}\n')
    (tmp_path / "queries.jsonl").write_text('{"question": "Cat?", "answer": "Miso", "evidence": 3}\n')
    with pytest.raises(TaskError, match=r"queries.jsonl: line 1: evidence must be a text"):
        load_task("jsonl", str(tmp_path))
    (tmp_path / "queries.jsonl").write_text('{"question": "Cat?", "answer": "Miso", "evidence": "Maya: I adopted '
                                            'a cat named Miso."}\n')
    assert load_task("jsonl", str(tmp_path)).validation[0].meta["evidence_text"][0]["text"].startswith("Maya:")


def test_an_alfworld_plan_gives_where_the_object_was_and_the_appliance():
    units, problems = plan_evidence(["go to countertop 2", "take apple 1 from countertop 2", "go to microwave 1",
                                     "heat apple 1 with microwave 1", "go to fridge 1", "put apple 1 in/on fridge 1"])
    assert [u["text"] for u in units] == ["take apple from countertop", "heat apple with microwave"] and not problems
    memory = "> take apple 2 from countertop 1\nYou pick up the apple 2.\n> heat apple 2 with microwave 1"
    att = attribute(units, [memory, memory], memory, 0.0)
    assert att["label"] == "not_used" and att["recall"] == 1.0
    assert plan_evidence(["look", "inventory"])[1]


def test_locomo_evidence_ids_become_the_turns_they_name(tmp_path):
    from mstar.tasks import load_task
    turns = [{"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo!"},
             {"speaker": "Bo", "dia_id": "D1:2", "text": "I adopted a  cat\nnamed Miso.", "blip_caption": "a cat"},
             {"speaker": "Ann", "dia_id": "D1:3", "text": "Lovely."}]
    qa = [{"question": "Cat's name?", "answer": "Miso", "category": 4, "evidence": ["D1:2"]},
          {"question": "Q2?", "answer": "x", "category": 1, "evidence": ["D1:2", "D1:9"]},
          {"question": "Q3?", "answer": "x", "category": 2, "evidence": []},
          {"question": "Q4?", "answer": "x", "category": 3, "evidence": ["D"]}]
    data = [{"sample_id": "c1", "qa": qa, "conversation": {"speaker_a": "Ann", "speaker_b": "Bo", "session_1": turns,
                                                          "session_1_date_time": "1:00 pm on 1 May, 2023"}}]
    (tmp_path / "locomo10.json").write_text(json.dumps(data))
    task = load_task("locomo", str(tmp_path / "locomo10.json"))
    meta = {q.question: q.meta for q in task.validation + task.test}
    assert meta["Cat's name?"]["evidence_text"] == [
        {"id": "D1:2", "text": "Bo: I adopted a cat named Miso. [shares a cat]", "episode": "c1/session_1"}]
    assert meta["Cat's name?"]["evidence_text"][0]["text"] in task.episodes[0].text   # the line the episode shows
    assert meta["Q2?"]["evidence_problem"] == "evidence id D1:9 names no turn"
    assert meta["Q3?"]["evidence_problem"] == "the task gives no evidence for this question"
    assert "holds no dialogue id" in meta["Q4?"]["evidence_problem"]


def test_the_sample_task_gives_the_fact_lines_and_for_a_date_the_session_line():
    from mstar.tasks import load_task
    task = load_task("sample")
    episodes = {e.id: e.text.split("\n") for e in task.episodes}
    for q in task.validation:
        units = q.meta["evidence_text"]
        assert units and "evidence_problem" not in q.meta
        assert all(u["text"] in episodes[u["episode"]] for u in units)
        assert any(u["id"].endswith(":0") for u in units) == (q.category == "temporal")


@given(st.lists(st.sampled_from("abcdefg"), min_size=1, max_size=8),
       st.lists(st.sampled_from("abcdefghij"), max_size=60), st.integers(1, 20))
def test_the_sliding_overlap_is_the_best_window(unit, text, size):
    share, span = overlap(unit, text, size)
    need = set(unit)
    width = min(size, len(text))
    brute = max((len(need & set(text[i:i + width])) for i in range(len(text) - width + 1)), default=0) / len(need)
    assert share == pytest.approx(brute if text else 0.0)
    if text:
        assert len(need & set(text[span.start:span.stop])) / len(need) == pytest.approx(share)

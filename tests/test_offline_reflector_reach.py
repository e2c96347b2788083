"""The offline reflector's reach edits (mstar/offline/reach_mutations.py, issue 18): speaker index,
two-hop "the person who ..." resolution, newest-first ties, evidence spread over sessions, one
chroma query per named entity -- and the two answerer rules multi-hop questions need
(a relative "who" asks for no name; "before joining X" contrasts the answer with X).

Each edit must apply to the seeds and to the children the other mutations make, keep the program
within the contract (the sandbox's gates: one toolkit LLM call per op, read() <= 3000 chars,
allowed imports), and -- run for real in the sandbox with the offline toolkit and task models on
a small constructed conversation -- move the answer (or the evidence) it targets the right way.
"""
from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mstar.offline import source_edits as se
from mstar.offline.mutations import CATALOGUE, SIGNALS, TUNING
from mstar.offline.question_kinds import contrast_entity, question_kind
from mstar.offline.reach_mutations import wrap_read_returns
from mstar.offline.reflector_model import (Case, candidate_pool, case_signals, choose_edit, edit_odds,
                                           parse_lineage)
from mstar.offline.task_model import answer, fill_from_question, fill_from_text
from mstar.offline.toolkit_model import OfflineToolkitModel
from sandbox.contract import DEFAULT_ALLOWED_IMPORTS
from sandbox.engine.gates import run_gates
from sandbox.engine.session import ProgramSession, SandboxLimits
from sandbox.worker.static_gate import check_source

SEEDS_DIR = Path(__file__).resolve().parents[1] / "seeds"
SEEDS = {name: (SEEDS_DIR / f"{name}.py").read_text() for name in
         ("vector_search", "llm_summarizer", "experience_learner")}
BY_NAME = {m.name: m for m in CATALOGUE}
REACH = ("speaker_index", "bridge_person", "newest_first", "spread_sessions", "entity_queries", "drop_captions")
LIMITS = SandboxLimits(call_timeout_s=20.0)

# Children the other mutations typically make (seed, mutations in order).
CHILDREN = {
    "vs_turns_rerank": ("vector_search", ("split_turns", "keyword_rerank")),
    "vs_dates_rerank_topk": ("vector_search", ("date_stamp", "keyword_rerank", "top_k_up")),
    "summarizer_turns_ranked": ("llm_summarizer", ("store_turns_in_list", "rank_stored_lists", "context_cap_up")),
    "learner_raw_turns": ("experience_learner", ("store_raw_turns",)),
    "learner_ranked_dated": ("experience_learner", ("add_date_field", "rank_stored_lists", "list_cap_up")),
}
# Which seeds each edit applies to (entity_queries needs a chroma query).
APPLIES_TO_SEEDS = {name: set(SEEDS) for name in REACH}
APPLIES_TO_SEEDS["entity_queries"] = {"vector_search"}
APPLIES_TO_SEEDS["drop_captions"] = {"vector_search", "llm_summarizer"}   # the learner stores no raw text


def build(seed: str, *names: str) -> str:
    source = SEEDS[seed]
    for name in names:
        edit = BY_NAME[name].apply(source, random.Random(0))
        assert edit is not None and edit.source != source, (seed, names, name)
        source = edit.source
    return source


def child(name: str) -> str:
    seed, names = CHILDREN[name]
    return build(seed, *names)


def check_edit(name: str, source: str) -> str:
    mutation = BY_NAME[name]
    assert mutation.applies(source), name
    edit = mutation.apply(source, random.Random(3))
    assert edit is not None and edit.source != source
    assert se.parses(edit.source) and not check_source(edit.source), check_source(edit.source)
    assert edit.title.split(":")[0] == mutation.key       # lineage lines recognise it by the key
    assert not mutation.applies(edit.source)               # recognises its own edit
    return edit.source


# ---------------------------------------------------------------- where they apply

def test_reach_edits_are_registered_with_tuning_and_signals():
    for name in REACH:
        assert name in BY_NAME and name in TUNING
        assert set(TUNING[name][1]) <= set(SIGNALS)


@pytest.mark.parametrize("name", REACH)
@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_reach_edit_applies_to_the_seeds(name, seed):
    if seed not in APPLIES_TO_SEEDS[name]:
        assert not BY_NAME[name].applies(SEEDS[seed])
        return
    check_edit(name, SEEDS[seed])


@pytest.mark.parametrize("name", REACH)
@pytest.mark.parametrize("kid", sorted(CHILDREN))
def test_reach_edit_applies_to_typical_children(name, kid):
    source = child(kid)
    if (name == "entity_queries" and CHILDREN[kid][0] != "vector_search") or \
            (name == "drop_captions" and kid == "learner_ranked_dated"):   # no chroma / no raw text kept
        assert not BY_NAME[name].applies(source)
        return
    check_edit(name, source)


def test_reach_edits_compose_in_either_order_and_recognise_themselves():
    for order in (REACH, tuple(reversed(REACH))):
        source = SEEDS["vector_search"]
        for name in order:
            source = check_edit(name, source)
        for name in REACH:
            # newest_first may come back: a later speaker index brings a ranking of its own
            assert not BY_NAME[name].applies(source) or name == "newest_first", name
        # The bridge stays the outermost wrapper of read()'s result: when it resolves a person,
        # its answer replaces everything else.
        returns = [l.strip() for l in se.method_text(source, "read").split("\n") if l.strip().startswith("return self.")]
        assert returns and all(r.startswith("return self.bridge_evidence(") for r in returns), returns


def test_wrapping_read_returns_leaves_constant_returns_alone():
    wrapped = wrap_read_returns(SEEDS["experience_learner"], "with_entity_evidence", "query.query_text")
    assert 'return "No information stored."' in wrapped
    assert "return self.with_entity_evidence(query.query_text, f\"Lessons:" in wrapped
    assert wrap_read_returns(wrapped, "with_entity_evidence", "query.query_text") is None


def _gate(source: str):
    return run_gates(source, allowed_imports=DEFAULT_ALLOWED_IMPORTS, limits=LIMITS,
                     llm=OfflineToolkitModel().complete)


def test_edited_programs_pass_the_gates_with_one_llm_call_per_op():
    programs = {f"{name}@{seed}": BY_NAME[name].apply(SEEDS[seed], random.Random(0)).source
                for name in REACH for seed in sorted(APPLIES_TO_SEEDS[name])}
    programs["all@vs_turns_rerank"] = child("vs_turns_rerank")
    for name in REACH:
        programs["all@vs_turns_rerank"] = BY_NAME[name].apply(programs["all@vs_turns_rerank"], random.Random(0)).source
    programs["si+nf+br@summarizer_turns_ranked"] = build("llm_summarizer", *CHILDREN["summarizer_turns_ranked"][1],
                                                          "speaker_index", "newest_first", "bridge_person")
    with ThreadPoolExecutor(max_workers=4) as pool:
        reports = dict(zip(programs, pool.map(_gate, programs.values())))
    for label, report in reports.items():
        assert report.ok, (label, report.error)
        windows = [c["window"] for c in report.llm_calls]
        assert all(windows.count(w) == 1 for w in windows), (label, windows)


# ---------------------------------------------------------------- they move what they target

S1 = ("[10:00 am on 3 March, 2023] Session 1 — Ines and Oisin\n"
      "Ines: My flatmate is Horace, who sings in the shower every morning.\n"
      "Oisin: Yesterday I finished running the Ridgeway Half Marathon with my cousin Ulrich!\n"
      "Ines: Oisin, you and your marathons. I have lived in Riga for years now.\n"
      "Oisin: It reminds me of growing up in Wickcombe, where everyone knew everyone.\n"
      "Ines: I work at Larchmont Robotics, the people there are lovely.")
S2 = ("[4:00 pm on 9 June, 2023] Session 2 — Ines and Oisin\n"
      "Ines: I have a new flatmate: my flatmate is Brigid now.\n"
      "Oisin: My brother Magnus is staying with me for a few days.\n"
      "Ines: We moved house: I live in Bilbao now.\n"
      "Oisin: Ines, did the Bilbao flat come with a garden?")


def run(source: str, episodes: list[str], question: str) -> tuple[str, str]:
    """(read() output, offline answer) after writing the episodes, all in the real sandbox."""
    with ProgramSession(source, allowed_imports=DEFAULT_ALLOWED_IMPORTS, limits=LIMITS,
                        llm=OfflineToolkitModel().complete) as session:
        info = session.start()
        for episode in episodes:
            session.write(fill_from_text(info.knowledge_item_schema, episode), episode)
        out = session.read(fill_from_question(info.query_schema, question)).output
    consts = info.constants
    return out, answer((consts["ALWAYS_ON_KNOWLEDGE"] + "\n" + out).strip(), question,
                       consts["INSTRUCTION_RESPONSE"])


def test_newest_first_answers_what_holds_now():
    q = "Who is Ines's flatmate now?"
    parent = build("llm_summarizer", "store_turns_in_list", "rank_stored_lists")
    assert run(parent, [S1, S2], q)[1] == "Horace"
    assert run(build("llm_summarizer", "store_turns_in_list", "rank_stored_lists", "newest_first"),
               [S1, S2], q)[1] == "Brigid"


def test_bridge_resolves_the_person_before_answering():
    q = "What is the name of the brother of the person who ran the Ridgeway Half Marathon?"
    assert run(SEEDS["vector_search"], [S1, S2], q)[1] != "Magnus"
    out, got = run(build("vector_search", "bridge_person"), [S1, S2], q)
    assert got == "Magnus" and "Ridgeway" not in out     # the first hop's own turn is left out
    # A question without such a clause reads as before.
    q2 = "Where does Ines work?"
    assert run(build("vector_search", "bridge_person"), [S1, S2], q2)[0] == run(SEEDS["vector_search"], [S1, S2], q2)[0]


def test_speaker_index_answers_from_the_named_persons_own_turns():
    q = "Where did Oisin grow up?"
    assert run(SEEDS["experience_learner"], [S1, S2], q)[1] != "Wickcombe"
    out, got = run(build("experience_learner", "speaker_index"), [S1, S2], q)
    assert got == "Wickcombe" and out.startswith("[10:00 am on 3 March, 2023] Oisin:")


def test_spread_sessions_brings_evidence_from_a_second_session():
    s1 = "[10:00 am on 3 March, 2023] Session 1 — Maya and Tom\n" + "\n".join(
        f"Maya: My pets? Rex the dog does have a lot of energy, shoe number {i} is gone." for i in range(30))
    s2 = "[4:00 pm on 9 June, 2023] Session 2 — Maya and Tom\nMaya: We adopted Tigger, so our pets are a dog and a cat."
    q = "What pets does Maya have?"
    parent = child("vs_turns_rerank")
    assert "Tigger" not in run(parent, [s1, s2], q)[0]
    assert "Tigger" in run(BY_NAME["spread_sessions"].apply(parent, random.Random(0)).source, [s1, s2], q)[0]


def test_entity_queries_retrieve_for_every_named_person():
    episodes = [f"[1:00 pm on {d} May, 2023] Session {d} — Ines and Tom\nInes: Ines here, I visited Porto "
                f"with my sister {n}, and Ines loved the food." for d, n in zip(range(1, 8), "Ana Bea Cai Dee Eva Fay Gus".split())]
    episodes.append("[1:00 pm on 20 May, 2023] Session 20 — Oisin and Tom\nOisin: Last month I visited Lyon.")
    q = "Which cities did Ines and Oisin visit?"
    assert "Lyon" not in run(SEEDS["vector_search"], episodes, q)[0]
    assert "Lyon" in run(build("vector_search", "entity_queries"), episodes, q)[0]


def test_drop_captions_answers_from_what_was_said():
    episode = ("[3:00 pm on 3 July, 2023] Session 4 — Audrey and Andrew\n"
               "Audrey: I made chicken pot pie again, the family favorite. [shares a photo of a golden pie "
               "on a kitchen table]\n"
               "Andrew: Looks tasty, I will try it.")
    q = "What pie did Audrey make for her family on the kitchen table?"
    parent = child("vs_turns_rerank")
    before = run(parent, [episode], q)
    after = run(BY_NAME["drop_captions"].apply(parent, random.Random(0)).source, [episode], q)
    assert "photo" in before[0] and "photo" not in after[0] and "Andrew: Looks tasty" in after[0]
    assert "chicken" not in before[1].lower() and "chicken pot pie" in after[1].lower()
    assert "caption_answer" in case_signals(Case(q, "chicken pot pie", before[1], before[0]))
    assert "caption_answer" not in case_signals(Case(q, "chicken pot pie", after[1], after[0]))


def test_evidence_only_leaves_other_peoples_turns_out():
    # Oisin's Lyon turn shares "visit" with the question; Ines's own turn is the answer.
    episodes = [S1 + "\nOisin: I visited Lyon and the food there was the best I have had."]
    q = "Which city did Ines say she has lived in for years?"
    parent = build("vector_search", "speaker_index")
    assert not BY_NAME["evidence_only"].applies(SEEDS["vector_search"])   # needs the speaker index
    out_before, _ = run(parent, episodes, q)
    out_after, got = run(check_edit("evidence_only", parent), episodes, q)
    assert "Lyon" in out_before and "Oisin:" in out_before
    assert "Oisin:" not in out_after and out_after.startswith("[10:00 am on 3 March, 2023] Ines:") and got == "Riga"
    # A question naming nobody indexed reads as before.
    q2 = "Which city has the best food?"
    assert run(check_edit("evidence_only", parent), episodes, q2)[0] == run(parent, episodes, q2)[0]


# ---------------------------------------------------------------- the answerer's multi-hop rules

def test_a_relative_who_does_not_make_a_name_question():
    assert question_kind("What instrument is the person who visited Krakow learning to play?") == "thing"
    assert question_kind("Where did the person who got engaged to Lucinda grow up?") == "place"
    assert question_kind("Who is Jill?") == "name" and question_kind("With whom did Maya go hiking?") == "name"
    memory = ("Ayesha: I have started learning to play the double bass.\n"
              "Ayesha: I joined a local hockey team: I play for the Southbank Pilots now.")
    assert answer(memory, "What instrument is the person who visited Krakow learning to play?", "") == "double bass"


def test_a_contrasted_name_points_the_answer_elsewhere():
    assert contrast_entity("Where did Ines work before joining Greywater Analytics?") == "Greywater Analytics"
    assert contrast_entity("Which team did Mateo play for before the Quayside Wolves?") == "Quayside Wolves"
    assert contrast_entity("What did John do the week before August 3, 2023?") is None
    assert contrast_entity("How long did John practice chess before winning the tournament?") is None
    memory = ("[2:40 pm on 22 April, 2023] Ines: I started a new job: I work at Greywater Analytics now. "
              "Yesterday I finished the Kestrel Bay Night Ten!\n"
              "[8:40 am on 9 October, 2022] Ines: I work at Larchmont Robotics, the people there are lovely.")
    assert answer(memory, "Where did Ines work before joining Greywater Analytics?", "") == "Larchmont Robotics"


# ---------------------------------------------------------------- the reflector picks them for their failures

def _odds(source: str, case: Case, lineage: list | None = None) -> dict[str, float]:
    """The exact probability of each edit in one reflection (no sampling: nothing flaky)."""
    pool, inert = candidate_pool(source, lineage or [])
    return dict(zip((m.name for m in pool), edit_odds(pool, case_signals(case), inert)))


def test_failure_signals_of_multi_hop_and_updated_questions():
    bridge = Case("What is the name of the brother of the person who ran the Ridgeway Half Marathon?",
                  "Magnus", "Fitz", "Mateo: I ran the Ridgeway Half Marathon with my grandad Fitz.")
    now = Case("Who is Ines's flatmate now?", "Brigid", "Horace", "Ines: My flatmate is Horace.")
    listed = Case("What instruments does Melanie play?", "clarinet and violin", "piano", "Caroline: I play piano.")
    assert "bridge" in case_signals(bridge)
    assert {"now_question", "names_person"} <= case_signals(now)
    assert {"list_answer", "names_person"} <= case_signals(listed)
    assert "list_answer" not in case_signals(Case("When was it?", "2 April, 2024", "May", "x"))


PLAIN = Case("What did Ines bake?", "bread", "bread", "Ines: I baked bread.")
BRIDGE = Case("What is the name of the brother of the person who ran the Ridgeway Half Marathon?",
              "Magnus", "Fitz", "Mateo: I ran the Ridgeway Half Marathon with my grandad Fitz.")
NOW = Case("Who is Ines's flatmate now?", "Brigid", "Horace", "Ines: My flatmate is Horace.")


@pytest.mark.parametrize("kid", ["vs_turns_rerank", "summarizer_turns_ranked"])
def test_the_reflector_reaches_for_the_edit_the_failures_call_for(kid):
    source = child(kid)
    plain, bridge, now = (_odds(source, c) for c in (PLAIN, BRIDGE, NOW))
    assert abs(sum(plain.values()) - 1) < 1e-9 and abs(sum(now.values()) - 1) < 1e-9
    # The one edit meant for a failure the cases show is among the likeliest, several times as
    # likely as for a case without that failure -- even beside "not retrieved", which many
    # edits claim, and "names a person", which the speaker index claims.
    assert bridge["bridge_person"] >= 0.25 and bridge["bridge_person"] > 5 * plain["bridge_person"]
    assert now["newest_first"] >= 0.2 and now["newest_first"] > 4 * plain["newest_first"]
    assert now["newest_first"] > max(p for name, p in now.items() if name not in ("newest_first", "speaker_index"))


def test_a_failure_seen_in_more_cases_is_likelier_to_be_addressed():
    source = child("vs_turns_rerank")
    pool, inert = candidate_pool(source, [])
    one = dict(zip((m.name for m in pool), edit_odds(pool, {"now_question": 1, "list_answer": 1}, inert)))
    three = dict(zip((m.name for m in pool), edit_odds(pool, {"now_question": 3, "list_answer": 1}, inert)))
    assert three["newest_first"] > one["newest_first"] and three["spread_sessions"] < one["spread_sessions"]


def test_the_drawn_edit_follows_the_odds():
    # choose_edit draws with edit_odds: over many reflections the share of the favoured edit
    # is near its probability (fixed seeds, so not flaky; the band is ~2.5 sd of 150 draws).
    source = child("vs_turns_rerank")
    few = [BY_NAME[n] for n in ("newest_first", "speaker_index", "top_k_up", "answer_cap_down", "spread_sessions")]
    pool, inert = candidate_pool(source, [], few)
    p = dict(zip((m.name for m in pool), edit_odds(pool, case_signals(NOW), inert)))["newest_first"]
    hits = sum(choose_edit(source, random.Random(seed), case_signals(NOW), [], few)[0].name == "newest_first"
               for seed in range(150))
    assert 0.2 < p < 0.8 and abs(hits / 150 - p) < 0.12


def test_a_change_that_left_an_ancestor_unchanged_is_drawn_less_often():
    source = SEEDS["vector_search"]
    plain = Case("What did Ines bake?", "bread", "a loaf", "Ines: I baked bread.")
    inert = parse_lineage("- [ancestor] iter_001: Index turns by speaker: x (score 0.026, \u0394 +0.000)")
    moved = parse_lineage("- [ancestor] iter_001: Index turns by speaker: x (score 0.046, \u0394 +0.020)")
    assert inert[0].inert and not moved[0].inert
    assert _odds(source, plain, inert)["speaker_index"] < 0.75 * _odds(source, plain, moved)["speaker_index"]


# ---------------------------------------------------------------- listing every matching item

LISTED = Case("What instruments does Melanie play?", "clarinet and violin", "clarinet",
              "Melanie: I play clarinet.")


@pytest.mark.parametrize("kid", ["vs_turns_rerank", "summarizer_turns_ranked", "learner_raw_turns"])
def test_list_answers_call_for_the_list_instruction(kid):
    source = child(kid)
    listed, plain = _odds(source, LISTED), _odds(source, PLAIN)
    assert "list_answer" in case_signals(LISTED) and "list_answer" not in case_signals(PLAIN)
    # Exact odds: the instruction edit is the likeliest answer to a list failure, and many
    # times likelier than without one (its weight is small: offline it rarely changes an answer).
    assert listed["list_items"] >= 0.4 and listed["list_items"] > 10 * plain["list_items"]
    assert listed["list_items"] == max(listed.values())


def test_the_list_instruction_makes_the_answerer_list_and_survives_later_rewrites():
    source = SEEDS["vector_search"]
    with_list = check_edit("list_items", source)
    response = se.constant_value(with_list, "INSTRUCTION_RESPONSE")
    memory = "Melanie: I play clarinet in the town band.\nMelanie: I also play violin at church."
    assert answer(memory, LISTED.question, response) == "clarinet in the town band, violin at church"
    assert answer(memory, LISTED.question, se.constant_value(source, "INSTRUCTION_RESPONSE")) == \
        "clarinet in the town band"
    # A later cap or relative-date rewrite rebuilds the instruction and keeps the list sentence.
    for later in ("answer_cap_down", "relative_dates_on"):
        edit = BY_NAME[later].apply(with_list, random.Random(0))
        assert "list every matching item" in se.constant_value(edit.source, "INSTRUCTION_RESPONSE")
        assert not BY_NAME["list_items"].applies(edit.source)

"""What the offline reflector reads off failing cases beyond the answer itself (issue 18):
retrieved text cluttered with photo captions, and when-questions whose evidence dates the event
relative to the day it was told ("last year") -- and that each signal makes the edit meant for
it likelier, in exact odds (no sampling).
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from mstar.offline import reflector_model, signals
from mstar.offline import source_edits as se
from mstar.offline.mutations import CATALOGUE, SALIENCE, SIGNALS, TUNING
from mstar.offline.reflector_model import Case, candidate_pool, case_signals, edit_odds
from mstar.offline.task_model import answer

SEEDS_DIR = Path(__file__).resolve().parents[1] / "seeds"
SUMMARIZER = (SEEDS_DIR / "llm_summarizer.py").read_text()
BY_NAME = {m.name: m for m in CATALOGUE}

TOLD = "[1:56 pm on 8 May, 2023] Melanie: I painted that lake sunrise last year, it hangs in my kitchen."
WHEN = "When did Melanie paint a sunrise?"
RELATIVE = Case(WHEN, "2022", "8 May, 2023", TOLD)
ABSOLUTE = Case(WHEN, "2022", "8 May, 2023", TOLD.replace(" last year", ""))
CLUTTERED = Case("What did Melanie paint?", "a lake sunrise", "a sunrise",
                 "[8 May, 2023] Melanie: Look what I finished! [shares a photo of a lake at dawn]\n"
                 "[8 May, 2023] Caroline: Lovely. [shares a photo of her dog on a beach]")


def with_speaker_index(source: str) -> str:
    return BY_NAME["speaker_index"].apply(source, random.Random(0)).source


def odds(source: str, case: Case) -> dict[str, float]:
    pool, inert = candidate_pool(source, [])
    return dict(zip((m.name for m in pool), edit_odds(pool, case_signals(case), inert)))


def test_the_new_signals_are_declared_and_boost_one_edit_each():
    assert {"caption_clutter", "relative_when"} <= set(SIGNALS) and set(SALIENCE) <= set(SIGNALS)
    assert [n for n, (_, boosts) in TUNING.items() if boosts.get("relative_when", 1) > 1] == ["relative_dates_on"]
    assert [n for n, (_, boosts) in TUNING.items() if boosts.get("caption_clutter", 1) > 1] == ["drop_captions"]


def test_relative_when_fires_on_evidence_told_relative_to_its_day():
    assert "relative_when" in case_signals(RELATIVE)
    assert "relative_when" not in case_signals(ABSOLUTE)                 # no relative phrase
    assert "relative_when" not in case_signals(Case("What did Melanie paint?", "a sunrise", "a lake", TOLD))
    # The phrase must be on a line about the question, and the answer must not already be relative.
    elsewhere = ABSOLUTE.retrieved + "\n[8 May, 2023] Jon: I quit my job last week."
    assert "relative_when" not in case_signals(Case(WHEN, "2022", "8 May, 2023", elsewhere))
    assert "relative_when" not in case_signals(Case(WHEN, "2022", "last year", TOLD))


def test_the_relative_date_edit_fixes_what_the_signal_points_at():
    parent = with_speaker_index(SUMMARIZER)
    child = BY_NAME["relative_dates_on"].apply(parent, random.Random(0)).source
    assert answer(TOLD, WHEN, se.constant_value(parent, "INSTRUCTION_RESPONSE")) == "8 May, 2023"
    assert answer(TOLD, WHEN, se.constant_value(child, "INSTRUCTION_RESPONSE")) == "2022"


@pytest.mark.parametrize("indexed", [False, True])
def test_a_relative_date_failure_makes_the_relative_date_edit_the_likeliest(indexed):
    source = with_speaker_index(SUMMARIZER) if indexed else SUMMARIZER
    relative, absolute = odds(source, RELATIVE), odds(source, ABSOLUTE)
    assert relative["relative_dates_on"] == max(relative.values()) and relative["relative_dates_on"] > 0.4
    assert relative["relative_dates_on"] > 20 * absolute["relative_dates_on"]


def test_salience_weighs_a_signal_when_the_failure_to_fix_is_picked(monkeypatch):
    source = with_speaker_index(SUMMARIZER)
    salient = odds(source, RELATIVE)["relative_dates_on"]
    monkeypatch.setattr(reflector_model, "SALIENCE", {})
    plain = odds(source, RELATIVE)["relative_dates_on"]
    assert salient > 1.5 * plain


def test_caption_clutter_fires_on_several_captions_and_calls_for_dropping_them():
    assert "caption_clutter" in case_signals(CLUTTERED)
    one = Case(CLUTTERED.question, CLUTTERED.expected, CLUTTERED.answer, CLUTTERED.retrieved.split("\n")[0])
    assert "caption_clutter" not in case_signals(one)
    assert "caption_clutter" not in case_signals(ABSOLUTE)
    clean = Case(CLUTTERED.question, CLUTTERED.expected, CLUTTERED.answer,
                 signals._CAPTION_RE.sub("", CLUTTERED.retrieved))
    assert not {"caption_clutter", "caption_answer"} & case_signals(clean)
    source = with_speaker_index(SUMMARIZER)
    cluttered, plain = odds(source, CLUTTERED), odds(source, clean)
    assert cluttered["drop_captions"] > 10 * plain["drop_captions"]
    # Background, not a diagnosis: on a seed without the speaker index, clutter alone (no caption
    # quoted) leaves the speaker index the likelier edit.
    quoted_nothing = Case(CLUTTERED.question, CLUTTERED.expected, "Lovely", CLUTTERED.retrieved)
    seed = odds(SUMMARIZER, quoted_nothing)
    assert case_signals(quoted_nothing) == {"caption_clutter", "names_person"}
    assert seed["speaker_index"] > seed["drop_captions"] > odds(SUMMARIZER, clean)["drop_captions"]


def test_a_relative_date_failure_argues_against_switching_relative_dates_off():
    # A boost below 1 is a penalty: with "last year" in the evidence the reflector does not stop
    # converting relative dates (it would toggle them off and on again down a lineage).
    on = BY_NAME["relative_dates_on"].apply(with_speaker_index(SUMMARIZER), random.Random(0)).source
    assert odds(on, RELATIVE)["relative_dates_off"] < 0.2 * odds(on, ABSOLUTE)["relative_dates_off"]


def test_a_change_an_ancestor_made_is_not_made_again_from_the_same_state():
    # On, off, and the cases call for "on" again: that would rebuild the grandparent.
    on = BY_NAME["relative_dates_on"].apply(SUMMARIZER, random.Random(0))
    off = BY_NAME["relative_dates_off"].apply(on.source, random.Random(0))
    lineage = reflector_model.parse_lineage(f"- [ancestor] iter_001: {on.title} (score 0.1, \u0394 +0.001)\n"
                                            f"- [current] iter_002: {off.title} (score 0.1, \u0394 +0.000)")
    few = [BY_NAME["relative_dates_on"], BY_NAME["answer_cap_down"]]
    drawn = {reflector_model.choose_edit(off.source, random.Random(s), case_signals(RELATIVE), lineage, few)[0].name
             for s in range(20)}
    assert drawn == {"answer_cap_down"}
    fresh = {reflector_model.choose_edit(off.source, random.Random(s), case_signals(RELATIVE), [], few)[0].name
             for s in range(20)}
    assert "relative_dates_on" in fresh

"""The offline answerer's list directive (mstar/offline/answer_list.py): off by default, so every
answer stays what it was; on, a question asking for several things gets the items of several
sentences, bounded and deterministic."""
from __future__ import annotations

from mstar.offline.answer_list import LIST_ITEMS, asks_for_several
from mstar.offline.instruction_mutations import RESPONSE_LIST
from mstar.offline.task_model import answer, is_directive, read_directives

MEMORY = ("[1 May, 2023]\nMelanie: I play clarinet in the town band.\nCaroline: Nice!\n"
          "[8 June, 2023]\nMelanie: I also play violin at church on Sundays.\n"
          "Caroline: I play piano sometimes.")
QUESTION = "What instruments does Melanie play?"


def test_questions_that_ask_for_several_things():
    for q in (QUESTION, "Which cities has Jon visited?", "What kind of hobbies does Evan pursue?",
              "What are the names of Audrey's dogs?", "What are some foods that Audrey likes?",
              "Where has Melanie camped?", "What European countries has Maria been to?"):
        assert asks_for_several(q), q
    for q in ("What fuels Calvin's soul?", "What is Evan's favorite food?", "What does Calvin do to relax?",
              "Where did Caroline move from?", "How many dogs does Andrew have?", "When did Evan go skiing?"):
        assert not asks_for_several(q), q


def test_the_directive_is_read_and_never_quoted():
    assert read_directives(RESPONSE_LIST).list_all and is_directive(RESPONSE_LIST)
    assert read_directives("List every matching item.").list_all
    assert not read_directives("Answer in at most 8 words.").list_all
    assert not read_directives("Do not list every matching item; give the best one.").list_all
    # A dialogue turn about lists is neither a directive nor hidden from the answerer.
    for turn in ("Melanie: I'll list all my plans for the summer.", "Caroline: my list of every book I read"):
        assert not read_directives(turn).list_all and not is_directive(turn)


def test_without_the_directive_the_answer_is_one_span():
    assert answer(MEMORY, QUESTION, "Be short.") == "clarinet in the town band"


def test_with_the_directive_several_sentences_give_items():
    listed = answer(MEMORY, QUESTION, "Be short. " + RESPONSE_LIST)
    assert listed == "clarinet in the town band, violin at church"
    assert answer(MEMORY, QUESTION, RESPONSE_LIST) == listed            # deterministic
    # The same directive stated in ALWAYS_ON_KNOWLEDGE (shown inside the memory) works alike,
    # and its sentence is not offered as an item.
    assert answer(RESPONSE_LIST + "\n" + MEMORY, QUESTION, "Be short.") == listed


def test_the_directive_leaves_other_questions_alone():
    for q in ("What did Melanie play at church?", "When did Melanie play violin at church?"):
        assert answer(MEMORY, q, RESPONSE_LIST) == answer(MEMORY, q, "")


def test_lists_are_bounded():
    turns = "\n".join(f"Nadia: I play instrument number {w} at the weekend club."
                      for w in ("oboe", "cello", "harp", "lute", "sitar", "banjo", "tuba", "viola"))
    listed = answer("[3 March, 2024]\n" + turns, "What instruments does Nadia play at the club?", RESPONSE_LIST)
    items = listed.split(", ")
    assert 2 <= len(items) <= LIST_ITEMS and all(len(i.split()) <= 8 for i in items)
    assert len(set(items)) == len(items)

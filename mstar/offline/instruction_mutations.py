"""Instruction rewrites for the offline reflector (the "prompt optimisation" half of M*).

The texts are written in the directive phrases the offline task model obeys (see the
docstring of mstar/offline/task_model.py): a word cap ("at most N words"), the session-date
rule for when-questions, and converting relative dates. A real LLM reads them as ordinary
advice too. ALWAYS_ON_KNOWLEDGE is shown to the answerer inside the retrieved memory, so every
sentence written there must be a recognised directive -- otherwise the offline answerer could
quote it as an answer (tests check this with task_model.is_directive).

The response instruction is rebuilt from a small state (word cap, relative dates on/off, list
every matching item on/off) read back from the current text with the task model's own parser,
so rewrites compose: a later round can shorten the cap again or switch relative dates off, and
the list sentence survives both.
"""
from __future__ import annotations

import random

from mstar.offline import source_edits as se
from mstar.offline.mutation_types import Edit, Mutation
from mstar.offline.task_model import SHORT_CAP, read_directives

ANSWER_CAP_LADDER = (3, 4, 5, 6, 8, 10, 12, 15, 20, 30)

RESPONSE_CAP = ("Answer in at most {n} words, taken from the retrieved memory: just the name, thing, "
                "place or date asked for.")
RESPONSE_WHEN = "Answer when-questions with the session date of the memory line that mentions the event."
RESPONSE_RELATIVE = ("Convert relative dates such as yesterday or last week into dates counted from "
                     "that session date.")
# Questions like "What instruments does Melanie play?" want every item, told in several sessions;
# the offline answerer then joins the matching spans (mstar/offline/answer_list.py).
RESPONSE_LIST = ("When the question asks for several things, list every matching item from the "
                 "memory, each in a few words, separated by commas.")

# Every sentence here is a directive (see module docstring).
ALWAYS_ON_TEXTS = (
    "Dates in brackets are session dates: answer when-questions with the session date of the line "
    "that mentions the event.",
    "Convert relative dates such as yesterday or last week into dates counted from the session date "
    "in brackets.",
    "Keep every answer to at most 6 words.",
    "",
)

QUERY_TEXTS = (
    "Write the search query as the names, things, places and events the question asks about; leave "
    "out question words.",
    "Restate the question as a short search query that keeps every name and specific detail.",
)

ITEM_TEXTS = (
    "Write down who did what, where and when, keeping names and dates exactly as in the text.",
    "Record the concrete facts of the text -- people, events, places, dates and plans -- in short "
    "sentences that make sense on their own.",
)


def _response_state(source: str) -> tuple[int, bool, bool] | None:
    response = se.constant_value(source, "INSTRUCTION_RESPONSE")
    always = se.constant_value(source, "ALWAYS_ON_KNOWLEDGE")
    if response is None or always is None:
        return None
    # The answerer reads ALWAYS_ON first and the instruction last; the instruction wins.
    both = read_directives(always, response)
    # Listing counts from either text: ALWAYS_ON saying it already makes the answerer list.
    return both.max_words or SHORT_CAP, read_directives(response).relative_dates, both.list_all


def _response_text(cap: int, relative: bool, listing: bool = False) -> str:
    parts = [RESPONSE_CAP.format(n=cap), RESPONSE_WHEN] + ([RESPONSE_RELATIVE] if relative else [])
    return " ".join(parts + ([RESPONSE_LIST] if listing else []))


def _rewrite(source: str, name: str, value: str, why: str) -> str:
    new = se.replace_constant(source, name, value)
    lines = new.split("\n")
    se.set_comment_above(lines, se.constant_span(new, name)[0], name, why)
    return "\n".join(lines)


def _cap_move(up: bool):
    def apply(source: str, rng: random.Random) -> Edit | None:
        state = _response_state(source)
        if state is None:
            return None
        cap, relative, listing = state
        ladder = [n for n in ANSWER_CAP_LADDER if (n > cap if up else n < cap)]
        if not ladder:
            return None
        rungs = rng.choice((1, 1, 2))
        new_cap = ladder[min(rungs, len(ladder)) - 1] if up else ladder[-min(rungs, len(ladder))]
        why = ("answers were cut short of the expected detail" if up
               else "answers ran longer than the expected ones, and extra words cost precision")
        new = _rewrite(source, "INSTRUCTION_RESPONSE", _response_text(new_cap, relative, listing),
                       f"word cap {cap} -> {new_cap}; {why}")
        verb = "Lengthen" if up else "Shorten"
        return Edit(new, f"{verb} answers: at most {new_cap} words (was {cap})",
                    f"Token-F1 scoring rewards answers of the expected length; {why}.",
                    f"INSTRUCTION_RESPONSE now asks for at most {new_cap} words and dates for when-questions.")
    return apply


def _relative(on: bool):
    def apply(source: str, rng: random.Random) -> Edit | None:
        state = _response_state(source)
        if state is None or state[1] == on:
            return None
        why = ("events told as 'yesterday' or 'last week' were answered with the wrong day" if on
               else "converted relative dates did not match the expected answers")
        new = _rewrite(source, "INSTRUCTION_RESPONSE", _response_text(state[0], on, state[2]), why)
        title = ("Resolve relative dates against the session date" if on
                 else "Stop converting relative dates")
        return Edit(new, title, f"When-questions: {why}.",
                    "INSTRUCTION_RESPONSE " + ("now asks" if on else "no longer asks")
                    + " to turn relative dates into dates counted from the session date.")
    return apply


def _list_items(source: str, rng: random.Random) -> Edit | None:
    state = _response_state(source)
    if state is None or state[2]:
        return None
    why = "questions that ask for several things got one item, while the expected answer lists them all"
    new = _rewrite(source, "INSTRUCTION_RESPONSE", _response_text(state[0], state[1], True), why)
    return Edit(new, "List every matching item: questions ask for several things",
                f"{why[0].upper()}{why[1:]} (told across several sessions).",
                "INSTRUCTION_RESPONSE now asks to list every matching item, separated by commas, "
                "when the question asks for several things.")


def _pick_text(name: str, texts: tuple[str, ...], title: str, why: str):
    def apply(source: str, rng: random.Random) -> Edit | None:
        current = se.constant_value(source, name)
        options = [t for t in texts if t != current]
        if current is None or not options:
            return None
        text = rng.choice(options)
        new = _rewrite(source, name, text, why)
        shown = (text[:60] + "...") if len(text) > 60 else (text or "(empty)")
        return Edit(new, f"{title}: {shown}", f"{why[0].upper()}{why[1:]}.",
                    f"{name} rewritten to: {text or '(empty)'}")
    return apply


def _applies(apply):
    def applies(source: str) -> bool:
        edit = apply(source, random.Random(0))
        return edit is not None and edit.source != source and se.parses(edit.source)
    return applies


def _mutation(name: str, key: str, apply) -> Mutation:
    return Mutation(name, key, _applies(apply), apply)


INSTRUCTION_MUTATIONS: list[Mutation] = [
    _mutation("answer_cap_down", "Shorten answers", _cap_move(False)),
    _mutation("answer_cap_up", "Lengthen answers", _cap_move(True)),
    _mutation("relative_dates_on", "Resolve relative dates against the session date", _relative(True)),
    _mutation("relative_dates_off", "Stop converting relative dates", _relative(False)),
    _mutation("list_items", "List every matching item", _list_items),
    _mutation("always_on_rewrite", "Rewrite ALWAYS_ON_KNOWLEDGE",
              _pick_text("ALWAYS_ON_KNOWLEDGE", ALWAYS_ON_TEXTS, "Rewrite ALWAYS_ON_KNOWLEDGE",
                         "a standing rule shown with every retrieval steers answers the instruction alone does not")),
    _mutation("query_instruction_rewrite", "Rewrite INSTRUCTION_QUERY",
              _pick_text("INSTRUCTION_QUERY", QUERY_TEXTS, "Rewrite INSTRUCTION_QUERY",
                         "queries restated loosely lose the names and details retrieval matches on")),
    _mutation("item_instruction_rewrite", "Rewrite INSTRUCTION_KNOWLEDGE_ITEM",
              _pick_text("INSTRUCTION_KNOWLEDGE_ITEM", ITEM_TEXTS, "Rewrite INSTRUCTION_KNOWLEDGE_ITEM",
                         "extracted items lose who, when and where, which questions ask about")),
]

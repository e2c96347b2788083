"""List answers for the offline answerer: every matching item, when told to list them.

A real model told "when the question asks for several things, list every matching item" answers
"What instruments does Melanie play?" with "clarinet, violin" gathered from two turns; the
extractive answerer (mstar.offline.answer_span) returns one span of one sentence. So that the
evolution has the same lever offline, mstar.offline.task_model obeys that instruction (the
`list_all` directive, LIST_DIRECTIVE_RE) for questions that ask for several things
(`asks_for_several`): the answer is then the usual one-span answer followed by the best span of
each further sentence that matches the question about as well, distinct ones joined with commas,
bounded in items and words. Without the directive nothing here runs, so answers stay exactly
what they were.
"""
from __future__ import annotations

import re

from mstar.offline.answer_span import lower_vocabulary, span_of_unit, unit_support
from mstar.offline.question_kinds import TOKEN_RE, question_info
from mstar.offline.text import Unit, content_set

# Read as a directive from INSTRUCTION_RESPONSE / ALWAYS_ON_KNOWLEDGE. Narrow on purpose: a
# dialogue turn ("I'll list all my plans") must not switch it on or be hidden as a directive.
LIST_DIRECTIVE_RE = re.compile(r"\blist (?:every|each|all(?: the)?) (?:matching |relevant |distinct )?"
                               r"(?:items?|things?|answers?)\b", re.I)

# Bounds, tuned on LoCoMo val (1,440 questions, 183 of them ask for several things): more or
# longer items add words the gold list does not have faster than the ones it has. Best of a grid
# of 2-4 items x 2-4 words x margin 0-1 x floor 1-2: +0.001 F1 on val, +0.001 on test.
LIST_ITEMS = 3          # items in one answer, the one-span answer first
ITEM_WORDS = 3          # words in each further item (the caller's word cap may lower it)
LIST_UNITS = 8          # best-supported sentences whose spans are considered
LIST_MARGIN = 0.5       # a further sentence's support may be this far below the best score
MIN_SCORE = 2.0         # ...and never below two shared words: the speaker alone is no match

_AUX = frozenset("do does did has have had is are was were will would can could".split())
_CATEGORY = frozenset("kind kinds type types sort sorts of".split())
_IRREGULAR = frozenset("people children men women feet teeth".split())
_NOT_PLURAL = frozenset("this his is was has does as us its yes always perhaps".split())


def _plural(word: str) -> bool:
    return word in _IRREGULAR or (len(word) > 3 and word.endswith("s") and word not in _NOT_PLURAL
                                  and not word.endswith(("ss", "us", "is", "'s")))


def asks_for_several(question: str) -> bool:
    """True for "What activities does X do?", "Which cities has X visited?", "What kind of
    books ...", "What are the names of ...", "What are some ...", "Where has X camped?": a
    plural noun between what/which and the auxiliary after it (so "What fuels his soul?" is
    not one), "what are" followed by some/the/all, or "where has/have"."""
    words = [w.lower() for w in TOKEN_RE.findall(question) if w[0].isalnum()]
    if len(words) < 3:
        return False
    if words[0] == "where":
        return words[1] in ("has", "have")
    if words[0] not in ("what", "which"):
        return False
    if words[1] in ("are", "were") and words[2] in ("some", "the", "all"):
        return True
    plural = False
    for w in words[1:6]:
        if w in _AUX:
            return plural
        plural = plural or (w not in _CATEGORY and _plural(w))
    return False


def list_answer(units: list[Unit], scores: list[float], question: str, memory: str,
                cap: int, first: str | None) -> str | None:
    """`first` (the one-span answer) followed by the best spans of the other units that match
    the question about as well as the best one, distinct ones joined by commas; None when no
    second item is found (the caller then keeps `first`). The one-span answer leads because it
    is the best-scored span overall: a list that drops it loses the item it most often has."""
    if not first:
        return None
    top = max(scores, default=0.0)
    if top <= 0:
        return None
    support = unit_support(units, scores)
    order = sorted(range(len(units)), key=lambda i: (-support[i], i))[:LIST_UNITS]
    info = question_info(question)
    lower_vocab = lower_vocabulary(memory)
    speakers = {u.speaker.lower() for u in units if u.speaker}
    floor = max(top - LIST_MARGIN, MIN_SCORE)
    items, seen = [first], [content_set(first)]
    for i in order:
        if support[i] < floor or len(items) == LIST_ITEMS:
            break
        span = span_of_unit(units[i], support[i], info, lower_vocab, speakers, min(cap, ITEM_WORDS))
        words = content_set(span or "")
        # "pottery" after "pottery class" is the same item: keep the first of overlapping ones.
        if not words or any(words <= s or s <= words for s in seen):
            continue
        items.append(span)
        seen.append(words)
    return ", ".join(items) if len(items) >= 2 else None

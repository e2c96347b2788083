"""Failure signals: what the offline reflector reads off one underperforming case.

A real reflector reads the failing cases (question, expected answer, model answer, retrieved
text) and names what went wrong before it picks a change. `case_signals` does the same with
patterns; the reflector (reflector_model.py) counts the signals over the cases shown and
`mutations.TUNING` says which edits each one calls for. `SALIENCE` weighs a signal when the
reflector picks which failure to fix.
"""
from __future__ import annotations

import re

from mstar.offline.cases import EMPTY_RE as _EMPTY_RE, WHEN_RE as _WHEN_RE, Case
from mstar.offline.text import content_set

SIGNALS = (
    "when_no_date",    # a when-question answered without a date
    "no_answer",       # empty / "unknown" answer, or nothing retrieved
    "not_retrieved",   # most of the expected answer's words are missing from the retrieved text
    "long_retrieved",  # the retrieved text ran into the length limit
    "verbose",         # the answer is much longer than the expected one
    "terse",           # the answer is much shorter than the expected one
    # Read off the question and the expected answer (mostly multi-hop and updated questions):
    "names_person",    # the question names someone and the answer was not found
    "bridge",          # "the person who ..." -- the answer is about someone the question describes
    "now_question",    # asks what holds now / currently / most recently
    "list_answer",     # the expected answer lists several things (commas, "and")
    "caption_answer",  # the answer was quoted from an image caption ("[shares a photo of ...]")
    "caption_clutter", # the retrieved text holds several image captions
    "relative_when",   # a when-question whose matching evidence says "last year", "yesterday", ...
)

# How much one case showing a signal weighs when the reflector picks the failure to fix (default
# 1): how clearly it points at a change that alters the answer. A reflector names first the
# failure it can explain line by line: "the evidence says 'last year' and the answer gave that
# line's date" is such a diagnosis. Caption clutter is background: it shows in nearly every
# retrieval from a dialogue with photos, failing or not. A list answer shows in half the LoCoMo
# reflections, but what it calls for rarely changes an answer offline (the list instruction: val
# +0.001, 17 of 19 study children answered every static item as their parent did).
SALIENCE: dict[str, float] = {"relative_when": 3.0, "caption_clutter": 0.5, "list_answer": 0.25}

# An absolute date in an answer ("last week" is not one: it scores nothing against "7 May 2023").
_DATE_RE = re.compile(r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|\b(?:19|20)\d\d\b"
                      r"|\b\d{1,2}/\d{1,2}\b", re.I)
_BRIDGE_RE = re.compile(r"\b(?:person|one|friend|someone|somebody|people) (?:who|that|whose)\b", re.I)
_NOW_RE = re.compile(r"\b(?:now|currently|current|these days|latest|most recent(?:ly)?|still)\b", re.I)
# A capitalised word after the first one: a name ("What did Caroline paint?").
_NAME_RE = re.compile(r"(?<=\s)[A-Z][a-z]+")
# "[shares a photo of a pie]": a description of an image inside a dialogue turn.
_CAPTION_RE = re.compile(r"\[(?:shares|shared|sends|sent|posts|posted)\b[^\]\n]*\]", re.I)
# A time told relative to the day it was said ("last year", "yesterday", "two weeks ago"): the
# line's own date is then not the event's date.
_RELATIVE_TIME_RE = re.compile(r"\b(?:yesterday|last (?:night|week(?:end)?|month|year|[a-z]+day)"
                               r"|next (?:week(?:end)?|month|year)|(?:\w+|a few|a couple of) "
                               r"(?:days?|weeks?|months?|years?) ago)\b", re.I)
# Retrieved text holding this many captions is cluttered with them, whatever the answer quoted.
CAPTION_CLUTTER = 2


def case_signals(case: Case) -> set[str]:
    """The failure signals (SIGNALS) one underperforming case shows."""
    signals = set()
    answer, expected, retrieved = case.answer.strip(), case.expected.strip(), case.retrieved
    if _WHEN_RE.search(case.question) and not _DATE_RE.search(answer):
        signals.add("when_no_date")
    if _EMPTY_RE.match(answer) or re.match(r"^\W*no (?:relevant )?information", retrieved.strip(), re.I) \
            or not retrieved.strip():
        signals.add("no_answer")
    want = content_set(expected)
    if want and len(want & content_set(retrieved)) < 0.5 * len(want):
        signals.add("not_retrieved")
    if len(retrieved) >= 2400 or "more characters cut]" in retrieved:
        signals.add("long_retrieved")
    if _BRIDGE_RE.search(case.question):
        signals.add("bridge")
    elif _NAME_RE.search(case.question) and ("not_retrieved" in signals or "no_answer" in signals
                                             or not content_set(answer) & want):
        signals.add("names_person")
    if _NOW_RE.search(case.question):
        signals.add("now_question")
    said = content_set(answer)
    if said and any(said <= content_set(c) for c in _CAPTION_RE.findall(retrieved)) \
            and not said <= content_set(_CAPTION_RE.sub("", retrieved)):
        signals.add("caption_answer")     # the words are only in a caption: it was quoted
    if len(_CAPTION_RE.findall(retrieved)) >= CAPTION_CLUTTER:
        signals.add("caption_clutter")    # photo descriptions crowd what people said
    if _WHEN_RE.search(case.question) and not _RELATIVE_TIME_RE.search(answer) and any(
            _RELATIVE_TIME_RE.search(line) and len(content_set(line) & content_set(case.question)) >= 2
            for line in retrieved.splitlines()):
        signals.add("relative_when")      # the evidence dates the event from the day it was told
    items = re.sub(r",\s*(?:19|20)\d\d\b", "", expected)   # "2 April, 2024" is one date, not a list
    if "," in items or (" and " in items and len(items.split()) <= 8):
        signals.add("list_answer")
    n_answer, n_expected = len(answer.split()), len(expected.split())
    if n_answer > n_expected + 3:
        signals.add("verbose")
    elif n_answer + 2 < n_expected and "not_retrieved" not in signals:
        signals.add("terse")
    return signals

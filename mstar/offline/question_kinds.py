"""What a question asks for, read without an LLM: its answer type, head noun and content words.

Used by the offline answerer (mstar.offline.answer_span) to pick the span of memory that answers
a question. Answer types come from general English question patterns:
  number  "how many/much/old/long/often", "what score/price", "what time"
  place   "where", "which city/town/park ..."
  name    "who/whose", "name", "called", "which company/band/school ..."
  colour  "what colour"
  time    "when ...", "what year/date/month/day"
  reason  "why ...", "how did/does ..."
  thing   anything else
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from mstar.offline.text import QUESTION_WORDS, STOPWORDS, stem

TOKEN_RE = re.compile(r"[^\W_]+(?:['’.\-][^\W_]+)*|[^\w\s]")
_AUX = frozenset("is are was were do does did has have had will would can could should".split())
# Category words after what/which that say which answer type is wanted, not which noun heads it.
_CATEGORY_WORDS = frozenset("kind kinds type types sort sorts breed colour color species flavour "
                            "flavor style genre variety brand make model".split())
_ENTITY_NOUNS = (
    "company band team club school university college hospital restaurant shelter institute "
    "organization organisation charity station store shop book novel film movie show series "
    "song album game app website brewery cafe bar hotel museum gallery church firm magazine "
    "newspaper podcast course lab laboratory clinic business brand artist author group").split()
_PLACE_NOUNS = (
    "city town country place neighbourhood neighborhood state park street village island "
    "region area county province continent location destination beach lake river "
    "mountain").split()

_KIND_PATTERNS = (  # checked in this order; first match wins
    ("number", re.compile(r"\bhow (?:many|much|old|long|far|often|tall|big|fast|heavy|large)\b"
                          r"|\b(?:what|which) (?:time|score|number|percentage|age|price|amount|"
                          r"size)\b|\b\w+ing time\b|\b(?:score|number of|percentage|price|cost)\b",
                          re.I)),
    ("place", re.compile(r"\bwhere\b|\b(?:what|which) (?:%s)\b" % "|".join(_PLACE_NOUNS), re.I)),
    ("name", re.compile(r"\b(?:who|whom|whose)\b|\bnamed?\b|\bcalled\b|\btitled?\b|"
                        r"\b(?:what|which) (?:%s)\b" % "|".join(_ENTITY_NOUNS), re.I)),
    ("colour", re.compile(r"\b(?:what|which) colou?rs?\b|\bcolou?r (?:is|was|are|were|did)\b",
                          re.I)),
    ("time", re.compile(r"^\s*when\b| when |\b(?:what|which) (?:year|date|month|day)\b", re.I)),
    ("reason", re.compile(r"^\s*(?:why|how)\b|\b(?:why|how)\s+(?:did|does|do|is|was|were|"
                          r"would|has|have|can|could)\b", re.I)),
)
_YES_NO_RE = re.compile(r"^\s*(?:is|are|was|were|do|does|did|would|could|can|will|has|have|"
                        r"should)\b", re.I)
_SECOND_PART_RE = re.compile(r",?\s+and\s+(?=(?:(?:in|for|to|at|on|from|with|by) )?"
                             r"(?:what|which|who|whom|whose|where|when|why|how)\b)", re.I)


# ---------------------------------------------------------------- questions

@dataclass(frozen=True)
class QuestionInfo:
    terms: frozenset[str]    # stemmed content words (what a sentence must share)
    words: frozenset[str]    # lower-case words, possessive dropped; a span never contains them
    kind: str                # number | place | name | colour | time | reason | thing
    head: str | None         # stem of the noun asked about ("cake" in "what cake did ...")
    yes_no: bool             # "Is ...?", "Would ...?"


def norm_word(word: str) -> str:
    w = word.lower().replace("’", "'")
    return w[:-2] if w.endswith("'s") else w


# "who" after a noun opens a relative clause ("the person who ran ...", "friends who ..."): it
# describes someone, it does not ask for a name. After these words it still asks ("with whom").
_ASKING_BEFORE = frozenset("with for to by from of about and or but at on in".split())
_RELATIVE_RE = re.compile(r"\b([A-Za-z]+)\s+(?:who|whom|whose)\b")


def _without_relative_who(question: str) -> str:
    return _RELATIVE_RE.sub(lambda m: m.group(0) if m.group(1).lower() in _ASKING_BEFORE
                            else f"{m.group(1)} that", question)


# "before moving to Sapporo", "besides the props", "other than Rex": the named thing is the one
# the answer is NOT -- a different value of the same kind. Months and weekdays are dates ("the
# week before August 3"), not such entities.
_CONTRAST_RE = re.compile(r"\b(?:before|besides|apart from|other than|instead of|except(?: for)?)\s+"
                          r"(?:(?:moving|joining|switching|changing|going|transferring)\s+(?:to\s+)?)?"
                          r"(?:the\s+)?((?:[A-Z][\w'’.&-]*\s*){1,4})")
_DATE_NAMES = frozenset("january february march april may june july august september october november "
                        "december monday tuesday wednesday thursday friday saturday sunday".split())


def contrast_entity(question: str) -> str | None:
    """The capitalised name a question contrasts its answer with ("Where did Ines work before
    joining Greywater Analytics?" -> "Greywater Analytics"), or None."""
    m = _CONTRAST_RE.search(question)
    if not m or m.group(1).split()[0].lower() in _DATE_NAMES:
        return None
    return m.group(1).strip(" ?.,")


def question_kind(question: str) -> str:
    """The answer type a question asks for (see module docstring)."""
    question = _without_relative_who(question)
    return next((kind for kind, p in _KIND_PATTERNS if p.search(question)), "thing")


def _head_noun(words: list[str]) -> str | None:
    """The noun counted by "how many/much", or the noun after what/which: the last word of the
    phrase before an auxiliary ("what rare bird did ..." -> "bird", "what kind of tortoise is
    ..." -> "tortoise"), else the first ("which institute offered ..." -> "institute")."""
    for i, (w, nxt) in enumerate(zip(words, words[1:])):
        if w == "how" and nxt in ("many", "much"):  # "how many years ..." -> "year"
            noun = words[i + 2] if i + 2 < len(words) else "did"
            return None if noun in _AUX or noun in STOPWORDS else stem(noun)
    if "what" not in words and "which" not in words:
        return None
    i = next(i for i, w in enumerate(words) if w in ("what", "which"))
    phrase, closed = [], False
    for w in words[i + 1:i + 5]:
        if w in _AUX:
            closed = True
            break
        if w in _CATEGORY_WORDS or w == "of":
            continue
        if w in STOPWORDS:
            break
        phrase.append(w)
    return stem(phrase[-1] if closed else phrase[0]) if phrase else None


def question_info(question: str, exclude: str = "") -> QuestionInfo:
    """What the question asks for, and the words (its own and `exclude`'s) a span must avoid."""
    words = [norm_word(w) for w in TOKEN_RE.findall(question) if w[0].isalnum()]
    banned = {norm_word(w) for w in TOKEN_RE.findall(exclude) if w[0].isalnum()}
    parts = [p for w in words for p in w.split("-")]
    terms = frozenset(stem(p) for p in parts
                      if p not in STOPWORDS and p not in QUESTION_WORDS and len(p) > 1)
    return QuestionInfo(terms, frozenset(words) | banned, question_kind(question),
                        _head_noun(words), bool(_YES_NO_RE.match(question)))


def question_parts(question: str) -> list[str]:
    """A two-part question ("Who helped Lena, and what brewery does he run?") as its two
    questions; any other question as itself."""
    parts = _SECOND_PART_RE.split(question.strip(), maxsplit=1)
    if len(parts) == 2 and all(len(p.split()) >= 2 for p in parts):
        return [parts[0].rstrip(" ,?") + "?", parts[1]]
    return [question]

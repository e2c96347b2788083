"""Short extractive answers for the offline answerer: a contiguous span of memory, no LLM.

mstar.offline.task_model splits the retrieved memory into sentences (`Unit`s) and handles the
directives and dates; for a short answer it calls `short_answer`, which picks a stretch of one
sentence and returns it as written ("Hermann's tortoise", "Smoke & Citrus", "Lucía").

Candidates are sub-spans of the maximal runs of tokens that are neither punctuation nor question
words, with no function word at either edge, taken from the best-supported sentences. A
sentence's support is its own match with the question (`unit_scores`: shared content words, the
speaker counting as one) or, slightly discounted, that of the one or two sentences before it:
a turn that matches the question is often followed by the answer ("I bought a camper van." /
"The previous owner called it Marigold."). A candidate scores

    sentence support
  + answer-type fit     what the question's wh-word / pattern asks for (below), minus a length
                        cost for words not of that type (or a small bonus per word for
                        descriptive questions, whose gold answers are phrases)
  + context             "named/called X", "in/at X", "...: X", a quotation
  + closeness           to the question words matched in its sentence
  + phrase boundaries   each edge at a function word, punctuation or question word
  - question sentence   "What did you name her?" asks, it does not answer

Answer types (`question_kind`), from general English question patterns:
  number  "how many/much/old/long/often", "what score/price", "what time" -> digits, number words
  place   "where", "which city/town/park ..."          -> capitalised names, after "in/at/to"
  name    "who/whose", "name", "called", "which company/band/school ..." -> capitalised names
  colour  "what colour"                                -> phrases with a colour word
  time    "when ..." (reached only when the session-date rule gave no date) -> time phrases
  reason  "why ...", "how did/does ..."                -> longer phrases
  thing   anything else                                -> the phrase next to the matched words
When the question names a head noun ("what cake ...", "what kind of tortoise ...", "which
institute ...") the words in front of that noun in the memory plus the noun are a candidate too
("lemon drizzle cake", "Tagus Marine Institute"). A capitalised word counts as a name unless
the memory also writes it in lower case, so the sentence-initial "Lemon" is no name.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

from mstar.offline.question_kinds import TOKEN_RE as _TOKEN_RE
from mstar.offline.question_kinds import (QuestionInfo, contrast_entity, norm_word as _norm,
                                          question_info, question_parts)
from mstar.offline.text import (COLOUR_WORDS, DISCOURSE_WORDS, MONTHS, NUMBER_TOKENS,
                                QUESTION_WORDS, STOPWORDS, TIME_WORDS, WEEKDAYS, Unit,
                                content_set, idf_weights, query_terms, stem)

# Weights, in units of "one shared question word" (the sentence-support scale). Tuned on
# LoCoMo val and the sample task together; ±30% on any of them moves F1 by < 0.005.
TYPE_FIT = 1.2         # a candidate of the asked-for type
HEAD_FIT = 1.2         # modifiers + the question's head noun ("lemon drizzle cake")
CUE_FIT = 0.8          # a name right after "named"/"called"/"name is", a place after "in"/"at"
COLON_FIT = 0.5        # a span right after a colon ("my first piece: The Swan")
QUOTE_FIT = 0.8        # a span that is exactly a quotation ("Becoming Nicole")
CLOSE = 0.8            # closeness: CLOSE / distance-in-tokens to the nearest matched word
BOUNDARY = 0.35        # per edge that sits at a phrase boundary
LENGTH = 0.3           # per word that is not of the asked-for type
# Descriptive questions have phrase-long gold answers (LoCoMo single-hop: 4.4 words on
# average), so there every extra word earns a little instead.
LENGTH_BY_KIND = {"thing": -0.15, "time": -0.15, "reason": -0.3, "colour": -0.1}
NAME_RUN = 0.1         # per extra name word: "Mrs. Abernathy" over "Mrs"
QUESTION_SENTENCE = 1.0
NEXT_COST = 0.6        # support lost per sentence between the matching sentence and the span
PREV_COST = 1.2        # same, for the sentence just before the matching one
MAX_SPAN = 8           # words in a candidate (the caller's word cap may lower it)
CANDIDATE_UNITS = 6    # sentences whose spans are scored
CONTRAST = 1.0         # a sentence naming the thing the question contrasts the answer with

_LOWER_WORD_RE = re.compile(r"(?<![\w'’])[^\W\d_A-Z][\w'’]*")
_TITLES = frozenset("mr mrs ms dr prof st sr jr mt".split())
_JOINERS = frozenset("& / $ £ € % # +".split())  # may sit inside a name, phrase or amount
_QUOTES = frozenset("\" “ ” ‘ ’ ' « »".split())
_NOT_NAMES = frozenset(MONTHS) | frozenset(WEEKDAYS) | DISCOURSE_WORDS
_NAME_CUES = frozenset("named called name titled nicknamed is".split())
_PLACE_CUES = frozenset("in at to from near on into visit visited visiting".split())
_TIME_MODIFIERS = frozenset("last next this early late mid".split())  # may open a time span
# ---------------------------------------------------------------- sentences

def unit_scores(units: list[Unit], question: str) -> list[float]:
    """How well each unit matches the question: the number of shared content words (the
    speaker's name counts as a word of the unit), rarer words breaking ties. On LoCoMo val this
    beat a pure rarity-weighted sum by ~0.004 F1 with dated-turn retrieval."""
    q = query_terms(question)
    bags = [content_set(u.text) | ({stem(u.speaker.lower())} if u.speaker else set())
            for u in units]
    idf = idf_weights(bags)
    # A contrasted name ("before joining Greywater Analytics") is not evidence: the sentence
    # stating it tells the fact the answer differs from, so it loses a point instead.
    contrast = query_terms(contrast_entity(question) or "")
    q -= contrast
    # fsum: exact, so ties do not depend on the set's (hash-seeded) iteration order.
    return [len(q & bag) + 0.01 * math.fsum(idf[t] for t in q & bag)
            - (CONTRAST if contrast and contrast <= bag else 0.0) for bag in bags]


def unit_support(units: list[Unit], scores: list[float]) -> list[float]:
    """Each unit's support: its own score, or the discounted score of one of the two units
    before it (or the one after it) when they are adjacent lines of the memory."""
    support = list(scores)
    for j, u in enumerate(units):
        for k, cost in ((j - 1, NEXT_COST), (j - 2, 2 * NEXT_COST), (j + 1, PREV_COST)):
            if 0 <= k < len(units) and abs(u.line - units[k].line) <= abs(j - k):
                support[j] = max(support[j], scores[k] - cost)
    return support


def lower_vocabulary(memory: str) -> set[str]:
    """Words the memory writes in lower case somewhere (so they are not proper names)."""
    return {_norm(w) for w in set(_LOWER_WORD_RE.findall(memory))}


# ---------------------------------------------------------------- tokens

@dataclass
class _Token:
    start: int
    end: int
    norm: str
    word: bool       # a word (not punctuation)
    brk: bool        # punctuation that ends a phrase
    stop: bool       # function word (never at a span edge)
    q: bool          # a question word: spans never contain it (the head noun aside)
    name: bool       # capitalised, not a speaker label, not written in lower case elsewhere
    num: bool
    time: bool       # a time word, or a modifier in front of one ("last" week)
    colour: bool
    cap: bool        # capitalised (and not a function word)


@lru_cache(maxsize=65536)
def _word(raw: str) -> tuple[str, frozenset[str], bool, bool, bool, bool, bool]:
    """What a word is on its own (cached: memories repeat words): normal form, stems of its
    hyphen parts, function word, number, time word, colour, capitalised."""
    norm = _norm(raw)
    parts = norm.split("-")
    stop = (norm in STOPWORDS or norm in QUESTION_WORDS or norm in DISCOURSE_WORDS
            or (len(norm) == 1 and not norm.isdigit()))
    num = any(c.isdigit() for c in norm) or any(p in NUMBER_TOKENS for p in parts)
    cap = raw[0].isupper() and not stop and norm not in _NOT_NAMES
    return (norm, frozenset(stem(p) for p in parts), stop, num, norm in TIME_WORDS,
            any(p in COLOUR_WORDS for p in parts), cap)


def _tokens(text: str, info: QuestionInfo, lower_vocab: set[str],
            speakers: set[str]) -> list[_Token]:
    out: list[_Token] = []
    for m in _TOKEN_RE.finditer(text):
        raw = m.group(0)
        if not raw[0].isalnum():
            joins = raw in _JOINERS or (raw == "." and out and out[-1].norm in _TITLES)
            out.append(_Token(m.start(), m.end(), raw, False, not joins, True, False, False,
                              False, False, False, False))
            continue
        norm, stems, stop, num, time, colour, cap = _word(raw)
        q = norm in info.words or not stems.isdisjoint(info.terms)
        name = cap and norm not in lower_vocab and norm not in speakers
        out.append(_Token(m.start(), m.end(), norm, True, False, stop, q, name, num, time,
                          colour, cap))
    for prev, tok in zip(out, out[1:]):
        if tok.time and prev.norm in _TIME_MODIFIERS:
            prev.time = True
    return out


def _distances(toks: list[_Token]) -> tuple[list[int], list[int]]:
    """For each position: tokens back to the nearest question word before it, and forward to
    the nearest one at or after it, plus one (0 = there is none)."""
    n = len(toks)
    left, right = [0] * (n + 1), [0] * (n + 1)
    last = None
    for i in range(n + 1):
        left[i] = (i - last) if last is not None else 0
        if i < n and toks[i].q:
            last = i
    nxt = None
    for i in range(n, -1, -1):
        if i < n and toks[i].q:
            nxt = i
        right[i] = (nxt - i + 1) if nxt is not None else 0
    return left, right


def _boundary(toks: list[_Token], i: int) -> bool:
    """True when token position i (or an end) is outside any phrase."""
    if i < 0 or i >= len(toks):
        return True
    t = toks[i]
    return t.brk or (t.word and ((t.stop and not t.time) or t.q or t.norm in _NAME_CUES))


def _edge_ok(t: _Token, kind: str) -> bool:
    return t.word and (not t.stop or (kind == "number" and t.num)
                       or (kind == "time" and t.norm in _TIME_MODIFIERS))


# ---------------------------------------------------------------- scoring

def _context_fit(toks: list[_Token], a: int, kind: str) -> float:
    """Bonus for what comes before a span starting at token a: a colon or a cue word."""
    before = toks[a - 1].norm if a > 0 else ""
    fit = COLON_FIT if before == ":" else 0.0
    if kind in ("name", "place"):
        cues = _NAME_CUES if kind == "name" else _PLACE_CUES
        before2 = toks[a - 2].norm if a > 1 else ""
        if before in cues or (before in STOPWORDS and before2 in cues):  # "called it X"
            fit += CUE_FIT
    return fit


def _type_fit(kind: str, words: int, content: int, names: int, nums: int, times: int,
              timed: int, colours: int) -> float:
    """Answer-type fit of a span with these counts, length cost included. Words of the
    asked-for type are free, and so are function words inside a name ("Stacks and Stories")."""
    if content and times == content and kind != "time":
        return -TYPE_FIT - LENGTH * (words - 1)   # "today", "last night": not what was asked
    if kind == "number":
        return TYPE_FIT - LENGTH * max(0, words - nums - 1) if nums else -LENGTH * (words - 1)
    if kind in ("name", "place"):
        if not names:
            return -LENGTH * (words - 1)
        # Dates inside a name ("the Thursday Readers") neither help nor hurt.
        return (TYPE_FIT * names / (content - times) + NAME_RUN * (names - 1)
                - LENGTH * (content - times - names))
    if kind == "time" and (times or nums):        # "last week", "in 2019", "three days ago"
        return TYPE_FIT - 2 * LENGTH * max(0, words - timed - nums)
    fit = -LENGTH_BY_KIND[kind] * (words - 1)
    return fit + (TYPE_FIT if kind == "colour" and colours else 0.0)


def _unit_candidates(unit: Unit, support: float, info: QuestionInfo, lower_vocab: set[str],
                     speakers: set[str], max_words: int) -> list[tuple[float, int, int]]:
    """(score, start char, end char) of every candidate span of one unit."""
    toks = _tokens(unit.text, info, lower_vocab, speakers)
    left, right = _distances(toks)
    base = support - (QUESTION_SENTENCE if unit.text.rstrip().endswith("?") else 0.0)
    kind, out, n, i = info.kind, [], len(toks), 0
    proper = kind in ("name", "place")
    while i < n:
        if toks[i].brk or toks[i].q:
            i += 1
            continue
        j = i
        while j < n and not toks[j].brk and not toks[j].q:
            j += 1
        # toks[i:j] is a maximal run; score its sub-spans with clean edges.
        for a in range(i, j):
            if not _edge_ok(toks[a], kind):
                continue
            opening = base + _context_fit(toks, a, kind) + BOUNDARY * _boundary(toks, a - 1)
            quoted = a > 0 and toks[a - 1].norm in _QUOTES
            words = content = names = nums = times = timed = colours = caps = 0
            for b in range(a + 1, j + 1):
                t = toks[b - 1]
                if t.word:
                    words += 1
                    nums += t.num
                    timed += t.time
                    if not t.stop:
                        content += 1
                        names += t.name
                        times += t.time
                        colours += t.colour
                        caps += t.cap
                if words > max_words:
                    break
                if not _edge_ok(t, kind):
                    continue
                d = min(x for x in (left[a], right[b]) if x) if left[a] or right[b] else 0
                score = (opening + _type_fit(kind, words, content, names, nums, times, timed,
                                             colours)
                         + (CLOSE / d if d else 0.0) + BOUNDARY * _boundary(toks, b))
                if quoted and b < n and toks[b].norm in _QUOTES:
                    score += QUOTE_FIT
                out.append((score, toks[a].start, t.end))
                # The words in front of the question's head noun, plus the noun and question
                # words before it ("lemon drizzle" + "cake", "coconut milk" + "ice cream",
                # "Tagus Marine" + "Institute", "thirty-four" + "years"); a name is capitalised
                # throughout ("tea" + "company" is no company name), an amount has a number.
                if info.head and (caps == content if proper else nums or kind != "number"):
                    for k in range(b, min(b + 3, n)):
                        if not (toks[k].word and toks[k].q) or words + k - b >= max_words:
                            break
                        if stem(toks[k].norm) == info.head:
                            bonus = HEAD_FIT + (CUE_FIT if proper else 0.0)
                            out.append((score + bonus, toks[a].start, toks[k].end))
                            break
        i = j
    return out


def best_span(units: list[Unit], scores: list[float], info: QuestionInfo, memory: str,
              max_words: int) -> str | None:
    """The best-scoring span of the best-supported units of `memory` (split into `units`
    matching the question by `scores`), or None when no unit matches or none has a candidate."""
    support = unit_support(units, scores)
    order = sorted(range(len(units)), key=lambda i: (-support[i], i))[:CANDIDATE_UNITS]
    lower_vocab = lower_vocabulary(memory)
    speakers = {u.speaker.lower() for u in units if u.speaker}
    best: tuple[float, int, int] | None = None   # (score, -rank, -start): a tie goes to the
    found: tuple[int, int, int] | None = None    # better-supported unit, then the earlier span
    for rank, i in enumerate(order):
        if support[i] <= 0:
            break
        for score, start, end in _unit_candidates(units[i], support[i], info, lower_vocab,
                                                  speakers, min(max_words, MAX_SPAN)):
            if best is None or (score, -rank, -start) > best:
                best, found = (score, -rank, -start), (i, start, end)
    if found is None:
        return None
    i, start, end = found
    return units[i].text[start:end]


def span_of_unit(unit: Unit, support: float, info: QuestionInfo, lower_vocab: set[str],
                 speakers: set[str], max_words: int) -> str | None:
    """The best-scoring span of one unit (the earlier span wins a tie), or None; used by
    mstar.offline.answer_list to take one item from each of several sentences."""
    found = max(((score, -start, end) for score, start, end in
                 _unit_candidates(unit, support, info, lower_vocab, speakers,
                                  min(max_words, MAX_SPAN))), default=None)
    return unit.text[-found[1]:found[2]] if found else None


def short_answer(units: list[Unit], scores: list[float], question: str, memory: str,
                 cap: int) -> str | None:
    """A short answer of at most `cap` words, or None when the memory offers no span at all.

    A yes/no question gets "Yes" (the commoner answer when memory is about the topic at all)
    and its evidence ("Yes, allergic to cats"); a two-part question one span per part
    ("Marek, Ironleaf Brewing").
    """
    info = question_info(question)
    if info.yes_no and cap > 1 and max(scores, default=0) >= 1:
        span = best_span(units, scores, info, memory, cap - 1)
        return f"Yes, {span}" if span else "Yes"
    parts = question_parts(question) if cap >= 4 else [question]
    if len(parts) == 2:
        first = best_span(units, unit_scores(units, parts[0]), question_info(parts[0]), memory,
                          cap // 2)
        if first:
            second_scores = unit_scores(units, parts[1])
            second = best_span(units, second_scores, question_info(parts[1]), memory, cap // 2)
            if second == first:  # not "Marek, Marek": avoid the first answer's words
                second = best_span(units, second_scores, question_info(parts[1], first), memory,
                                   cap // 2)
            if second:
                return f"{first}, {second}"
    return best_span(units, scores, info, memory, cap)

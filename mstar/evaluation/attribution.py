"""Where a case's answer was lost: never stored, not retrieved, or retrieved and not used.

A pure function of texts, no LLM: `attribute(units, stored, retrieved, score)` takes the case's
evidence (mstar.tasks.evidence: the turns / facts / plan steps its answer rests on), for each unit
the text the program kept from the episode that says it, what read() returned, and the score.

Matching rule (`overlap`, `parts`). Texts are normalised: Unicode folded to ASCII, lower-cased,
split into runs of letters and digits, English function words dropped (STOPWORDS), a plural or
verb ending cut (`_stem`: "adopted" ~ "adopt", "classes" ~ "class"). A unit's overlap with a text
is the largest share of the unit's distinct words found inside one window of the text: for the
whole unit (n words) a window of `window(n)` = max(2n, n + 6) words, so a turn quoted with a few
words around it still fits while words scattered over a long text do not add up; for each of the
unit's key sentences (the ones sharing most words with the question and gold answer, with the
speaker label in front, at least KEY_MIN_WORDS words of their own) a tight window of its length
+ KEY_SLACK, so a memory that kept only the sentence that matters ("John: Made this tasty soup
recently") counts, and a short sentence's common words recurring nearby ("park", "love") do not.
The unit is *in* the text when the best of these overlaps is >= MATCH_AT.

MATCH_AT = 0.8, measured on the 50 hand-labelled LoCoMo cases of
tests/fixtures/xray_locomo_cases.json (the three seeds, offline backend; labels written case by
case before the matcher was run on them). Of my 111 verdicts on single units, the 11 "present"
ones (7 in read()'s output, 4 kept in an extracted item) all reach 1.0 (chunks, extractive
summaries and items quote them); the 100 "absent" ones at most 0.67 (a sentence of the same
speaker about the same dog park; Deborah's "I also have a pendant" beside Jolene's "This pendant
reminds me of my mother"). Case labels agree 50/50 for any threshold from 0.65 to 0.95; 0.8
keeps a margin above the highest absent unit, and still lets a quote lose a fifth of its words
(a dropped clause, a paraphrased word). A real model's summary in its own words scores lower:
such a unit may read as absent where a human would say it was there.

Labels (a case shown as failed gets one; a right case is "right"):
    right          scored >= RIGHT_AT (the loop's success cut: such a case is a success example)
    not_stored     some unit is in neither what the program kept of its episode nor in what
                   read() returned -- lost before read() could find it
    not_retrieved  every unit was kept, some unit is not in what read() returned
    not_used       every unit was in what read() returned, and the answer is still wrong
    unattributed   the task's evidence is unusable (`problem`: an id that names no turn, no
                   evidence), or a unit has too few words the matcher can compare (MIN_WORDS,
                   e.g. another script): counted, never guessed
A unit found in what read() returned counts as kept whatever the stored text says (it reached
the memory somehow). Per case: recall = units found in the read output / units; precision = the
read output's words that belong to a found unit's matching window / all its words.
"""
from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from typing import Sequence

MATCH_AT = 0.8     # share of a unit's words in one window of a text: the unit is in the text
RIGHT_AT = 0.5     # a case scoring at least this is right (the loop's success-case cut)
MIN_WORDS = 2      # a unit with fewer comparable words is not attributed
FOLDED_AT = 0.5    # a unit whose letters are less than half ASCII after folding: another script
MAX_UNIT_CHARS = 400   # evidence text kept on the case record (the prompt shows it)

LABELS = ("right", "not_stored", "not_retrieved", "not_used", "unattributed")
STOPWORDS = frozenset("""a an the and or but if then so of to in on at by for with from as into onto about
over under after before than that this these those there here is are was were be been being am do does
did doing have has had having i me my mine we us our you your he him his she her it its they them their
what which who whom whose when where why how not no nor too very just also only own same such can could
will would shall should may might must up down out off again once all any both each few more most other
some s t d ll m re ve don didn doesn isn wasn aren weren haven hasn hadn won wouldn shouldn couldn can't
oh yeah hey hi wow""".split())
KEY_SLACK = 2      # words a key sentence's window may hold beyond its own (a speaker label, a filler)
KEY_MIN_WORDS = 4  # a key sentence with fewer words of its own is too easy to meet by chance
_WORD_RE = re.compile(r"[a-z0-9]+")
_SPEAKER_RE = re.compile(r"^\s*([A-Z][\w'. -]{0,40}):\s")
_SENTENCE_RE = re.compile(r"(?<=[.!?])\s+|\s*[\[\]]\s*")


def _stem(word: str) -> str:
    """A light suffix cut, enough for "adopted"/"adopt", "classes"/"class", "painting"/"paint"."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


@functools.lru_cache(maxsize=1024)   # an episode's kept text serves every question about it
def words(text: str) -> tuple[str, ...]:
    """The comparable words of `text`, in order (see the module docstring)."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return tuple(_stem(w) for w in _WORD_RE.findall(folded) if w not in STOPWORDS)


def window(n: int) -> int:
    return max(2 * n, n + 6)


def overlap(unit_words: Sequence[str], text_words: Sequence[str], size: int | None = None) -> tuple[float, range]:
    """(largest share of the unit's distinct words inside one window of the text -- `size` words,
    default `window(len(unit_words))` --, that window). One pass with a sliding count: O(len(text))."""
    need = set(unit_words)
    if not need or not text_words:
        return 0.0, range(0)
    size = min(size or window(len(unit_words)), len(text_words))
    counts: Counter = Counter()
    hits, best, best_at = 0, 0, 0
    for i, w in enumerate(text_words):
        if w in need:
            counts[w] += 1
            hits += counts[w] == 1
        if i >= size:
            old = text_words[i - size]
            if old in need:
                counts[old] -= 1
                hits -= counts[old] == 0
        if hits > best:
            best, best_at = hits, max(0, i - size + 1)
    return best / len(need), range(best_at, best_at + size)


def parts(unit_text: str, cues: frozenset[str]) -> list[tuple[str, ...]]:
    """The word lists a unit may be found by: the whole unit, and its key sentences -- those
    sharing most words (at least one) with the question and gold answer (`cues`), each with the
    unit's speaker label in front ("Deborah: ..."), when it has KEY_MIN_WORDS words of its own."""
    whole = words(unit_text)
    m = _SPEAKER_RE.match(unit_text)
    speaker = words(m.group(1)) if m else ()
    body = unit_text[m.end():] if m else unit_text
    scored = []
    for sentence in _SENTENCE_RE.split(body):
        sw = words(sentence)
        shared = len((set(sw) - set(speaker)) & cues)
        if shared and len(sw) >= KEY_MIN_WORDS:
            scored.append((shared, speaker + sw))
    top = max((n for n, _ in scored), default=0)
    keys = [sw for n, sw in scored if n == top and sw != whole]
    return [whole, *keys]


def found_in(unit_parts: Sequence[Sequence[str]], text_words: Sequence[str]) -> tuple[float, range, set]:
    """(best overlap of any part, its window, that part's words) -- see `overlap`. The whole unit
    gets the loose window; a key sentence a tight one (its length + KEY_SLACK): it is found when
    it is quoted nearly word for word, not when its few common words recur in a longer stretch."""
    best = (0.0, range(0), set())
    for i, p in enumerate(unit_parts):
        share, span = overlap(p, text_words, None if i == 0 else len(p) + KEY_SLACK)
        if share > best[0]:
            best = (share, span, set(p))
    return best


def unmatchable(text: str) -> str | None:
    """Why the matcher cannot judge this unit (None when it can)."""
    letters = [c for c in text if c.isalpha()]
    ascii_letters = [c for c in unicodedata.normalize("NFKD", text) if c.isascii() and c.isalpha()]
    if letters and len(ascii_letters) < FOLDED_AT * len(letters):
        return "evidence in a script the matcher does not compare (it compares Latin-script words)"
    if len(set(words(text))) < MIN_WORDS:
        return f"evidence has fewer than {MIN_WORDS} words the matcher can compare"
    return None


def attribute(units: Sequence[dict], stored: Sequence[str], retrieved: str, score: float,
              problem: str | None = None, question: str = "", expected: str = "") -> dict:
    """The case's attribution: {"label", "evidence": [{"id", "text", "episode", "stored",
    "retrieved", "overlap"}], "recall", "precision"} (+ "reason" when unattributed).
    `stored[i]`: the text the program kept of units[i]'s episode ("" when it was not written);
    `question`, `expected`: pick each unit's key sentences (`parts`)."""
    if problem or not units:
        return {"label": "unattributed", "reason": problem or "no evidence", "evidence": [],
                "recall": None, "precision": None}
    for u in units:
        why = unmatchable(u["text"])
        if why:
            return {"label": "unattributed", "reason": f"{u.get('id', '?')}: {why}",
                    "evidence": [], "recall": None, "precision": None}
    read_words = words(retrieved or "")
    marked: set[int] = set()
    shown = []
    cues = frozenset(words(f"{question} {expected}"))
    for u, kept in zip(units, stored):
        up = parts(u["text"], cues)
        share, span, need = found_in(up, read_words)
        found = share >= MATCH_AT
        if found:
            marked.update(i for i in span if read_words[i] in need)
        in_store = found or found_in(up, words(kept or ""))[0] >= MATCH_AT
        shown.append({"id": u.get("id"), "text": _cut(u["text"]), "episode": u.get("episode"),
                      "stored": in_store, "retrieved": found, "overlap": round(share, 3)})
    recall = sum(e["retrieved"] for e in shown) / len(shown)
    precision = len(marked) / len(read_words) if read_words else 0.0
    return {"label": label(shown, score), "evidence": shown, "recall": round(recall, 4),
            "precision": round(precision, 4)}


def label(evidence: Sequence[dict], score: float) -> str:
    """The stage where the answer was lost, from the per-unit verdicts (module docstring)."""
    if score >= RIGHT_AT:
        return "right"
    if not all(e["stored"] for e in evidence):
        return "not_stored"
    if not all(e["retrieved"] for e in evidence):
        return "not_retrieved"
    return "not_used"


def _cut(text: str) -> str:
    return text if len(text) <= MAX_UNIT_CHARS else text[:MAX_UNIT_CHARS] + "…"

"""Task metrics: pure functions from (prediction, gold) to a score in [0, 1].

Token F1 follows the SQuAD recipe the paper uses for LoCoMo (Appendix H): lower-case, drop
punctuation, drop the articles a/an/the, split on whitespace, then F1 over token multisets.
Unlike the original SQuAD script we drop *all* Unicode punctuation (em-dashes, curly quotes),
not only ASCII, because model output and hand-written answers are full of them.

`METRICS` maps a task's metric name to a `(prediction, gold) -> float` function so tasks can
name their metric in data files; register new ones there. Metrics that need the judge role
(rubric score, LoCoMo's L-J) live in mstar/tasks/judging.py.
"""
from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from typing import Callable, Hashable, Sequence

_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")
# Numbers as people and models write them: "-1,234.5", "$1,234", "12.5%", ".75".
_NUMBER_RE = re.compile(r"[-+]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")


def _strip_punctuation(text: str) -> str:
    # Removing (not spacing) punctuation is the SQuAD behaviour: "Saint-Saëns" -> "saintsaëns"
    # on both sides, so hyphenated and possessive forms still match each other.
    return "".join(ch for ch in text if not unicodedata.category(ch).startswith("P"))


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower-case, no punctuation, no articles, single spaces."""
    text = _strip_punctuation(str(text).lower())
    text = _ARTICLES_RE.sub(" ", text)
    return " ".join(text.split())


def answer_tokens(text: str) -> list[str]:
    """The tokens token F1 compares (normalised, whitespace-split)."""
    return normalize_answer(text).split()


def token_f1(pred: str, gold: str) -> float:
    """Token-level F1 over normalised token multisets.

    Both sides empty after normalisation -> 1.0; exactly one empty -> 0.0.
    """
    p, g = answer_tokens(pred), answer_tokens(gold)
    if not p or not g:
        return float(p == g)
    common = sum((Counter(p) & Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def exact_match(pred: str, gold: str) -> float:
    """1.0 when the normalised strings are identical, else 0.0."""
    return float(normalize_answer(pred) == normalize_answer(gold))


def parse_number(text: str) -> float | None:
    """The number a short answer states, or None.

    A bare number ("1,234.5", "$12", "7%") is read directly; otherwise the LAST number in the
    text is taken, because models that explain themselves put the result at the end.
    """
    s = str(text).strip().replace("−", "-")
    bare = s.strip("$€£ %").replace(",", "")
    try:
        value = float(bare)
        return value if math.isfinite(value) else None
    except ValueError:
        pass
    found = _NUMBER_RE.findall(s)
    if not found:
        return None
    try:
        value = float(found[-1].replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def numeric_match(pred: str, gold: str, decimals: int = 2) -> float:
    """1.0 when both parse as numbers that agree to `decimals` places, else 0.0.

    "Agree" means |pred - gold| <= half a unit in the last kept place, so 8.333 matches 8.33
    and 5 matches "5.0" but 8.3 does not match 8.33. An unparseable gold is a data error.
    """
    g = parse_number(gold)
    if g is None:
        raise ValueError(f"numeric_match: gold answer {gold!r} is not a number")
    p = parse_number(pred)
    if p is None:
        return 0.0
    tolerance = 0.5 * 10.0 ** (-decimals) + 1e-9 * max(1.0, abs(g))
    return float(abs(p - g) <= tolerance)


def tag_list_match(pred: str, gold: str) -> float:
    """Share of gold tags matched position by position in comma-separated lists (ACE's FiNER score).

    "A,B,C" vs gold "A,X,C" -> 2/3. Tags are compared after trimming spaces; a missing position
    counts as wrong and extra predicted tags are ignored, as in ACE's scorer.
    """
    gold_tags = [t.strip() for t in str(gold).split(",")]
    pred_tags = [t.strip() for t in str(pred).split(",")]
    if not any(gold_tags):
        raise ValueError(f"tag_list_match: gold answer {gold!r} has no tags")
    hits = sum(1 for i, g in enumerate(gold_tags) if i < len(pred_tags) and pred_tags[i] == g)
    return hits / len(gold_tags)


def success(pred: str, gold: str) -> float:
    """Binary success of an interactive game (paper Appendix H, ALFWorld): 1.0 when the
    prediction -- the game's outcome as mstar.interactive.evaluate_case reports it -- is "won",
    else 0.0. The gold answer (an expert plan, for readers) is not compared."""
    return float(str(pred).strip().lower() == "won")


Metric = Callable[[str, str], float]

METRICS: dict[str, Metric] = {
    "token_f1": token_f1,
    "exact_match": exact_match,
    "numeric_match": numeric_match,
    "tag_list_match": tag_list_match,
    "success": success,
}


def get_metric(name: str) -> Metric:
    try:
        return METRICS[name]
    except KeyError:
        raise ValueError(f"unknown metric {name!r}; known metrics: {', '.join(sorted(METRICS))}") from None


def per_category_means(scores: Sequence[float], categories: Sequence[Hashable | None]) -> dict[str, float]:
    """Mean score per category, keyed by str(category); a None category is grouped as "none".

    Keys come out sorted so reports and JSON diffs are stable.
    """
    if len(scores) != len(categories):
        raise ValueError(f"per_category_means: {len(scores)} scores but {len(categories)} categories")
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for score, cat in zip(scores, categories):
        key = "none" if cat is None else str(cat)
        sums[key] = sums.get(key, 0.0) + float(score)
        counts[key] = counts.get(key, 0) + 1
    return {key: sums[key] / counts[key] for key in sorted(sums)}

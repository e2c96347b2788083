import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mstar.tasks.metrics import (METRICS, exact_match, get_metric, normalize_answer, numeric_match, parse_number,
                           per_category_means, token_f1)


# ----------------------------------------------------------------------------- token F1

def test_normalisation_follows_squad():
    assert normalize_answer("  The Paper   Lanterns! ") == "paper lanterns"
    assert normalize_answer("An apple, a pear & the plum.") == "apple pear plum"
    # Articles only as whole words; punctuation removed, not spaced (SQuAD behaviour).
    assert normalize_answer("Another theory") == "another theory"
    assert normalize_answer("Saint-Saëns") == "saintsaëns"
    # Unicode punctuation (em-dash, curly quotes) goes too.
    assert normalize_answer("Maya — “Flour & Fable”") == "maya flour fable"


def test_token_f1_exact_and_partial():
    assert token_f1("The cat sat.", "cat sat") == 1.0
    assert token_f1("Flour and Fable", "Flour & Fable") == pytest.approx(0.8)      # p=2/3, r=1
    assert token_f1("sage green walls", "sage green") == pytest.approx(0.8)
    assert token_f1("beagle", "greyhound") == 0.0
    # Multisets: a repeated token is matched once per occurrence in the gold.
    assert token_f1("green green", "green") == pytest.approx(2 / 3)
    assert token_f1("14 March, 2024", "14 March 2024") == 1.0


def test_token_f1_empty_rules():
    assert token_f1("", "") == 1.0
    assert token_f1("the", "a an") == 1.0          # both empty after normalisation
    assert token_f1("", "beagle") == 0.0
    assert token_f1("beagle", "") == 0.0
    assert token_f1("...", "beagle") == 0.0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.text(max_size=40))
def test_token_f1_is_symmetric_and_bounded(a, b):
    f = token_f1(a, b)
    assert 0.0 <= f <= 1.0
    assert f == pytest.approx(token_f1(b, a))
    assert token_f1(a, a) == 1.0


def test_exact_match():
    assert exact_match("The Paper Lanterns!", "paper lanterns") == 1.0
    assert exact_match("paper lantern", "paper lanterns") == 0.0
    assert exact_match("", "the") == 1.0


# ----------------------------------------------------------------------------- numeric

@pytest.mark.parametrize("pred,gold,expected", [
    ("8.333", "8.33", 1.0),
    ("8.3", "8.33", 0.0),
    ("5", "5.0", 1.0),
    ("$1,234.50", "1234.5", 1.0),
    ("The answer is 5.", "5.0", 1.0),
    ("Revenue rose from 10 to 12.5", "12.5", 1.0),     # last number wins
    ("-15,000,000.0", "-15000000.0", 1.0),
    ("12.5%", "12.5", 1.0),
    ("no idea", "5", 0.0),
    ("", "5", 0.0),
])
def test_numeric_match(pred, gold, expected):
    assert numeric_match(pred, gold) == expected


def test_numeric_match_decimals_and_bad_gold():
    assert numeric_match("7.4", "7", decimals=0) == 1.0
    assert numeric_match("7.6", "7", decimals=0) == 0.0
    assert numeric_match("0.421", "0.42", decimals=3) == 0.0
    assert numeric_match("0.4204", "0.42", decimals=3) == 1.0
    with pytest.raises(ValueError, match="not a number"):
        numeric_match("5", "five")
    assert parse_number("1e3") == 1000.0
    assert parse_number("inf") is None


# ----------------------------------------------------------------------------- registry, categories

def test_registry():
    assert {"token_f1", "exact_match", "numeric_match"} <= set(METRICS)
    assert get_metric("token_f1") is token_f1
    with pytest.raises(ValueError, match="known metrics: .*token_f1"):
        get_metric("bleu")


def test_per_category_means():
    out = per_category_means([1.0, 0.0, 0.5, 0.25], ["temporal", "temporal", None, "single-hop"])
    assert out == {"none": 0.5, "single-hop": 0.25, "temporal": 0.5}
    assert list(out) == sorted(out)
    assert per_category_means([], []) == {}
    assert per_category_means([1.0], [2]) == {"2": 1.0}
    with pytest.raises(ValueError, match="2 scores but 1 categories"):
        per_category_means([1.0, 0.0], ["a"])
    assert math.isclose(sum(per_category_means([0.2, 0.4], ["x", "x"]).values()), 0.3)

"""Degenerate splits are said before a run, each with what to change (mstar/split/checks.py)."""
from __future__ import annotations

from mstar.split import make_split
from mstar.split.checks import resolvable_gain, split_warnings
from mstar.split.embed import HashingEmbedder
from mstar.tasks import load_task
from mstar.tasks.model import Episode, QueryItem, Task


def _task(n_val: int, n_test: int) -> Task:
    topics = ["apples", "boats", "clocks", "dogs", "eels", "forks", "goats", "hats", "inks", "jars", "kites",
              "lamps", "maps", "nets", "owls", "pens", "quilts", "rugs", "saws", "tents"]
    eps = tuple(Episode(f"e{i}", f"Day {i}: Ann talked about {topics[i % 20]} and {topics[(i * 7) % 20]}.")
                for i in range(20))
    val = tuple(QueryItem(f"v{i}", f"What did Ann say about {topics[i % 20]} on day {i}?", topics[i % 20])
                for i in range(n_val))
    test = tuple(QueryItem(f"t{i}", f"Which {topics[i % 20]} did Ann mention on day {i}?", topics[i % 20])
                 for i in range(n_test))
    return Task("small", eps, val, test)


def test_the_sample_task_with_the_default_split_has_no_warning():
    task = load_task("sample")
    assert split_warnings(make_split(task, HashingEmbedder()), task) == []


def test_a_small_task_whose_validation_all_went_to_the_static_set_says_so_and_what_to_give():
    task = _task(12, 40)
    split = make_split(task, HashingEmbedder(), static_size=25)
    assert split.rotating_pool == []
    (line,) = split_warnings(split, task)
    assert line.startswith("rotating pool 0: all 12 validation items are in the static set")
    assert "--static-size 7 or fewer" in line
    # What it advises works: that static size leaves a full rotating batch.
    fixed = make_split(task, HashingEmbedder(), static_size=7)
    assert len(fixed.rotating_pool) >= fixed.config.rotating_size and split_warnings(fixed, task) == []


def test_a_pool_smaller_than_a_batch_a_tiny_static_set_and_a_small_test_split_are_each_said():
    task = _task(12, 10)
    lines = split_warnings(make_split(task, HashingEmbedder(), static_size=9), task)
    assert any(line.startswith("rotating pool 3 is smaller than a rotating batch (5)") for line in lines)
    assert any(line.startswith("test split of 10 items") and "+0.31" in line for line in lines)
    tiny = split_warnings(make_split(task, HashingEmbedder(), static_size=2), task)
    assert any(line.startswith("static set of 2 items: every static score is a step of 0.50") and
               "--static-size 10 or more" in line for line in tiny)
    none = split_warnings(make_split(_task(30, 0), HashingEmbedder()), _task(30, 0))
    assert any(line.startswith("no test items") for line in none)


def test_the_resolvable_gain_shrinks_with_the_square_root_of_the_items():
    assert round(resolvable_gain(100), 3) == 0.098 and round(resolvable_gain(25), 3) == 0.196
    assert resolvable_gain(0) == float("inf")

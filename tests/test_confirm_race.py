"""A confirmation that costs little (issue 28): the race's stopping rule (mstar/final/race.py) and the
race itself (mstar/final/champion.py) on scripted scores -- what it buys, when it stops, whom it picks."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from mstar.final import champion, race
from mstar.evaluation.records import CaseResult, EvalResult
from mstar.pool import Pool, PoolEntry


# ---------------------------------------------------------------- the rule

def test_a_clear_lead_is_behind_a_coin_flip_is_racing_and_equal_scores_are_a_tie():
    z = race.z_for(11)
    lead = race.gap([1.0, 0.8, 0.9, 1.0] * 10, [0.2, 0.1, 0.3, 0.0] * 10, z=z, more=100, fresh=[True] * 40)
    assert lead.verdict == "behind" and lead.low > 0
    a = [0.9, 0.1] * 20
    b = [0.1, 0.9] * 18 + [0.1, 0.1, 0.1, 0.1]
    noisy = race.gap(a, b, z=z, more=2000, fresh=[True] * 40)      # a small lead, wide spread, much left
    assert noisy.verdict == "racing" and noisy.low < 0 < noisy.high and noisy.power >= race.FUTILITY
    flat = race.gap(a, a[1:] + a[:1], z=z, more=2000, fresh=[True] * 40)   # no lead at all: no verdict in reach
    assert flat.mean == 0 and flat.verdict == "tied"
    zeros = race.gap([0.0] * 35, [0.0] * 35, z=z, more=200, fresh=[True] * 40)
    assert zeros.verdict == "tied" and zeros.power == 0.0
    # The same equal scores on the static set alone are no tie: they chose the racers.
    assert race.gap([0.0] * 25, [0.0] * 25, z=z, more=200, fresh=[False] * 25).verdict == "racing"
    # Nothing left to buy: the race ends on its budget, which is no verdict either.
    assert race.gap(a, b, z=z, more=0, fresh=[True] * 40).verdict == "racing"


def test_conditional_power_grows_with_the_items_left_and_the_looks_cost_width():
    z = race.z_for(11)
    small = race.conditional_power(50 * 0.03, 50, 0.2, 20, 0.03, 0.2, z)
    large = race.conditional_power(50 * 0.03, 50, 0.2, 2000, 0.03, 0.2, z)
    assert 0 <= small < large <= 1 and large > 0.9
    # The trend of the fresh items, not the static set's lean, predicts the items to buy.
    leaning = race.conditional_power(50 * 0.03, 50, 0.2, 200, -0.05, 0.2, z)
    assert leaning > race.conditional_power(50 * 0.03, 50, 0.2, 200, 0.0, 0.2, z)
    assert race.z_for(1) < race.z_for(11)          # Bonferroni: more looks, wider intervals
    assert abs(race.z_for(1) - 1.95996) < 1e-4


# ---------------------------------------------------------------- the race on scripted programs

def _case(qid: str, score: float) -> CaseResult:
    return CaseResult(qid, "q", "a", "x", score, None, {}, "", [])


def _evo(score_of, *, static_size=25, validation=400, rotating=None, router=None):
    """Three programs a, b, c (static order a, b, c); `score_of[pid](i)`: score on item i."""
    pool = Pool()
    for n, pid in enumerate("abc"):
        pool.add(PoolEntry(pid, None, 0, f"{pid}-src", 0.9 - 0.1 * n, ""))
    static = {pid: EvalResult(0.0, [_case(f"v{i}", score_of[pid](i)) for i in range(static_size)], [], {})
              for pid in "abc"}
    asked: list[tuple[str, tuple]] = []

    class Executor:
        def run(self, job):
            asked.append((job.source[0], job.indices))
            return EvalResult(0.0, [_case(f"v{i}", score_of[job.source[0]](i)) for i in job.indices], [], {},
                              chain_calls=3)

    evo = SimpleNamespace(
        pool=pool, executor=Executor(), static_result=static.get, router=router,
        task=SimpleNamespace(validation=[SimpleNamespace(id=f"v{i}") for i in range(validation)]),
        split=SimpleNamespace(static=list(range(static_size))),
        rotating_scores=lambda pid: dict((rotating or {}).get(pid, {})))
    return evo, asked


def test_a_lead_the_static_set_already_shows_buys_nothing():
    evo, asked = _evo({"a": lambda i: 1.0, "b": lambda i: 0.0, "c": lambda i: 0.1})
    got = champion.confirm(evo, top=3, size=200, split_seed=42, rounds=10, budget=0.1)
    assert got.confirmed_id == "a" and got.stop == "decided" and got.items == [] and asked == []
    assert [g["verdict"] for g in got.rounds[0]["gaps"].values()] == ["behind", "behind"]


def test_programs_that_all_score_zero_stop_after_one_batch():
    """The formula task's top programs all score 0: one batch shows no difference, the race ends."""
    evo, asked = _evo({p: (lambda i: 0.0) for p in "abc"})
    got = champion.confirm(evo, top=3, size=200, split_seed=42, rounds=10)
    assert got.stop == "tied" and len(got.items) == 20 and len(asked) == 3      # one batch, each racer
    assert got.confirmed_id == "a" == got.static_id                             # the static order decides
    assert not set(got.items) & set(range(25))                                  # never a static item


def _noisy(seed: int, offset: float = 0.0, static_offset: float | None = None):
    """Scores in [0, 1] drawn per item (each program its own draws), shifted by `offset` (by
    `static_offset` on the 25 static items)."""
    import random
    rng = random.Random(seed)
    table = [rng.random() for _ in range(1000)]
    shift = lambda i: static_offset if static_offset is not None and i < 25 else offset  # noqa: E731
    return lambda i: min(1.0, max(0.0, table[i] * 0.6 + 0.2 + shift(i)))


def test_the_race_buys_batches_until_the_better_program_shows_and_stops_there():
    """a leads on the static set by luck; on fresh items b is better by 0.15. The race buys only
    until b is significantly ahead of both, far fewer than its cap."""
    scores = {"a": _noisy(1, -0.15, static_offset=0.1), "b": _noisy(2), "c": _noisy(3, -0.3)}
    evo, asked = _evo(scores)
    got = champion.confirm(evo, top=3, size=200, split_seed=42, rounds=10)
    assert got.confirmed_id == "b" and got.static_id == "a" and got.stop == "decided"
    assert 0 < len(got.items) < 200 and len(got.items) % 20 == 0
    last = got.rounds[-1]
    assert last["leader"] == "b" and all(g["verdict"] == "behind" for g in last["gaps"].values())
    c_batches = [ix for src, ix in asked if src == "c"]
    b_batches = [ix for src, ix in asked if src == "b"]
    assert len(c_batches) < len(b_batches)                  # c left the race before the end


def _lineage_store(seeds: int, iterations: int, rotating: int = 5, static_size: int = 25):
    """A run folder's lineage as the race reads it: `seeds` seed events and `iterations`
    iterations, each with a rotating batch and a child scored on the static set."""
    lines = [{"event": "seed", "program_id": f"seed_{i}"} for i in range(seeds)]
    lines += [{"event": "iteration", "iteration": i, "parent_id": "seed_0", "status": "ok",
               "program_id": f"iter_{i:03d}", "rotating_batch": list(range(rotating))} for i in range(1, iterations + 1)]
    return SimpleNamespace(read_jsonl_tolerant=lambda rel: (lines, None))


def test_the_budget_share_of_the_questions_asked_stops_buying_and_is_never_passed():
    """Racers whose cases files do not count their questions' tokens: 3 seeds x 25 + 10
    iterations x (5 + 25) = 375 questions asked, 10% is 37 racer-items."""
    scores = {"a": _noisy(4), "b": _noisy(5, -0.01), "c": _noisy(6, -0.02)}
    evo, asked = _evo(scores)
    evo.store = _lineage_store(3, 10)
    got = champion.confirm(evo, top=3, size=400, split_seed=42, rounds=10, budget=0.1)
    bought = sum(len(ix) for _, ix in asked)
    assert got.stop == "budget" and got.budget == {"unit": "questions", "share": 0.1, "allowance": 37.5,
                                                   "spent": bought, "racer_items": bought}
    assert 37.5 - 3 < bought <= 37.5 and len(got.items) == bought // 3 < 400
    # Runtime fixes score the child again; a gate failure scores nothing.
    from mstar.final.race_budget import questions_asked
    from mstar.run import events as ev_types
    fixed = ev_types.IterationEvent(1, "seed_0", status="ok", program_id="iter_001", rotating_batch=[1, 2],
                                    runtime_fixes=[{"round": 1, "status": "ok", "static_score": 0.5}])
    failed = ev_types.IterationEvent(2, "seed_0", status="failed", rotating_batch=[1, 2, 3])
    assert questions_asked([fixed, failed], 25) == 2 + 50 + 3


def _priced(evo, per_question: dict[str, int], asked_tokens: int):
    """The racers' static evaluations counted their questions' tokens; the run asked
    `asked_tokens` before the race: a seed, and an iteration that sent some and found some in the
    cache, besides 50k it spent writing its parent's knowledge base again (which does not count)."""
    for pid, tokens in per_question.items():
        res = evo.static_result(pid)
        res.question_tokens = tokens * len(res.cases)
    lines = [{"event": "seed", "program_id": "seed_0", "llm": {"prompt_tokens": asked_tokens // 2}},
             {"event": "iteration", "iteration": 1, "parent_id": "seed_0", "status": "ok", "program_id": "iter_001",
              "rotating_batch": [0], "llm": {"prompt_tokens": asked_tokens // 4, "completion_tokens": 30_000,
                                             "saved_tokens": asked_tokens // 4 + 20_000, "rewrite_tokens": 50_000}}]
    evo.store = SimpleNamespace(read_jsonl_tolerant=lambda rel: (lines, None))


def test_the_budget_is_a_share_of_the_tokens_asked_with_each_racer_s_items_at_its_own_price():
    """10% of 720k tokens asked: 72k. Three racers at 1k tokens a question (1.2k with the margin a
    batch must fit with) buy 20 items a batch until it is spent, or no verdict is in reach with
    what is left -- and never passes the allowance. A costly racer (8k a question, an LLM
    summariser) whose 10 paired items the allowance cannot pay does not enter (race_entry.py):
    the other two buy more items between them instead of a few for all three."""
    scores = {"a": _noisy(4), "b": _noisy(5, -0.01), "c": _noisy(6, -0.02)}
    spent = {}
    for name, c_price in (("cheap", 1000), ("costly", 8000)):
        evo, asked = _evo(scores)
        _priced(evo, {"a": 1000, "b": 1000, "c": c_price}, 720_000)
        got = champion.confirm(evo, top=3, size=400, split_seed=42, rounds=10, budget=0.1)
        price = {"a": 1000, "b": 1000, "c": c_price}
        cost = sum(len(ix) * price[src] for src, ix in asked)
        assert got.stop in ("budget", "tied") and got.budget["unit"] == "tokens" and got.budget["allowance"] == 72_000
        # Cut with a 20% margin on the questions' price (race_budget.PRICE_MARGIN): items differ in price.
        assert got.budget["spent"] == cost <= 72_000 and cost > 72_000 / 1.2 - 1.2 * sum(price.values())
        assert got.budget["racer_items"] == sum(len(ix) for _, ix in asked)
        spent[name] = (len(got.items), {src for src, _ in asked}, got.entry["c"]["entered"])
    assert spent["cheap"] == (20, {"a", "b", "c"}, True), spent
    assert spent["costly"][1:] == ({"a", "b"}, False) and spent["costly"][0] > 20, spent
    # A racer whose cases file predates the counts: the race counts questions, as before.
    evo, asked = _evo(scores)
    _priced(evo, {"a": 1000, "b": 1000}, 600_000)
    evo.static_result("c").question_tokens = 0
    got = champion.confirm(evo, top=3, size=400, split_seed=42, rounds=10, budget=0.1)
    assert got.budget["unit"] == "questions" and got.budget["allowance"] == pytest.approx(0.1 * (25 + 1 + 25))


def test_items_a_racer_has_from_its_rotating_batches_are_bought_first_for_the_others_only():
    scores = {"a": _noisy(7), "b": _noisy(8, -0.02), "c": _noisy(9, -0.5)}
    have = {f"v{i}": scores["a"](i) for i in (300, 301, 302, 303, 304)}     # a was a parent once
    evo, asked = _evo(scores, rotating={"a": have})
    got = champion.confirm(evo, top=3, size=200, split_seed=42, rounds=10)
    first_a = next(ix for src, ix in asked if src == "a")
    first_b = next(ix for src, ix in asked if src == "b")
    assert set(range(300, 305)) <= set(first_b) and not set(range(300, 305)) & set(first_a)
    assert sorted(got.items[:5]) == [300, 301, 302, 303, 304]
    assert got.scores["a"]["rotating"] == 5


def test_items_an_earlier_race_scored_are_evidence_not_bought_again():
    """A run that raced, then went on (resumed with more iterations), races again: what the first
    race scored a and b on (items 300-319, in its ConfirmationEvent) is their evidence now. Neither
    is evaluated on those items again; c, which did not have them, gets them first; b's record is
    for another source (a redone iteration made another b) and is not used."""
    scores = {"a": _noisy(7), "b": _noisy(8, -0.02), "c": _noisy(9, -0.1)}
    earlier = range(300, 320)
    evo, asked = _evo(scores)
    record = {pid: {"source_sha": champion.source_sha(f"{pid}-src" if pid == "a" else "an older b"),
                    "scores": {f"v{i}": scores[pid](i) for i in earlier}} for pid in "ab"}
    lines = [{"event": "seed", "program_id": p} for p in "abc"] + [{"event": "confirmation", "item_scores": record}]
    evo.store = SimpleNamespace(read_jsonl_tolerant=lambda rel: (lines, None))
    got = champion.confirm(evo, top=3, size=200, split_seed=42, rounds=10)
    assert not {i for src, ix in asked if src == "a" for i in ix} & set(earlier), "a was scored on them before"
    assert set(earlier) <= {i for src, ix in asked if src == "b" for i in ix}, "b's record is another program's"
    first_c = next(ix for src, ix in asked if src == "c")
    assert set(earlier) <= set(first_c)
    assert got.scores["a"]["earlier"] == 20 and got.scores["b"]["earlier"] == 0
    # The next race reads all of a's confirmation items: the earlier ones and what this one bought.
    bought_a = {i for src, ix in asked if src == "a" for i in ix}
    assert set(got.item_scores["a"]["scores"]) == {f"v{i}" for i in set(earlier) | bought_a}
    assert got.item_scores["a"]["scores"]["v300"] == scores["a"](300)


@pytest.mark.parametrize("size, top", [(0, 3), (200, 1)])
def test_no_race_without_items_or_rivals(size, top):
    evo, asked = _evo({p: (lambda i: 0.5) for p in "abc"})
    got = champion.confirm(evo, top=top, size=size, split_seed=42, rounds=10)
    assert got.confirmed_id == "a" and asked == [] and got.rounds == []


# ---------------------------------------------------------------- resume after the confirmation

def test_a_run_killed_between_its_confirmation_and_its_test_is_tested_without_racing_again(tmp_path_factory, tmp_path):
    from run_helpers import copy_run, lineage, small_run

    from mstar.cli import main
    from mstar.run import events as ev_types

    done = small_run(tmp_path_factory)
    run = copy_run(done, tmp_path / "run")
    lines = (run / "lineage.jsonl").read_text().splitlines()
    assert json_kind(lines[-2]) == "confirmation" and json_kind(lines[-1]) == "test"
    (run / "lineage.jsonl").write_text("\n".join(lines[:-1]) + "\n")     # killed during the test
    usage = (run / "llm_usage.jsonl").read_text().splitlines()
    (run / "llm_usage.jsonl").write_text("\n".join(u for u in usage if '"scope": "test"' not in u) + "\n")
    before = len((run / "llm_usage.jsonl").read_text().splitlines())
    assert main(["resume", str(run), "--quiet"]) == 0
    assert lineage(run) == lineage(done)                  # one confirmation event, then the test
    added = (run / "llm_usage.jsonl").read_text().splitlines()[before:]
    assert added and not any('"scope": "confirm"' in u for u in added)   # no new race
    assert isinstance(ev_types.read_lineage(run / "lineage.jsonl")[-1], ev_types.TestEvent)


def test_a_run_resumed_with_more_iterations_after_its_confirmation_races_on_the_items_it_bought(tmp_path):
    """Killed during its test, then resumed with two more iterations: the pool has changed, so the
    run races again -- on the confirmation items its first race bought, without buying them again.
    (A race's share of half the run's tokens, so that both races have racers to buy for.)"""
    import json

    from run_helpers import SMALL_ARGS

    from mstar.cli import main
    from mstar.run import events as ev_types

    run = tmp_path / "run"
    assert main(["evolve", *SMALL_ARGS, "--confirm-budget", "0.5", "--out", str(run), "--quiet"]) == 0
    lines = (run / "lineage.jsonl").read_text().splitlines()
    (run / "lineage.jsonl").write_text("\n".join(lines[:-1]) + "\n")     # killed during the test
    first = ev_types.from_dict(json.loads(lines[-2]))
    assert isinstance(first, ev_types.ConfirmationEvent) and first.items > 0 and first.item_scores
    assert main(["resume", str(run), "--iterations", "6", "--quiet"]) == 0
    evs = ev_types.read_lineage(run / "lineage.jsonl")
    second = [e for e in evs if isinstance(e, ev_types.ConfirmationEvent)][-1]
    assert second.items > 0 and len(ev_types.iterations(evs)) == 6
    assert any(s["earlier"] for s in second.scores.values()), "a racer of the first race races again"
    for pid, rec in first.item_scores.items():      # kept for the race after this one, scores unchanged
        assert second.item_scores[pid]["scores"].items() >= rec["scores"].items()
        if pid in second.scores:
            assert second.scores[pid]["earlier"] == len(rec["scores"])
    # Every racer-item the second race paid for is one its racer had not been scored on before.
    new = sum(len(rec["scores"]) - len(first.item_scores.get(pid, {}).get("scores", {}))
              for pid, rec in second.item_scores.items())
    assert second.budget["racer_items"] == new


def json_kind(line: str) -> str:
    import json
    return json.loads(line)["event"]


def test_the_best_seeds_test_starts_while_the_race_is_still_asking(tmp_path):
    # The best seed is tested whatever the race decides (mstar/final/finish.py): its test's first request
    # goes out before the race's last reply is back, instead of after the confirmation event.
    # (Two iterations ask too little for 10% to pay the racers' knowledge bases: the race gets half.)
    from failure_helpers import SMALL, endpoint, usage

    from mstar.cli import main
    from mstar.testing.fake_server import FakeOpenAIServer, offline_responder

    with FakeOpenAIServer(offline_responder(), latency_s=0.4) as srv:
        run = tmp_path / "run"
        assert main(["evolve", *SMALL, "--iterations", "2", "--confirm-top", "3", "--confirm-budget", "0.5",
                     "--out", str(run), "--quiet",
                     *endpoint(srv.base_url, None, concurrency=64)]) == 0
    recs = [r for r in usage(run) if not r["cache_hit"]]
    race = [r for r in recs if r["scope"] == "confirm"]
    test = [r for r in recs if r["scope"] == "test"]
    assert race and test, "this run races and tests"
    first_test_sent = min(r["at"] - r["latency_s"] for r in test)
    assert first_test_sent < max(r["at"] for r in race)

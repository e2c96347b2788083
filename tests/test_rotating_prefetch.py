"""The next iteration's rotating evaluation, run ahead for its likely parents while this one
works (mstar/iteration/rotating_prefetch.py): the same lineage, no request left in its chain when the guess
was right, a bounded cost when it was not."""
from __future__ import annotations

import random

import pytest
import threading
import time
from types import SimpleNamespace

from failure_helpers import endpoint, events, stable, usage

from mstar.cli import main
from mstar.pool import PoolEntry
from mstar.iteration.guesses import draw_odds, next_parents, worth_sending
from mstar.iteration.rotating_prefetch import RotatingPrefetch
from mstar.llm.ledger import Ledger
from mstar.llm.types import UsageRecord
from mstar.strategies.selection import SoftmaxSelection
from mstar.testing.fake_server import FakeOpenAIServer, offline_responder

RUN = ["evolve", "--task", "sample", "--size", "0.3", "--static-size", "6", "--iterations", "4", "--seed", "3",
       "--confirm-size", "0", "--quiet"]
# Every guess is worth its tokens at this price: the guesses the draw suggests are all sent.
EVERY_GUESS = ("--guess-worth", "1e12")


def _run(tmp_path, name: str, *extra: str):
    with FakeOpenAIServer(offline_responder(), latency_s=0.15) as srv:
        run = tmp_path / name
        assert main([*RUN, "--out", str(run), *extra,
                     *endpoint(srv.base_url, tmp_path / f"cache-{name}", concurrency=64)]) == 0
        return run, len(srv.requests)


def test_the_prefetch_keeps_the_lineage_and_shortens_the_rotating_evaluations(tmp_path):
    on, sent_on = _run(tmp_path, "on", *EVERY_GUESS)
    off, sent_off = _run(tmp_path, "off", "--no-prefetch")
    ev_on, ev_off = events(on), events(off)
    # The same parents, batches, children and scores (replay keys name the server's port: they differ).
    same = lambda evs: [{k: v for k, v in e.items() if k != "replay_keys"} for e in stable(evs)]   # noqa: E731
    assert same(ev_on) == same(ev_off)
    its_on = [e for e in ev_on if e["event"] == "iteration"]
    its_off = [e for e in ev_off if e["event"] == "iteration"]
    chain = lambda its: sum(e["timing"].get("rotating_chain_calls", 0) for e in its)   # noqa: E731
    guessed = [e for e in its_on if e["timing"].get("rotating_ahead")]
    # Iteration 1 has no iteration before it to guess in; the later parents were guessed here.
    assert [e["iteration"] for e in guessed] == [e["iteration"] for e in its_on[1:]]
    assert not [e for e in its_off if e["timing"].get("rotating_ahead")]
    # A guessed parent's evaluation finds every reply in the cache: nothing left to wait for in a row.
    assert all(e["timing"]["rotating_chain_calls"] == 0 for e in guessed), [e["timing"] for e in guessed]
    assert chain(its_on) < chain(its_off), (chain(its_on), chain(its_off))
    asked = [r for r in usage(on) if r["scope"] == "prefetch"]
    assert asked and not [r for r in usage(off) if r["scope"] == "prefetch"]
    # What the wrong guesses cost: requests the run without them does not send (15 of 582 measured).
    assert sent_on - sent_off <= len([r for r in asked if not r["cache_hit"]])
    assert sent_on - sent_off <= 0.05 * sent_off, (sent_on, sent_off)


def _entry(pid: str, score: float, no_change: bool = False) -> PoolEntry:
    return PoolEntry(pid, None, 0, f"# {pid}", score, no_change=no_change)


def test_the_guessed_parents_hold_the_draw_when_the_child_fails_or_ties_its_parent():
    select = SoftmaxSelection(0.15).select
    for trial in range(200):
        r = random.Random(trial)
        seen = [_entry(f"p{i}", round(r.random() * 0.6, 2), no_change=r.random() < 0.2) for i in range(r.randint(1, 8))]
        parent = r.choice(seen)
        child = _entry("child", 0.0)
        guessed = {e.program_id for e in next_parents(select, seen, parent, child, lambda: random.Random(f"n{trial}"))}
        assert 1 <= len(guessed) <= 3
        base = [e for e in seen if not e.no_change] or seen
        # The outcomes the guess is made for: the child does not join; it joins at its parent's score.
        assert select(base, random.Random(f"n{trial}")).program_id in guessed
        tied = PoolEntry("child", None, 1, "# child", parent.static_score)
        assert select(base + [tied], random.Random(f"n{trial}")).program_id in guessed


_READS = "\nclass KnowledgeBase:\n    def __init__(self):\n        self.rows = []\n\n" \
         "    def write(self, item, raw):\n        self.rows.append(raw)\n\n"
PURE = _READS + "    def read(self, query):\n        return ' '.join(self.rows)\n"
COUNTING = _READS + "    def read(self, query):\n        self.rows.append(query)\n        return ''\n"


class _Executor:
    def __init__(self):
        self.jobs, self.release = [], threading.Event()

    def run(self, job):
        self.jobs.append(job)
        self.release.wait(10)


def _prefetch(executor, router=None, **knobs) -> RotatingPrefetch:
    evolution = SimpleNamespace(rotating_size=2, iterations=5, seed=0, **knobs)
    split = SimpleNamespace(batch=lambda size, iteration, seed: [iteration, iteration + 1], static=list(range(4)))
    task = SimpleNamespace(validation=[SimpleNamespace(id=str(i)) for i in range(10)])
    return RotatingPrefetch(router=router, task=task, split=split, cfg=SimpleNamespace(evolution=evolution),
                            executor=executor)


def test_a_guess_is_waited_for_and_a_program_whose_read_changes_its_state_is_not_evaluated_ahead():
    ex = _Executor()
    pf = _prefetch(ex)
    try:
        launched = pf._launch(2, PURE, take_prestart=True) + pf._launch(2, COUNTING, take_prestart=True)
        assert pf._launch(2, PURE, take_prestart=False) == 0           # one guess per program and iteration
        time.sleep(0.2)
        # Only the program whose reads leave its knowledge base as it was is evaluated ahead (its
        # formulations are all a state-changing one gets: no loaded constants here, so none).
        assert launched == 1 and [(j.source, j.indices, j.take_prestart) for j in ex.jobs] == [(PURE, (2, 3), True)]
        waited: list = []
        t = threading.Thread(target=lambda: waited.append(pf.settle(2, PURE)))
        t.start()
        time.sleep(0.3)
        assert t.is_alive() and not waited                              # the iteration waits for its guess
        ex.release.set()
        t.join(5)
        assert waited and waited[0] >= 0.3
        assert pf.settle(2, COUNTING) is None and pf.settle(3, PURE) is None
    finally:
        ex.release.set()
        pf.close()


def test_each_guess_is_counted_used_or_not_in_the_events_the_summary_and_the_end_lines(tmp_path, capsys):
    import json
    run, _ = _run(tmp_path, "counted", *EVERY_GUESS)
    said = " ".join(capsys.readouterr().out.split())
    its = [e for e in events(run) if e["event"] == "iteration"]
    guesses = json.loads((run / "summary.json").read_text())["guesses"]
    each = guesses["each"]
    # A guess is used exactly when its program is the parent its iteration drew.
    parents = {e["iteration"]: e["parent_id"] for e in its}
    assert each and all(g["used"] == (parents[g["iteration"]] == g["program_id"]) for g in each), (each, parents)
    assert any(not g["used"] for g in each), "this run's draws leave a wrong guess (lineage of seed 3)"
    assert guesses["used"] == sum(g["used"] for g in each) == sum(bool(e["timing"].get("rotating_ahead")) for e in its)
    assert guesses["sent"] == len(each) and guesses["declined"] == 0
    # What they cost is the ledger's prefetch scope, request for request and token for token.
    asked = [r for r in usage(run) if r["scope"] == "prefetch" and not r["cache_hit"]]
    assert guesses["requests"] == sum(1 + r["retries"] for r in asked) == sum(g["requests"] for g in each) > 0
    assert guesses["prompt_tokens"] == sum(r["prompt_tokens"] for r in asked) == sum(g["prompt_tokens"] for g in each)
    # Each iteration's event carries the guesses made for its batch (what the live view sums).
    for e in its[1:]:
        mine = [g for g in each if g["iteration"] == e["iteration"]]
        assert e["timing"]["guesses"]["sent"] == len(mine)
        assert e["timing"]["guesses"]["used"] == sum(g["used"] for g in mine)
    from mstar.ui.live import guesses as live_guesses
    from mstar.run import events as ev_types
    live = live_guesses(ev_types.iterations(ev_types.read_lineage(run / "lineage.jsonl")))
    assert (live["sent"], live["used"]) == (guesses["sent"], guesses["used"])
    assert f"guesses {guesses['used']}/{guesses['sent']} used" in said
    assert f"{guesses['prompt_tokens']:,} prompt tokens on them" in said


def _ledger_router(latency_s: float, answer_tokens: int) -> SimpleNamespace:
    """A router whose ledger holds seed_b's static evaluation: 4 questions, their prompts and replies."""
    ledger = Ledger()
    for kind in ("formulate_query", "answer") * 4:
        ledger.add(UsageRecord("task", "m", "openai", answer_tokens, 5, latency_s, kind=kind, scope="seed_b"))
    return SimpleNamespace(ledger=ledger)


def test_a_guess_whose_expected_saving_is_below_its_cost_is_not_sent():
    seen = [_entry("seed_a", 0.5), _entry("seed_b", 0.4)]
    seen[0].source = seen[1].source = PURE     # both pure readers: evaluations, not formulations
    seen[1].source = PURE + "# b\n"
    last = lambda candidates, rng: candidates[-1]   # noqa: E731 -- the child when it joins, else seed_b: p = 1/3
    sent = {}
    for latency in (0.01, 2.0):
        ex = _Executor()
        ex.release.set()
        pf = _prefetch(ex, _ledger_router(latency, answer_tokens=1000), guess_worth=4000.0)
        try:
            # seed_b's batch of 2 questions costs 2 x 2 x 1000 tokens, and it is wrong 2 times in 3: 2,667
            # tokens expected lost. Saved: 1/3 x 2 replies x latency, at 4,000 tokens a second: 27 at 10 ms,
            # 5,333 at 2 s.
            sent[latency] = pf.ahead(1, seen, seen[0], last, lambda: random.Random(0))
            time.sleep(0.1)
            assert len(ex.jobs) == sent[latency]
            assert pf.report()["declined"] == 1 - sent[latency]
        finally:
            pf.close()
    assert sent == {0.01: 0, 2.0: 1}
    assert not worth_sending(1 / 3, 2, 0.01, 4000, 1000.0) and worth_sending(1 / 3, 2, 2.0, 4000, 4000.0)


def test_the_odds_of_a_guess_learn_from_the_children_the_run_has_made():
    seen = [_entry("a", 0.5), _entry("b", 0.4)]
    best = lambda candidates, rng: max(candidates, key=lambda e: e.static_score)   # noqa: E731
    child = _entry("child", 0.0)
    prior = dict((e.program_id, p) for e, p in draw_odds(best, seen, seen[1], child, random.Random))
    # Before any child: a is drawn unless the child joins as the best (one outcome of three).
    assert prior == pytest.approx({"a": 2 / 3, "child": 1 / 3})
    # Three children that lost 0.1 to their parents, one that did not join: a, five times in six.
    learnt = dict((e.program_id, p) for e, p in draw_odds(best, seen, seen[1], child, random.Random,
                                                          [-0.1, -0.1, -0.1, None]))
    assert learnt == pytest.approx({"a": 6 / 7, "child": 1 / 7})

"""The next rotating batch's query formulations, asked while the child is evaluated
(mstar/rotating_prefetch.py): the same lineage, a shorter chain, a bounded guess."""
from __future__ import annotations

import random

from failure_helpers import endpoint, events, stable, usage

from mstar.cli import main
from mstar.pool import PoolEntry
from mstar.rotating_prefetch import next_parents
from mstar.strategies.selection import SoftmaxSelection
from mstar.testing.fake_server import FakeOpenAIServer, offline_responder

RUN = ["evolve", "--task", "sample", "--size", "0.3", "--static-size", "6", "--iterations", "4", "--seed", "3",
       "--confirm-size", "0", "--quiet"]


def _run(tmp_path, name: str, *extra: str):
    with FakeOpenAIServer(offline_responder(), latency_s=0.15) as srv:
        run = tmp_path / name
        assert main([*RUN, "--out", str(run), *extra,
                     *endpoint(srv.base_url, tmp_path / f"cache-{name}", concurrency=64)]) == 0
        return run, len(srv.requests)


def test_the_prefetch_keeps_the_lineage_and_shortens_the_rotating_evaluations(tmp_path):
    on, sent_on = _run(tmp_path, "on")
    off, sent_off = _run(tmp_path, "off", "--no-prefetch")
    ev_on, ev_off = events(on), events(off)
    # The same parents, batches, children and scores (replay keys name the server's port: they differ).
    same = lambda evs: [{k: v for k, v in e.items() if k != "replay_keys"} for e in stable(evs)]   # noqa: E731
    assert same(ev_on) == same(ev_off)
    its_on = [e for e in ev_on if e["event"] == "iteration"]
    its_off = [e for e in ev_off if e["event"] == "iteration"]
    chain = lambda its: sum(e["timing"].get("rotating_chain_calls", 0) for e in its)   # noqa: E731
    # Every right guess saves a request in a row (iteration 1 has no child before it to overlap).
    assert chain(its_on) < chain(its_off), (chain(its_on), chain(its_off))
    asked = [r for r in usage(on) if r["scope"] == "prefetch"]
    assert asked and not [r for r in usage(off) if r["scope"] == "prefetch"]
    # The guess is bounded: at most three parents' formulations of a 5-item batch per iteration.
    assert len(asked) <= 3 * 5 * (len(its_on) - 1)
    assert sent_on - sent_off <= len([r for r in asked if not r["cache_hit"]])


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

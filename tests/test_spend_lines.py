"""What the console says about spend while a run goes: one projection of the whole run (the `plan`
line, then `-> ~... in all` on each iteration line), each seed's own cost, the ledger's every call
so far -- and no two whole-run figures for the same moment (an audited run printed $0.59 on the
plan line and `estimate whole run ~$0.22` on the next, then `-> $0.61` beside `projected $0.1505`)."""
from __future__ import annotations

import contextlib
import io
import json
import re
from types import SimpleNamespace

import pytest

from mstar.cli import main
from mstar.run import events as ev_types
from mstar.run.projection import Projection, Shape
from mstar.testing.fake_server import FakeOpenAIServer, offline_responder
from run_helpers import unwrapped

ROLES = ("task", "reflector", "toolkit", "judge")
PRICES = {"task": (0.20, 0.60), "toolkit": (0.20, 0.60), "judge": (0.20, 0.60), "reflector": (1.10, 4.40)}
# Any figure a line could give as the whole run's spend, each once: the projection (`~N calls ...
# in all`, after `->` on an iteration line) and what was printed beside it (words a reflector's
# title, printed in the same block, is unlikely to hold).
WHOLE_RUN = re.compile(r"(?:-> )?~[\d.]+[kM]? calls[^|]*?\bin all\b|-> ~|whole run ~|projected \$")
FIGURE = re.compile(r"~([\d.]+k?) calls,? ~?([\d.]+[kM]?) tok(?:ens)?,? ~?\$([\d.]+) in all")


def priced_config(tmp_path, base_url) -> str:
    lines = ["[llm]", "[llm.defaults]", 'backend = "openai"', f'base_url = "{base_url}"', "timeout_s = 30",
             "backoff_s = 0.01", "concurrency = 8"]
    for role in ROLES:
        lines += [f"[llm.{role}]", f'model = "offline-{role}"']
    for role, (i, o) in PRICES.items():
        lines += [f'[llm.prices."offline-{role}"]', f"input = {i}", f"output = {o}"]
    p = tmp_path / "priced.toml"
    p.write_text("\n".join(lines) + "\n")
    return str(p)


@pytest.fixture(scope="module")
def priced_run(tmp_path_factory):
    """A small run against the fake server, priced from a config file: its console and folder."""
    tmp = tmp_path_factory.mktemp("priced")
    out = io.StringIO()
    with FakeOpenAIServer(offline_responder()) as srv, contextlib.redirect_stdout(out):
        assert main(["evolve", "--task", "sample", "--size", "0.3", "--seeds", "vector_search,llm_summarizer",
                     "--iterations", "2", "--no-cache", "--no-preflight", "--out", str(tmp / "run"),
                     "--config", priced_config(tmp, srv.base_url)]) == 0
    return out.getvalue(), tmp / "run"


def _blocks(out: str) -> list[str]:
    """The console from the first seed on, one entry per event: its line with every indented
    line under it (the `all calls so far` line and an iteration's title included)."""
    text = unwrapped(out)
    return [b for b in text[text.index("\nseed "):].splitlines() if b.strip()]


def test_no_two_whole_run_figures_are_printed_for_the_same_moment(priced_run):
    out, _ = priced_run
    blocks = _blocks(out)
    for block in blocks:
        assert len(WHOLE_RUN.findall(block)) <= 1, block
    plan = [b for b in blocks if b.startswith("plan ")]
    iters = [b for b in blocks if b.startswith("iter ")]
    assert len(plan) == 1 and len(iters) == 2
    for block in plan + iters:       # each says the whole run once, in dollars too (the calls are priced)
        assert FIGURE.search(block), block


def test_the_last_projection_is_what_the_run_then_spent(priced_run):
    # The last iteration line knows the programs the end will test (the champion and the best
    # seed, once when they are one): priced twice, this line had said ~1.6x what the run spent.
    out, run = priced_run
    last = FIGURE.search([b for b in _blocks(out) if b.startswith("iter ")][-1])
    total = json.loads((run / "summary.json").read_text())["llm"]["total"]
    assert float(last.group(3)) == pytest.approx(total["cost_usd"], rel=0.1)


def test_a_seed_line_shows_its_own_cost_and_every_call_so_far_is_said_once_after_the_seeds(priced_run):
    out, run = priced_run
    blocks = _blocks(out)
    seeds = {e.program_id: e.llm for e in ev_types.read_lineage(run / "lineage.jsonl")
             if isinstance(e, ev_types.SeedEvent)}
    for pid, llm in seeds.items():
        [line] = [b for b in blocks if b.startswith(f"seed  {pid} ")]
        assert f"cost {llm['calls']} calls" in line and "all calls so far" not in line
    # Once the seeds are in (they run together: the same sum under each seed said nothing new),
    # then under every iteration.
    assert sum("all calls so far: $" in b for b in blocks) == 3
    assert "all calls so far: $" in [b for b in blocks if b.startswith("plan ")][0]


def test_the_plan_prices_the_reflector_calls_of_an_iteration():
    calls = [SimpleNamespace(kind="answer", role="task", scope="seed_a", cost_usd=0.001, billed_tokens=10)] * 2
    router = SimpleNamespace(ledger=SimpleNamespace(snapshot=lambda: calls), spent_in=lambda scope: {})
    shape = Shape(iterations=3, n_seeds=1, train_episodes=2, static_size=2, rotating_size=1, rotating_fresh=True,
                  test_episodes=3, test_queries=4, confirm_share=0.0, reflector_prompt_tokens=1000,
                  reflector_usd=0.02)
    proj = Projection(router, shape)
    proj.observe(ev_types.from_dict({"event": "seed", "program_id": "seed_a", "static_score": 0.5,
                                     "llm": {"calls": 2, "prompt_tokens": 20, "completion_tokens": 0,
                                             "cost_usd": 0.002}}))
    # the child on 2 static questions + the parent on 1 rotating ($0.001 each) + 1.5 reflector calls
    assert proj.first.usd == pytest.approx(3 * 0.001 + 1.5 * 0.02)
    assert "$0.0330 per iteration" in proj.plan_line() and "(2 programs)" in proj.plan_line()

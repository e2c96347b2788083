"""The algorithm's switches do what they say (issue 15): --selection max|latest, --tau, --toolkit-budget,
--split-seed; and the report names them. Small offline runs of the built-in sample task."""
from __future__ import annotations

import json

import pytest

from mstar.cli import main
from mstar.run import events as ev_types

SMALL = ["--task", "sample", "--size", "0.3", "--static-size", "6", "--confirm-size", "0", "--quiet"]


def _run(tmp_path, name: str, *flags: str) -> list:
    out = tmp_path / name
    assert main(["evolve", *SMALL, *flags, "--out", str(out)]) == 0
    return ev_types.read_lineage(out / "lineage.jsonl")


def _candidates(evs: list, it) -> list:
    """The programs the iteration could choose from, in pool order, with their static scores."""
    scores, no_change = {}, set()
    for e in evs:
        if isinstance(e, ev_types.SeedEvent):
            scores[e.program_id] = e.static_score
        elif isinstance(e, ev_types.IterationEvent) and e.status == "ok":
            scores[e.program_id] = e.static_score
            if e.no_change:
                no_change.add(e.program_id)
    seen = [(pid, scores[pid]) for pid in it.pool_seen]
    return [c for c in seen if c[0] not in no_change] or seen


def test_selection_max_always_takes_the_best_and_a_tiny_tau_agrees(tmp_path):
    evs = _run(tmp_path, "max", "--selection", "max", "--iterations", "5", "--seed", "2")
    its = ev_types.iterations(evs)
    assert len(its) == 5
    for it in its:
        cands = _candidates(evs, it)
        best = max(cands, key=lambda c: (c[1], -cands.index(c)))
        assert it.parent_id == best[0], f"iteration {it.iteration} chose {it.parent_id}, best was {best}"
    # softmax with tau -> 0 draws among the best only (static scores are multiples of 1/6 here, so
    # a lower one has weight exp(-(1/6)/tau), about 1e-145); ties may go either way
    cold = _run(tmp_path, "cold", "--tau", "0.0005", "--iterations", "5", "--seed", "2")
    for it in ev_types.iterations(cold):
        cands = dict(_candidates(cold, it))
        assert cands[it.parent_id] == max(cands.values())


def test_selection_latest_always_takes_the_newest(tmp_path):
    evs = _run(tmp_path, "latest", "--selection", "latest", "--iterations", "4", "--seed", "0")
    its = ev_types.iterations(evs)
    assert len(its) == 4
    for it in its:
        assert it.parent_id == _candidates(evs, it)[-1][0]
    assert any(it.parent_id.startswith("iter_") for it in its if it.iteration > 1) or \
        all(it.status != "ok" for it in its[:-1])


def test_a_hot_tau_spreads_the_parents_a_cold_one_concentrates_them(tmp_path):
    def parents(tau: str) -> set:
        return {it.parent_id for it in ev_types.iterations(
            _run(tmp_path, f"tau{tau}", "--tau", tau, "--iterations", "6", "--seed", "4"))}
    assert len(parents("100")) > len(parents("0.0005"))


TWO_CALLS = '''
from dataclasses import dataclass, field
INSTRUCTION_KNOWLEDGE_ITEM = "Note the facts."
INSTRUCTION_QUERY = "Say what is asked."
INSTRUCTION_RESPONSE = "Answer briefly."
ALWAYS_ON_KNOWLEDGE = ""

@dataclass
class KnowledgeItem:
    note: str = field(default="", metadata={"description": "a fact"})

@dataclass
class Query:
    text: str = field(default="", metadata={"description": "the question"})

class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit

    def write(self, item, raw_text):
        pass

    def read(self, query):
        done = 0
        for _ in range(2):
            try:
                self.toolkit.llm_completion([{"role": "user", "content": "Say ok."}])
                done += 1
            except Exception:
                pass
        return f"calls {done}"
'''


@pytest.mark.parametrize("budget, expected", [("1", "calls 1"), ("2", "calls 2"), ("0", "calls 0")])
def test_toolkit_budget_caps_the_calls_of_each_read(tmp_path, budget, expected):
    prog = tmp_path / "two_calls.py"
    prog.write_text(TWO_CALLS)
    out = tmp_path / f"b{budget}"
    assert main(["evolve", *SMALL, "--seeds", str(prog), "--iterations", "0", "--toolkit-budget", budget,
                 "--out", str(out)]) == 0
    cases = json.loads(next((out / "cases").glob("*.static.json")).read_text())["cases"]
    assert cases and all(c["retrieved"] == expected for c in cases)
    assert json.loads((out / "config.json").read_text())["sandbox"]["llm_calls_per_op"] == int(budget)


def test_evolution_seeds_share_the_split_and_differ_in_lineage(tmp_path):
    splits, lineages = [], []
    for seed in range(5):
        evs = _run(tmp_path, f"s{seed}", "--seed", str(seed), "--iterations", "3")
        splits.append((tmp_path / f"s{seed}" / "split.json").read_text())
        lineages.append([(it.parent_id, it.title, it.rotating_batch) for it in ev_types.iterations(evs)])
    assert len(set(splits)) == 1                                   # --split-seed (default 42) fixes it
    assert len({json.dumps(lin) for lin in lineages}) == 5          # --seed changes the draws
    other = tmp_path / "other"
    assert main(["evolve", *SMALL, "--split-seed", "7", "--iterations", "0", "--out", str(other)]) == 0
    assert (other / "split.json").read_text() != splits[0]


def test_the_report_names_the_algorithm_and_each_rules_champion(tmp_path):
    _run(tmp_path, "rep", "--selection", "max", "--toolkit-budget", "3", "--iterations", "2", "--seed", "1")
    assert main(["report", str(tmp_path / "rep"), "--out", str(tmp_path / "rep.html")]) == 0
    html = (tmp_path / "rep.html").read_text()
    assert "selection max" in html and "toolkit budget 3 call(s) per op" in html and "split seed 42" in html
    assert "confirmed: <span class='id'>" in html and "static: <span class='id'>" in html
    assert "no confirmation race: --confirm-size 0" in html
    from mstar.run.report import _race
    assert _race({"confirm_top": 3, "confirm_size": 200, "confirm_rounds": 10, "confirm_budget": 0.2}) == \
        "confirm the programs that may be best (at least the top 3) on up to 200 items in 10 batches within 20% "\
        "of the tokens asked"

"""Spend you can see coming, and a run that says when it stops improving (issue 28): the whole
run's projected spend on the progress lines, the stalled count, and `--patience N`."""
from __future__ import annotations

import io
import json
from types import SimpleNamespace

from mstar.cli import main
from mstar.evaluation.records import CaseResult, EvalResult
from mstar.final.champion import paired_gain
from mstar.pool import Pool, PoolEntry
from mstar.run import events as ev_types
from mstar.run.progress import ProgressPrinter
from mstar.run.projection import Projection, Shape
from mstar.strategies.stopping import Patience, is_gain

# The whole sample, as the README's run: its first child is a significant gain over the best seed.
PATIENT = ["--task", "sample", "--seed", "0", "--rotating", "reuse", "--iterations", "30", "--patience", "3"]


def _record(kind: str, tokens: int, scope: str = "seed_a"):
    return SimpleNamespace(kind=kind, role="task", scope=scope, cache_hit=False, cost_usd=0.0, billed_tokens=tokens)


def _iteration(it: int, *, gain: bool = False, calls: int = 10, tokens: int = 1000) -> dict:
    evidence = {"mean": 0.2 if gain else 0.0, "low": 0.1 if gain else -0.1, "high": 0.3, "n": 6,
                "significant": gain}
    return {"event": "iteration", "iteration": it, "parent_id": "seed_a", "status": "ok", "title": f"edit {it}",
            "program_id": f"iter_{it:03d}", "static_score": 0.5, "delta": 0.0, "best_static_score": 0.5,
            "evidence": evidence, "progress_evidence": evidence, "seconds": 1.0,
            "llm": {"calls": calls, "prompt_tokens": tokens, "completion_tokens": 0}}


def test_the_projection_follows_the_seeds_then_the_iterations_and_the_stalled_count_resets_on_a_gain():
    # One seed: 2 episodes written (100 tokens each), 2 questions (query 50 + answer 50 tokens each).
    seed_calls = [_record("extract_knowledge_item", 100)] * 2 + [_record("formulate_query", 50),
                                                                 _record("answer", 50)] * 2
    router = SimpleNamespace(ledger=SimpleNamespace(snapshot=lambda: seed_calls), spent_in=lambda scope: {})
    shape = Shape(iterations=4, n_seeds=1, train_episodes=2, static_size=2, rotating_size=1, rotating_fresh=True,
                  test_episodes=3, test_queries=4, confirm_share=0.1, reflector_prompt_tokens=1000)
    out = io.StringIO()
    printer = ProgressPrinter(total=4, out=out, projection=Projection(router, shape), patience=3,
                              width=200, legend=False)
    printer(ev_types.from_dict({"event": "seed", "program_id": "seed_a", "static_score": 0.5,
                                "llm": {"calls": 6, "prompt_tokens": 400, "completion_tokens": 0}}))
    # One iteration before any ran: the child (2 x 100 + 2 x 100 tokens, 6 calls), the parent on
    # one rotating question (100, 2), 1.5 reflector calls of 1,000 + 2,000 tokens: 9.5 calls 5,000
    # tok. The run: 6 calls 400 tok spent + 4 iterations, +10% confirmation, + the test of two
    # programs, 2 x (3 x 100 + 4 x 100) tok, 2 x (3 + 4 x 2) calls: 70.4 calls, 23,840 tok.
    plan = out.getvalue().splitlines()[1]
    assert plan.startswith("plan    4 iterations: ~70 calls, ~23.8k tokens in all") and "test ~22 calls" in plan
    assert "confirmation ~10% of the spend before it" in plan
    for it, gain in ((1, False), (2, False), (3, True), (4, False)):
        printer(ev_types.from_dict(_iteration(it, gain=gain)))
    lines = [line for line in out.getvalue().splitlines() if line.startswith("iter")]
    assert "stalled 1/3" in lines[0] and "stalled 2/3" in lines[1] and "stalled" not in lines[2]
    assert "stalled 1/3" in lines[3]
    # After the iterations: 46 calls 4,400 tok spent, none left; +10%, + the test. No child beat
    # the seed (0.5 each), so the end tests the seed alone (3 + 4 x 2 calls, 700 tok): 61.6 calls
    # 5,540 tok -- not twice, as while a child could still become the champion.
    assert "spend 46 calls 4.4k tok -> ~62 calls 5.5k tok in all" in lines[3]


def test_patience_counts_iterations_since_the_last_gain_over_the_best():
    rule = Patience(3)
    events = [ev_types.from_dict(_iteration(i, gain=i == 2)) for i in range(1, 6)]
    reasons = []
    for ev in events:
        rule.observe(ev)
        reasons.append(rule.reason())
    assert reasons[:4] == [None, None, None, None] and "no significant gain in 3 iterations" in reasons[4]
    # A gain over a weak parent that does not beat the best program is no gain of the run.
    weak = _iteration(6, gain=True)
    weak["progress_evidence"] = {"mean": -0.1, "low": -0.2, "high": 0.0, "n": 6, "significant": False}
    assert is_gain(ev_types.from_dict(_iteration(7, gain=True))) and not is_gain(ev_types.from_dict(weak))


def test_a_patient_run_ends_early_still_confirms_and_tests_its_champion(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["evolve", *PATIENT, "--out", str(run)]) == 0
    said = capsys.readouterr().out
    evs = ev_types.read_lineage(run / "lineage.jsonl")
    its = ev_types.iterations(evs)
    assert 3 <= len(its) < 30 and isinstance(evs[-1], ev_types.TestEvent)
    assert any(isinstance(e, ev_types.ConfirmationEvent) for e in evs)
    # It stopped at the first moment the last 3 iterations had no gain over the best, not before
    # (no line caught up in this run -- its reason would name it -- so gains are all that counted).
    summary = json.loads((run / "summary.json").read_text())
    assert "level with the best" not in summary["early_stop"]
    streak = [sum(1 for _ in _tail_without_gain(its[:k])) for k in range(1, len(its) + 1)]
    assert streak[-1] == 3 and all(s < 3 for s in streak[:-1])
    # Each child was measured against the run's reference: the best seed, then the best program
    # as of the last gain.
    scores = {e.program_id: e.static_score for e in ev_types.seeds(evs)}
    reference = max(scores, key=lambda p: (scores[p], -list(scores).index(p)))
    moved = 0
    for ev in its:
        assert ev.reference_id == reference or not ev.added_child
        if ev.added_child:
            scores[ev.program_id] = ev.static_score
        if is_gain(ev):
            reference, moved = max(scores, key=lambda p: (scores[p], -list(scores).index(p))), moved + 1
    assert moved >= 1, "this run has a significant gain, after which its children face the new best"
    assert summary["iterations"] == len(its) and summary["test_score"] is not None and summary["stop_reason"] is None
    assert "--patience 3" in summary["early_stop"]
    assert f"ended   after iteration {len(its)}: --patience 3" in said and "stalled 3/3" in said
    assert "plan    30 iterations:" in said


def _tail_without_gain(its):
    for ev in reversed(its):
        if is_gain(ev):
            return
        yield ev


def test_the_test_is_projected_at_the_costs_of_the_best_program_so_far_and_the_best_seed():
    # A costly seed (1,000 tokens a question) and a cheap child that beats it (10 a question).
    seed_calls = [_record("extract_knowledge_item", 100)] * 2 + [_record("answer", 1000)] * 2
    child_calls = [_record("extract_knowledge_item", 100, "iter_001")] * 2 + \
        [_record("answer", 10, "iter_001")] * 3          # 2 static questions + 1 rotating
    calls = list(seed_calls)
    router = SimpleNamespace(ledger=SimpleNamespace(snapshot=lambda: calls), spent_in=lambda scope: {})
    shape = Shape(iterations=1, n_seeds=1, train_episodes=2, static_size=2, rotating_size=1, rotating_fresh=True,
                  test_episodes=3, test_queries=4, confirm_share=0.0, reflector_prompt_tokens=1000)
    proj = Projection(router, shape)
    proj.observe(ev_types.from_dict({"event": "seed", "program_id": "seed_a", "static_score": 0.5, "llm": {}}))
    # before any child: the best seed, twice: 2 x (3 x 100 + 4 x 1000)
    assert proj.test.tokens == 2 * (3 * 100 + 4 * 1000)
    calls += child_calls
    better = _iteration(1, gain=True)
    better["static_score"] = 0.8
    proj.observe(ev_types.from_dict(better))
    # the champion-to-be (the child) and the best seed: (3 x 100 + 4 x 10) + (3 x 100 + 4 x 1000)
    assert proj.test.tokens == (3 * 100 + 4 * 10) + (3 * 100 + 4 * 1000)


def test_before_any_child_the_plan_prices_an_iteration_at_the_best_seed_not_the_costliest():
    # The offline sample's case: the best seed is a cheap vector search, a weak seed costs 50x more
    # a question; the children descend from the best one (the plan said 13.7M tokens, the run spent 2.4M).
    calls = [_record("answer", 10, "seed_cheap")] * 2 + [_record("answer", 500, "seed_costly")] * 2
    router = SimpleNamespace(ledger=SimpleNamespace(snapshot=lambda: calls), spent_in=lambda scope: {})
    shape = Shape(iterations=10, n_seeds=2, train_episodes=2, static_size=2, rotating_size=1, rotating_fresh=True,
                  test_episodes=3, test_queries=4, confirm_share=0.0, reflector_prompt_tokens=1000)
    proj = Projection(router, shape)
    proj.observe(ev_types.from_dict({"event": "seed", "program_id": "seed_cheap", "static_score": 0.6, "llm": {}}))
    proj.observe(ev_types.from_dict({"event": "seed", "program_id": "seed_costly", "static_score": 0.2, "llm": {}}))
    # a child on the static set (2 x 10) + the parent on a rotating item (10) + 1.5 reflector calls of 3,000
    assert proj.first.tokens == 2 * 10 + 10 + 1.5 * (1000 + 2000)
    assert proj.test.tokens == 2 * (4 * 10)
    assert "~" in proj.plan_line() and "4.5k tok per iteration" in proj.plan_line()


def test_the_prefetchs_guesses_count_in_the_projection_though_no_event_carries_them():
    # Two iterations of 10 calls each were recorded; the prefetch (mstar/iteration/rotating_prefetch.py) sent
    # 6 more calls under its own scope, which the events do not carry: 3 more per iteration.
    calls = [_record("answer", 10, "seed_a")] * 2
    guessed = {"calls": 6, "prompt_tokens": 600, "completion_tokens": 0}
    router = SimpleNamespace(ledger=SimpleNamespace(snapshot=lambda: calls),
                             spent_in=lambda scope: guessed if scope == "prefetch" else {})
    shape = Shape(iterations=4, n_seeds=1, train_episodes=2, static_size=2, rotating_size=1, rotating_fresh=True,
                  test_episodes=3, test_queries=4, confirm_share=0.0, reflector_prompt_tokens=1000)
    proj = Projection(router, shape)
    proj.observe(ev_types.from_dict({"event": "seed", "program_id": "seed_a", "static_score": 0.5, "llm": {}}))
    for it in (1, 2):
        proj.observe(ev_types.from_dict(_iteration(it, calls=10, tokens=1000)))
    test_calls = proj.test.calls
    # spent 20 + 6 guessed; 2 iterations left at (10 + 3) each; then the test
    assert proj.total().calls == 20 + 6 + 2 * 13 + test_calls
    assert proj.total().tokens == 2000 + 600 + 2 * 1300 + proj.test.tokens


def _evidence_run(scores: dict[str, dict]):
    """A run whose programs were scored on these items (static cases; no rotating batches)."""
    results = {pid: EvalResult(0.0, [CaseResult(q, "q", "a", "x", s, None, {}, "", []) for q, s in items.items()],
                               [], {}) for pid, items in scores.items()}
    return SimpleNamespace(static_result=results.get, rotating_scores=lambda pid: {})


def test_patience_waits_while_the_best_climbs_significantly_over_the_best_of_n_iterations_ago():
    """No child is a significant gain over the reference (each event says so), yet the best program
    climbed: iter_004 answers 20 of 30 items its predecessor iter_001 failed. Patience waits for it
    until the best of 3 iterations ago is iter_004 itself, then stops."""
    items = [f"v{i}" for i in range(30)]
    scores = {"seed_a": {q: 0.0 for q in items}, "iter_001": {q: float(i < 5) for i, q in enumerate(items)},
              "iter_004": {q: float(i < 25) for i, q in enumerate(items)}}
    for pid in ("iter_002", "iter_003", "iter_005", "iter_006", "iter_007", "iter_008"):
        scores[pid] = dict(scores["seed_a"])
    static = {"iter_001": 0.5, "iter_004": 0.6}
    events = []
    for it in range(1, 9):
        d = _iteration(it)
        d["reference_id"], d["static_score"] = "seed_a", static.get(f"iter_{it:03d}", 0.1)
        d["best_static_score"] = max([0.4] + [v for k, v in static.items() if int(k[-3:]) <= it])
        events.append(ev_types.from_dict(d))
    blind, patient = Patience(3), Patience(3)
    patient.bind(_evidence_run(scores))
    said = {"blind": [], "patient": []}
    for ev in events:
        for name, rule in (("blind", blind), ("patient", patient)):
            rule.observe(ev)
            said[name].append(rule.reason())
    # Without the evidence: 3 iterations without a gain end the run after iteration 3.
    assert said["blind"][2] is not None
    # With it: after iteration 3 there is no best of 3 iterations before to compare with, so it
    # would stop too; after 4-6 the best (iter_004) is significantly above the best of 3 iterations
    # ago (iter_001), so it waits; after 7 the best of 3 iterations ago is iter_004 itself.
    assert said["patient"][2] is not None
    assert said["patient"][3:6] == [None, None, None]
    assert patient.best_at == ["iter_001"] * 3 + ["iter_004"] * 5
    assert "not significantly better than the best of 3 iterations ago" in said["patient"][6]


class _Run:
    """A run as patience sees it (loop.Evolution's parts it reads): the pool, each program's static
    cases, the rotating scores its parents were given. `step` does what Evolution.remember does:
    the child joins, its parent's rotating scores are kept, then the stop condition observes; the
    event carries the child's paired static difference with its parent (`evidence`), as the loop's;
    whether it is a gain over the reference (`progress_evidence`) the test says."""

    def __init__(self, rule: Patience, seed_static: dict[str, float]) -> None:
        self.pool, self.rotating, self.results, self.rule, self.events = Pool(), {}, {}, rule, []
        self.climbs: list[dict | None] = []     # what rule.climbing() said after each iteration
        self._add("seed_a", None, 0, seed_static)
        rule.bind(self)

    def _add(self, pid, parent, it, static):
        self.results[pid] = EvalResult(sum(static.values()) / len(static),
                                       [CaseResult(q, "q", "a", "x", s, None, {}, "", []) for q, s in static.items()],
                                       [], {})
        self.pool.add(PoolEntry(pid, parent, it, "", self.results[pid].mean_score))

    def static_result(self, pid):
        return self.results.get(pid)

    def rotating_scores(self, pid):
        return dict(self.rotating.get(pid, {}))

    def step(self, it: int, parent: str, static: dict[str, float], rotating: dict | None = None,
             gain: bool = False) -> str | None:
        pid = f"iter_{it:03d}"
        self._add(pid, parent, it, static)
        d = _iteration(it, gain=gain)
        d.update(parent_id=parent, static_score=self.results[pid].mean_score, rotating_scores=rotating or {},
                 best_static_score=self.pool.best().static_score, reference_id="seed_a",
                 evidence=paired_gain(self.results[pid], self.results[parent]))   # against its parent, as the loop's
        if rotating:
            self.rotating.setdefault(parent, {}).update(rotating)
        self.events.append(ev_types.from_dict(d))
        self.rule.observe(self.events[-1])
        self.climbs.append(self.rule.climbing())
        return self.rule.reason()


def _items(prefix: str, n: int, right: int) -> dict[str, float]:
    """n items of which the first `right` are answered (score 1), the rest not (0)."""
    return {f"{prefix}{i}": float(i < right) for i in range(n)}


def _lucky_then_better(later_rotating_right: int) -> tuple[list, Patience, _Run]:
    """A `--rotating fresh` lineage: iter_001 is lucky on the 20 static items (18 right) and
    answers 9 of the 30 rotating items it is then given; iter_003 has a lower static score (17)
    and answers `later_rotating_right` of 30 other rotating items (each iteration draws a new
    batch). No child is a significant gain after iteration 1 (the events say so), and the static
    ranking keeps iter_001 on top."""
    rule = Patience(3)
    run = _Run(rule, _items("s", 20, 10))
    weak = _items("s", 20, 10)
    said = [run.step(1, "seed_a", _items("s", 20, 18), gain=True),
            run.step(2, "iter_001", weak, rotating=_items("r", 30, 9)),
            run.step(3, "iter_001", _items("s", 20, 17)),
            run.step(4, "iter_003", weak, rotating=_items("t", 30, later_rotating_right))]
    said += [run.step(it, "seed_a", weak) for it in range(5, 10)]
    return said, rule, run


def test_patience_follows_the_best_estimate_not_a_lucky_static_score():
    """The best by static score (iter_001, 18 of 20) is lucky: it answers 9 of its 30 rotating
    items, the later iter_003 27 of its own 30. Patience by the best static score compares
    iter_001 with itself (the best now and 3 iterations ago) and stops after iteration 4; the best
    estimate (static and rotating items, race_entry) moves to iter_003, whose estimate is
    significantly above iter_001's (paired on the 20 static items alone it is not: 17 against
    18), so the run waits until the best of 3 iterations ago is iter_003 itself (after 7)."""
    said, rule, run = _lucky_then_better(27)
    assert said[:6] == [None] * 6, "the best estimate climbed: the run waits"
    assert [c["basis"] for c in run.climbs[3:6]] == ["estimates"] * 3
    assert all(c["now"] == "iter_003" and c["then"] == "iter_001" for c in run.climbs[3:6])
    assert rule.best_at == ["iter_001"] * 3 + ["iter_003"] * 6
    assert "not significantly better than the best of 3 iterations ago" in said[6]
    # The same events, seen by a rule with no evidence bound (the best static score): stops after 4.
    blind = Patience(3)
    for it, ev in enumerate(run.events, 1):
        blind.observe(ev)
        if blind.reason():
            break
    assert it == 4 and blind.best_at == ["iter_001"] * 4


def test_patience_still_stops_on_a_plateau_of_estimates():
    """The same lineage, but iter_003 answers the rotating items as iter_001 did (9 of 30): its
    estimate is no better, nothing climbed, and the run stops after 3 iterations without a gain."""
    said, rule, _ = _lucky_then_better(9)
    assert said[:3] == [None, None, None]
    assert said[3] is not None and "no significant gain in 3 iterations" in said[3]


def _side_line(step_right: int) -> tuple[list, Patience, _Run]:
    """A `--rotating reuse` lineage (20 static items, nothing else): iter_001 is a gain over the
    seed (18 right against 10) and stays the best; iter_002, a child of the seed, answers as it
    does (10), and at iteration 4 its own child iter_004 answers `step_right`, items iter_001
    answers too. No child after iteration 1 is a gain over the reference (the events say so)."""
    rule = Patience(3)
    run = _Run(rule, _items("s", 20, 10))
    said = [run.step(1, "seed_a", _items("s", 20, 18), gain=True),
            run.step(2, "seed_a", _items("s", 20, 10)),
            run.step(3, "seed_a", _items("s", 20, 10)),
            run.step(4, "iter_002", _items("s", 20, step_right))]
    said += [run.step(it, "seed_a", _items("s", 20, 10)) for it in range(5, 10)]
    return said, rule, run


def test_a_side_lines_significant_step_level_with_the_best_keeps_the_run_going():
    """iter_004 answers 17 items where its parent answered 10 (significant) and is one item behind
    the best, iter_001 (not significant): a line catching up. The best never moves, so it never
    climbs; the step alone restarts the count, and the run stops 3 iterations after it, not after
    3 iterations without a gain (4)."""
    said, rule, run = _side_line(17)
    assert run.events[3].evidence["significant"] and run.events[3].evidence["mean"] > 0
    assert rule.above("iter_001", "iter_004") is None
    assert rule.best_at == ["iter_001"] * 9 and run.climbs == [None] * 9
    assert said[:6] == [None] * 6, "the line caught up at iteration 4: 3 more iterations"
    assert said[6] is not None and "(the last iter_004 at iteration 4)" in said[6]
    assert rule.last_step["child"] == "iter_004" and rule.last_step["best"] == "iter_001"
    # The same events, seen by a rule with no evidence bound (gains over the reference only): 4.
    blind = Patience(3)
    for it, ev in enumerate(run.events, 1):
        blind.observe(ev)
        if blind.reason():
            break
    assert it == 4


def test_a_significant_step_far_below_the_best_does_not_keep_the_run_going():
    """iter_004 answers 14 where its parent answered 10 (significant over its parent), but the best
    answers those and 4 more (significantly ahead of it): neither signal fires -- no gain over the
    reference, no line level with the best, the best not climbing -- and the run stops after 4."""
    said, rule, run = _side_line(14)
    assert run.events[3].evidence["significant"] and run.events[3].evidence["mean"] > 0
    assert rule.above("iter_001", "iter_004") is not None
    assert said[:3] == [None, None, None] and run.climbs[3] is None
    assert said[3] is not None and "no significant gain in 3 iterations" in said[3]
    assert rule.last_step is None and "level with the best" not in said[3]


def test_the_progress_line_shows_the_count_the_run_stops_on_and_why_it_goes_on_past_it():
    """With --patience the events carry the stop condition's own count (a line catching up resets
    it, a climbing best keeps the run going past N): the progress line shows that count, not the
    iterations since the last gain over the best."""
    said, rule, run = _side_line(17)
    out = io.StringIO()
    printer = ProgressPrinter(total=9, out=out, patience=3, width=200, legend=False)
    again = Patience(3)
    again.bind(run)
    for ev in run.events[:6]:
        again.observe(ev)
        ev.patience = again.state()          # as loop.Evolution.remember records it
        printer(ev)
    assert [ev.patience["quiet"] for ev in run.events[:6]] == [0, 1, 2, 0, 1, 2]   # the step at 4 resets it
    lines = [line for line in out.getvalue().splitlines() if line.startswith("iter")]
    assert "stalled" not in lines[3] and "stalled 2/3" in lines[5]      # since the last gain it is 5
    # A best that still climbs past N: said beside the count.
    climbing = _lucky_then_better(27)[2].events[4]
    climbing.patience = {"quiet": 4, "climbing": True}
    printer(climbing)
    assert "stalled 4/3, best still climbing" in [l for l in out.getvalue().splitlines() if l.startswith("iter")][-1]
    # The rule's own state, as the loop records it.
    assert Patience(3).state() == {"quiet": 0, "climbing": False}

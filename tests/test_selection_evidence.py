"""Selection you can trust (issue 18) and the runtime-fix loop (issue 15): paired evidence for
every child, no-change children, a confirmed champion, `--pick static`, and children that fail
at run time going back to the reflector. The reflector is scripted behind the real openai client
(tests/test_mutate.py's fixture); everything else runs for real, offline."""
from __future__ import annotations

import json
from types import SimpleNamespace


from mstar import champion
from mstar.cli import main
from mstar.config import EvolutionConfig, RunConfig, SandboxConfig
from mstar.evaluation.records import CaseResult, EvalResult
from mstar.loop import Evolution
from mstar.patch import make_patch
from mstar.pool import Pool, PoolEntry
from mstar.run import events as ev_types
from mstar.run.store import RunStore
from mstar.stats import paired_bootstrap
from mstar.tasks import load_task
from test_mutate import SEED, reply, scripted  # noqa: F401  (the fixture)

SB = SandboxConfig(call_timeout_s=20)


def test_the_paired_interval_sees_a_small_consistent_gain_that_unpaired_noise_would_hide():
    base = [0.2, 0.9, 0.4, 0.7, 0.1, 0.8, 0.5, 0.3, 0.6, 0.0] * 3
    better = [b + 0.05 for b in base]                 # +0.05 on every item
    mixed = [b + (0.5 if i % 2 else -0.5) for i, b in enumerate(base)]
    gain, noise = paired_bootstrap(better, base), paired_bootstrap(mixed, base)
    assert gain.significant and gain.low > 0.04 and gain.high < 0.06 and gain.n == 30
    assert not noise.significant and noise.low < 0 < noise.high
    assert paired_bootstrap(better, base).to_dict() == gain.to_dict()   # seeded: same scores, same interval


def _result(scores: list[float], ids: list[str]) -> EvalResult:
    cases = [CaseResult(i, "q", "a", "x", s, None, {}, "", []) for i, s in zip(ids, scores)]
    return EvalResult(sum(scores) / len(scores), cases, [], {})


def test_confirmation_picks_the_program_that_holds_up_not_the_luckiest():
    """`lucky` leads the static set but does worse on 100 more items than `steady`."""
    static_ids = [f"s{i}" for i in range(10)]
    pool = Pool()
    pool.add(PoolEntry("seed_a", None, 0, "steady-src", 0.5, ""))
    pool.add(PoolEntry("lucky", "seed_a", 1, "lucky-src", 0.7, ""))
    pool.add(PoolEntry("steady", "seed_a", 2, "steady2-src", 0.6, ""))
    static = {"seed_a": _result([0.5] * 10, static_ids), "lucky": _result([0.7] * 10, static_ids),
              "steady": _result([0.6] * 10, static_ids)}
    confirm_scores = {"steady-src": 0.3, "lucky-src": 0.4, "steady2-src": 0.8}

    class Executor:
        def run(self, job):
            n = len(job.indices)
            return _result([confirm_scores[job.source]] * n, [f"c{i}" for i in range(n)])

    evo = SimpleNamespace(pool=pool, executor=Executor(), task=SimpleNamespace(validation=list(range(120))),
                          split=SimpleNamespace(static=list(range(10))), static_result=static.get)
    got = champion.confirm(evo, top=3, size=100, split_seed=42)
    assert got.static_id == "lucky" and got.confirmed_id == "steady"
    assert got.champion("static") == "lucky" and got.champion("confirmed") == "steady"
    assert got.scores["steady"]["n"] == 110 and got.scores["lucky"]["union"] < got.scores["steady"]["union"]
    assert len(got.items) == 100 and not set(got.items) & set(range(10))     # outside the static set
    raced = champion.confirm(evo, top=3, size=100, split_seed=42, rounds=3)
    assert raced.confirmed_id == "steady" and len(raced.rounds) == 1 and raced.rounds[0]["decided"]
    assert raced.items == got.items          # a clear lead: no second round, the same sample


def _race(scores_of, static_size=10, validation=600, top=3, rounds=3):
    """confirm() on three programs whose score on validation item i is scores_of[source](i)."""
    static_ids = list(range(static_size))
    pool = Pool()
    for pid, src in (("a", "a-src"), ("b", "b-src"), ("c", "c-src")):
        pool.add(PoolEntry(pid, None, 0, src, 0.5, ""))
    static = {pid: _result([0.5] * static_size, [f"v{i}" for i in static_ids]) for pid in "abc"}
    asked = []

    class Executor:
        def run(self, job):
            asked.append((job.source, job.indices))
            return _result([scores_of[job.source](i) for i in job.indices], [f"v{i}" for i in job.indices])

    evo = SimpleNamespace(pool=pool, executor=Executor(), task=SimpleNamespace(validation=list(range(validation))),
                          split=SimpleNamespace(static=static_ids), static_result=static.get)
    return champion.confirm(evo, top=top, size=100, split_seed=42, rounds=rounds), asked


def _noise():
    """The first round's items, and two per-item noises that are balanced on them (each item's
    rank among its round's items decides), so that the paired differences vary."""
    batches = champion.confirmation_batches(600, list(range(10)), 100, 5, 42)
    rank = {i: r for b in batches for r, i in enumerate(b)}
    return (set(batches[0]), lambda i: 0.9 if rank.get(i, i) % 2 else 0.1,
            lambda i: 0.9 if (rank.get(i, i) // 2) % 2 else 0.1)


def test_an_undecided_confirmation_races_the_best_two_on_fresh_items():
    """On the first 100 items `a` leads `b` within the noise; on more items `b` is better."""
    first, noisy, other = _noise()
    scores_of = {"a-src": lambda i: noisy(i) + (0.04 if i in first else -0.1),
                 "b-src": lambda i: other(i) + 0.02, "c-src": lambda i: 0.2}
    got, asked = _race(scores_of)
    assert got.confirmed_id == "b" and got.static_id == "a"
    r1, r2 = got.rounds[0], got.rounds[1]
    assert (r1["leader"], r1["runner_up"], r1["decided"]) == ("a", "b", False)
    assert r1["gap"]["low"] < 0 < r1["gap"]["high"]                             # not significant after 100
    assert r2["programs"] == ["a", "b"] and r2["leader"] == "b"                  # c is out after round 1
    rounds_of = {src: [set(ix) for s, ix in asked if s == src] for src in scores_of}
    assert len(rounds_of["c-src"]) == 1 and len(rounds_of["a-src"]) == len(got.rounds) >= 2
    items = rounds_of["a-src"]
    assert not items[0] & items[1] and not (items[0] | items[1]) & set(range(10))   # fresh items each round
    assert got.scores["b"]["n"] == 10 + 100 * len(got.rounds) and got.scores["c"]["rounds"] == 1
    assert got.items == sorted(items[0]) + sorted(items[1]) + [i for s in items[2:] for i in sorted(s)]


def test_one_round_is_the_single_sample_and_the_race_stops_when_items_run_out():
    first, noisy, other = _noise()
    scores_of = {"a-src": lambda i: noisy(i) + (0.04 if i in first else -0.1),
                 "b-src": lambda i: other(i) + 0.02, "c-src": lambda i: 0.2}
    single, _ = _race(scores_of, rounds=1)
    assert single.confirmed_id == "a" and len(single.rounds) == 1 and len(single.items) == 100
    even = {"a-src": noisy, "b-src": noisy, "c-src": lambda i: 0.0}            # a and b never part
    short, asked = _race(even, validation=260, rounds=5)
    assert [len(r["programs"]) for r in short.rounds] == [3, 2, 2]              # 250 items: 100 + 100 + 50
    assert [r["items"] for r in short.rounds] == [100, 100, 50] and short.confirmed_id == "a"
    assert len(set(short.items)) == 250 and not set(short.items) & set(range(10))


def test_pick_static_keeps_the_papers_rule_and_both_choices_are_recorded(tmp_path):
    args = ["--task", "sample", "--size", "0.3", "--static-size", "6", "--seed", "3", "--iterations", "5"]
    for rule in ("static", "confirmed"):
        assert main(["evolve", *args, "--pick", rule, "--out", str(tmp_path / rule), "--quiet"]) == 0
    static, confirmed = (json.loads((tmp_path / r / "summary.json").read_text()) for r in ("static", "confirmed"))
    evs = ev_types.read_lineage(tmp_path / "static" / "lineage.jsonl")
    scored = [e for e in evs if isinstance(e, (ev_types.SeedEvent, ev_types.IterationEvent))
              and getattr(e, "static_score", None) is not None and (not hasattr(e, "added_child") or e.added_child)]
    top = max(scored, key=lambda e: (e.static_score, -scored.index(e)))
    assert static["best_id"] == top.program_id and static["pick_rule"] == "static"
    assert confirmed["best_id"] == confirmed["picks"]["confirmed"]["program_id"]
    assert confirmed["picks"]["static"]["program_id"] == static["best_id"]     # what the other rule would pick
    assert all(p["test_score"] is not None for p in confirmed["picks"].values())


def test_children_that_change_nothing_are_marked_told_and_not_chosen(tmp_path):
    args = ["--task", "sample", "--static-size", "25", "--seed", "2", "--iterations", "8"]
    assert main(["evolve", *args, "--out", str(tmp_path / "run"), "--quiet"]) == 0
    evs = ev_types.iterations(ev_types.read_lineage(tmp_path / "run" / "lineage.jsonl"))
    same = [e for e in evs if e.no_change]
    assert same, "this seed's run has children that answer as their parent did"
    for e in same:
        child = json.loads((tmp_path / "run" / "cases" / f"{e.program_id}.static.json").read_text())["cases"]
        parent = json.loads((tmp_path / "run" / "cases" / f"{e.parent_id}.static.json").read_text())["cases"]
        assert [c["answer"] for c in child] == [c["answer"] for c in parent]
        assert e.evidence["mean"] == 0 and not e.evidence["significant"]
        assert all(later.parent_id != e.program_id for later in evs if later.iteration > e.iteration)
    changed = [e for e in evs if e.added_child and not e.no_change]
    assert all(e.evidence["n"] == 25 for e in changed)


def test_a_no_change_note_reaches_the_next_reflection_on_that_parent():
    from mstar.strategies import FailureMemory

    memory = FailureMemory()
    memory.remember("iter_002", 3, "ok", "Shorten answers", [], 0.0, no_change=True)
    memory.remember("iter_002", 4, "ok", "Better ranking", [], 0.1)
    notes = memory.notes("iter_002")
    assert len(notes) == 1 and "Shorten answers" in notes[0] and "changed nothing" in notes[0]


# Passes the gates (their smoke test writes 4 short texts) but not an evaluation (more chunks).
BROKEN_READ = SEED.replace('        if self.doc_count == 0:\n            return "No information stored."\n',
                           '        if self.doc_count > 12:\n            raise KeyError("no index yet")\n')
FIXED = SEED.replace("n_results=min(5, self.doc_count)", "n_results=min(6, self.doc_count)")


def _run_with(script_replies, scripted, tmp_path, rounds=2):  # noqa: F811
    router, script = scripted(script_replies)
    cfg = RunConfig(name="t", seeds=("vector_search",), sandbox=SB,
                    evolution=EvolutionConfig(iterations=1, static_size=6, compile_fix_attempts=0,
                                              runtime_fix_rounds=rounds, confirm_top=1, seed=1))
    store = RunStore(tmp_path / "run")
    store.create()
    Evolution(cfg, load_task("sample", size=0.3), router, store).run()
    return ev_types.iterations(ev_types.read_lineage(tmp_path / "run" / "lineage.jsonl"))[0], script


def test_a_child_that_fails_at_run_time_is_fixed_and_enters_with_its_fixed_score(scripted, tmp_path):  # noqa: F811
    it, script = _run_with([reply(make_patch(SEED, BROKEN_READ), "Index first"),
                            reply(make_patch(BROKEN_READ, FIXED), "Do not raise")], scripted, tmp_path)
    assert it.status == "ok" and it.added_child
    assert [f["status"] for f in it.runtime_fixes] == ["ok"] and "KeyError" in it.runtime_fixes[0]["error"]
    assert "<task>compile_fix</task>" in script.prompts[1] and "no index yet" in script.prompts[1]
    source = (tmp_path / "run" / "programs" / f"{it.program_id}.py").read_text()
    assert source == FIXED and it.static_score == it.runtime_fixes[0]["static_score"] > 0


def test_a_child_still_failing_after_k_rounds_is_discarded(scripted, tmp_path):  # noqa: F811
    still = reply(make_patch(BROKEN_READ, BROKEN_READ.replace("no index yet", "still no index")), "Try again")
    again = reply(make_patch(BROKEN_READ.replace("no index yet", "still no index"),
                             BROKEN_READ.replace("no index yet", "nope")), "Once more")
    it, _ = _run_with([reply(make_patch(SEED, BROKEN_READ), "Index first"), still, again], scripted, tmp_path)
    assert it.status == "failed" and not it.added_child and len(it.runtime_fixes) == 2
    assert (tmp_path / "run" / "programs" / "iter_001_rejected.py").exists()

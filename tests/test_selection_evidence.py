"""Selection you can trust (issue 18) and the runtime-fix loop (issue 15): paired evidence for
every child, no-change children, `--pick static` beside the confirmed champion, and children that fail
at run time going back to the reflector. The reflector is scripted behind the real openai client
(tests/test_mutate.py's fixture); everything else runs for real, offline."""
from __future__ import annotations

import json


from mstar.cli import main
from mstar.config import EvolutionConfig, RunConfig, SandboxConfig
from mstar.loop import Evolution
from mstar.patch import make_patch
from mstar.run import events as ev_types
from mstar.run.store import RunStore
from mstar.final.stats import paired_bootstrap
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


# The race before the test (mstar/final/champion.py, mstar/final/race.py) is tested in test_confirm_race.py.


def test_pick_static_keeps_the_papers_rule_and_both_choices_are_recorded(tmp_path):
    args = ["--task", "sample", "--size", "0.3", "--static-size", "6", "--seed", "3", "--iterations", "5"]
    for rule, both in (("static", ["--test-both"]), ("confirmed", [])):
        assert main(["evolve", *args, "--pick", rule, *both, "--out", str(tmp_path / rule), "--quiet"]) == 0
    static, confirmed = (json.loads((tmp_path / r / "summary.json").read_text()) for r in ("static", "confirmed"))
    evs = ev_types.read_lineage(tmp_path / "static" / "lineage.jsonl")
    scored = [e for e in evs if isinstance(e, (ev_types.SeedEvent, ev_types.IterationEvent))
              and getattr(e, "static_score", None) is not None and (not hasattr(e, "added_child") or e.added_child)]
    top = max(scored, key=lambda e: (e.static_score, -scored.index(e)))
    assert static["best_id"] == top.program_id and static["pick_rule"] == "static"
    assert confirmed["best_id"] == confirmed["picks"]["confirmed"]["program_id"]
    assert confirmed["picks"]["static"]["program_id"] == static["best_id"]     # what the other rule would pick
    assert all(p["test_score"] is not None for p in static["picks"].values())   # --test-both: both tested
    # By default only the champion and the best seed are tested: the other rule's choice costs a
    # whole test evaluation and the run does not need it.
    tested = {p.name.removesuffix(".test.json") for p in (tmp_path / "confirmed" / "cases").glob("*.test.json")}
    assert tested == {confirmed["best_id"], confirmed["best_seed_id"] or confirmed["best_id"]}
    other = confirmed["picks"]["static"]
    assert (other["test_score"] is None) == (other["program_id"] not in tested)


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

"""The end of a run: choose the champion, score it on the held-out test, write the summary.

1. Confirmation (mstar.final.champion): the best programs by static score race on paired evidence,
   buying validation items only while the race is open and within its budget share; the
   champion is the leader (`--pick confirmed`) or the best static score (`--pick static`, the
   paper's rule). Both choices are recorded.
2. Test: the champion and the best seed are scored on the same held-out questions, every
   episode of the task written (test questions need not be covered by the episodes chosen for
   validation); with `test_both` (`--test-both`) also the other rule's choice when it differs --
   a third test evaluation, which a run needs only to compare the rules. Tests start before the
   end where they can (mstar/final/held_out.py): the best seed's once the seeds are scored, the
   race's starting leader's with the race (cancelled if the race confirms another). The summary gives the
   champion's gain over the best seed with a paired interval, and each rule's choice (with its
   test score when it was tested).
3. summary.json, best_program.py, and the last lineage event: a TestEvent when the run finished,
   a StoppedEvent (resumable) when a budget (also one the race and the tests would cross:
   end_budget.py), the endpoint or the task's scorer (it failed on every
   case of an evaluation: mstar.evaluation.ScorerOutage) stopped it -- then no test is run.
   A run ended early by its stop condition (`--patience`) is finished: its champion is chosen and
   tested, and summary.json says why it ended (`early_stop`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from mstar.evaluation.records import ScorerOutage
from mstar.final import champion as champ
from mstar.final.held_out import SCOPE as TEST_SCOPE
from mstar.final.end_budget import unaffordable
from mstar.run import events
from mstar.final.summary import RunSummary, write_summary


@dataclass
class Stop:
    """Why a run ended before its last step."""
    reason: str
    kind: str       # "budget" | "endpoint" | "scorer" (resumable, no test) | "patience" (finished early)


def finish_run(evo, t_start: float, stop: Stop | None, iterations: int, endpoint_errors: tuple) -> RunSummary:
    """Returns the run's summary (evo: loop.Evolution)."""
    ev = evo.cfg.evolution
    early = stop.reason if stop is not None and stop.kind == "patience" else None
    stop = None if early else stop
    entries = list(evo.pool.entries)
    seed = evo.pool.best_seed()
    if seed is None:  # stopped before a seed was scored
        return _stopped_before_seeds(evo, t_start, stop, iterations)
    rule = ev.pick if ev.pick in champ.RULES else "confirmed"
    confirmation, tests, t_test = None, {}, time.perf_counter()
    if stop is None:   # under a spend cap the end must fit what is left (end_budget.py)
        share = (getattr(ev, "confirm_budget", None) or 0.0) if ev.confirm_top > 1 and ev.confirm_size > 0 else 0.0
        leader = evo.pool.get(champ.candidates(entries, 1)[0].program_id)
        reason = unaffordable(evo, [seed] if leader is seed else [seed, leader], share)
        stop = Stop(reason, "budget") if reason else None
    if stop is None:
        held = evo.held_out
        try:
            # A run killed after its confirmation was recorded goes on from it (mstar/run/resume.py).
            prior = getattr(evo, "prior_confirmation", None)
            racing = prior is None and (rule == "confirmed" or ev.confirm_top > 1)
            # From here on only the racers' knowledge bases are read again; after the race, none.
            entrants = champ.racers(evo, ev.confirm_top, ev.confirm_size, getattr(ev, "confirm_budget", None)) \
                if racing else []
            _keep_sessions(evo, entrants)
            if racing and evo.task.test:
                # Needed whatever the race decides, or most likely: started now (if not during the
                # iterations), in the background, they fill the calls in flight the race leaves free
                # (a race is a few short chains). mstar/final/held_out.py; figures in docs/confirmation.md.
                # The race's own starting leader (not the best static score: race_entry.py may lead
                # with another), as the race most often ends where it starts.
                first = entrants[0] if entrants and rule != "static" else champ.candidates(entries, 1)[0].program_id
                held.beside_the_race([seed, evo.pool.get(first)], share=evo.router.background)
            confirmation = champ.Confirmation.from_event(prior) if prior is not None else \
                champ.confirm(evo, ev.confirm_top, ev.confirm_size, ev.split_seed,
                              ev.confirm_rounds, getattr(ev, "confirm_budget", None)) \
                if racing else None
            if confirmation is not None and prior is None:
                evo._event(events.ConfirmationEvent(
                    items=len(confirmation.items), scores=confirmation.scores, confirmed_id=confirmation.confirmed_id,
                    static_id=confirmation.static_id, rule=rule, rounds=confirmation.rounds,
                    stop=confirmation.stop, budget=confirmation.budget, bought=confirmation.items,
                    entry=confirmation.entry, item_scores=confirmation.item_scores,
                    llm=evo.router.spent_in(champ.SCOPE),
                    timing={"seconds": round(time.perf_counter() - t_test, 3),
                            "chain_calls": confirmation.chain_calls}))
            _keep_sessions(evo, [])
            t_test = time.perf_counter()   # the test's own timing starts here
            if evo.task.test:
                wanted = _wanted(evo, confirmation, seed, rule, getattr(ev, "test_both", False))
                for pid in set(held.started()) - {e.program_id for e in wanted}:
                    held.cancel(pid)          # the race confirmed another program
                tests = held.results(wanted)
        except endpoint_errors as exc:
            stop = Stop(f"{exc} (while the champion was chosen and tested)", "scorer") \
                if isinstance(exc, ScorerOutage) else \
                Stop(f"the LLM endpoint failed while the champion was chosen and tested: {exc}", "endpoint")
            tests = {}
        finally:
            held.close()   # a test the run no longer needs ends here, its unsent calls cancelled
    best_id = confirmation.champion(rule) if confirmation else champ.candidates(entries, 1)[0].program_id
    best = evo.pool.get(best_id)
    for pid, res in tests.items():
        evo.store.write_cases(pid, "test", res.to_dict())
    test, seed_test = tests.get(best.program_id), (tests.get(seed.program_id) if seed.program_id != best.program_id
                                                   else None)
    picks = {}
    if confirmation is not None:
        for name in champ.RULES:
            pid = confirmation.champion(name)
            picks[name] = {"program_id": pid, "test_score": tests[pid].mean_score if pid in tests else None}
    summary = write_summary(evo, best, test, iterations, time.perf_counter() - t_start,
                            stop.reason if stop else None, stop.kind if stop else None, seed=seed, seed_test=seed_test,
                            pick_rule=rule, picks=picks, early_stop=early)
    if stop is not None:  # no test event: the run is not finished, `mstar resume` continues it
        evo._event(events.StoppedEvent(reason=stop.reason, iteration=iterations, kind=stop.kind,
                                       llm=evo.router.spent_in(TEST_SCOPE)))
        return summary
    # The test event is written last: a run is finished exactly when its lineage ends with it.
    evo._event(events.TestEvent(
        program_id=best.program_id, test_score=summary.test_score, per_category=summary.test_per_category,
        case_errors=test.case_errors if test else 0, score_errors=test.score_errors if test else 0,
        best_seed_id=seed.program_id,
        best_seed_test_score=summary.best_seed_test, gain=summary.test_gain, picks=picks,
        llm=evo.router.spent_in(TEST_SCOPE),
        timing={"eval_s": round(test.seconds, 3) if test else 0.0, "chain_calls": test.chain_calls if test else 0,
                "write_s": max((r.write_seconds for r in tests.values()), default=0.0),   # the slowest program's
                "read_cpu_s": max((r.read_cpu_seconds for r in tests.values()), default=0.0),
                "seconds": round(time.perf_counter() - t_test, 3)}))
    return summary


def _keep_sessions(evo, program_ids: list[str]) -> None:
    """Close the kept knowledge bases (and their workers) of every program but these (an executor
    that keeps none, e.g. on Ray, has nothing to close)."""
    keep_only = getattr(evo.executor, "keep_only", None)
    if keep_only is not None:
        keep_only([evo.pool.get(pid).source for pid in program_ids])


def _stopped_before_seeds(evo, t_start: float, stop: Stop | None, iterations: int) -> RunSummary:
    """No program has a score yet: nothing to choose or test; the run stays resumable."""
    stop = stop or Stop("no seed was evaluated", "endpoint")
    summary = write_summary(evo, None, None, iterations, time.perf_counter() - t_start, stop.reason, stop.kind)
    evo._event(events.StoppedEvent(reason=stop.reason, iteration=iterations, kind=stop.kind,
                                   llm=evo.router.spent_in(TEST_SCOPE)))
    return summary


def _wanted(evo, confirmation, seed, rule: str, both: bool) -> list:
    """The programs to test: the champion (and with `both` the other rule's choice) and the best
    seed, without repeats."""
    if confirmation is None:
        ids = [champ.candidates(list(evo.pool.entries), 1)[0].program_id]
    else:
        ids = [confirmation.champion(rule)] + ([confirmation.champion(r) for r in champ.RULES] if both else [])
    ids.append(seed.program_id)
    return [evo.pool.get(pid) for pid in dict.fromkeys(i for i in ids if i)]

"""Resume a run that stopped before it finished (a crash, a kill, a power cut).

Everything a run has completed is on disk before its next step: program sources and case files
are written atomically before the lineage event that refers to them, and each event is one
appended line. So the run folder alone says where to continue:

- the pool        = the seed events + the iteration events that added a child (sources from
                    programs/<id>.py, scores and titles from the events);
- failure memory  = the loop's own rule (Evolution.remember) replayed over the iteration events;
- the split       = split.json (checked against the task, which must not have changed);
- replay counters = the reflector's cache replays the n-th identical prompt's n-th reply; each
                    iteration event lists the prompts it asked, so the counts are restored;
- the confirmation = a run killed after its confirmation event (before the test) goes on to the
                    test with it, without racing again;
- what is left    = every iteration without an event. An iteration that was cut off, even
                    after its child was evaluated, is done again from the start; its random
                    draws depend only on (seed, iteration) (loop.iteration_rng), so it makes
                    the same choices. (With several iterations in flight, `--parallel`, a kill
                    can leave a gap: iteration 5 done, 4 not. The gap is done first.)

With a deterministic backend (the offline one) the resumed run ends with the same lineage,
timings aside, as a run that was never interrupted. A partial last line in lineage.jsonl or
llm_usage.jsonl (killed mid-write) is dropped with a warning.

The loop is rebuilt from this state by mstar/library/resuming.py (`resume_run`): this module only
reads the folder, so it imports nothing above mstar/run/.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from mstar.config import RunConfig
from mstar.pool import PoolEntry
from mstar.run import events as ev_types
from mstar.run.spend import spend_by_role, total
from mstar.run.store import FORMAT_VERSION, RunFormatError, RunStore, repair_hint
from mstar.split import Split, SplitConfig
from mstar.tasks import Task


@dataclass
class RunState:
    """What a run folder says about how far the run got."""
    config: RunConfig
    events: list                        # complete lineage events (mstar.run.events), in order
    finished: bool                      # the lineage ends with the final test event
    next_iteration: int                 # the first iteration without an event
    seeds_done: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    done: set = field(default_factory=set)   # iterations with an event

    def todo(self, total: int) -> list[int]:
        """The iterations still to do, in order, out of `total`."""
        return [i for i in range(1, total + 1) if i not in self.done]


def load_state(store: RunStore) -> RunState:
    """Read and check a run folder; RunFormatError (naming the file) when it cannot be resumed."""
    version, data = store.read_config()
    if version != FORMAT_VERSION:
        raise RunFormatError(
            f"{store.root} was written by an older mstar (run format {version}; this one writes "
            f"format {FORMAT_VERSION}): it can still be inspected (mstar lineage/show/report) but "
            "not resumed -- start a new run with the same settings instead")
    try:
        cfg = RunConfig.from_dict(data)
    except (TypeError, ValueError, KeyError) as exc:
        raise RunFormatError(f"{store.root / 'config.json'}: not a configuration this mstar reads ({exc})") from None
    lines, partial = store.read_jsonl_tolerant("lineage.jsonl")
    warnings = [partial] if partial else []
    events, seeds, done, finished = [], [], set(), False
    for n, line in enumerate(lines, 1):
        where = f"{store.root / 'lineage.jsonl'}: event {n}"
        try:
            ev = ev_types.from_dict(line)
        except ValueError as exc:
            raise RunFormatError(f"{where}: {exc}; the file is damaged -- {repair_hint(store.root)}") from None
        if ev is None:  # a kind added by a later version: it carries no pool state
            continue
        if finished:
            raise RunFormatError(f"{where} comes after the final test event; the file is damaged")
        if isinstance(ev, ev_types.SeedEvent):
            # After iteration events only as a seed evaluated again because `mstar repair` set its
            # line aside (a resume then writes it at the end); a seed recorded twice is damage.
            if ev.program_id in seeds:
                raise RunFormatError(f"{where}: seed {ev.program_id} is recorded twice; the file is damaged")
            seeds.append(ev.program_id)
        elif isinstance(ev, ev_types.IterationEvent):
            if ev.iteration in done or ev.iteration < 1:
                raise RunFormatError(f"{where}: iteration {ev.iteration} is recorded twice or is not a valid "
                                     "number; the file is damaged")
            done.add(ev.iteration)
        elif isinstance(ev, ev_types.TestEvent):
            finished = True
        events.append(ev)
    nxt = next(i for i in range(1, len(done) + 2) if i not in done)
    return RunState(cfg, events, finished, nxt, seeds, warnings, done)


def load_split(store: RunStore, task: Task) -> Split | None:
    """The saved split, checked against the task; None when the run died before saving it."""
    if not (store.root / "split.json").exists():
        return None
    d = store.read_json("split.json")
    try:
        split = Split(list(d["static"]), list(d["rotating_pool"]), list(d["train_episodes"]),
                      SplitConfig(**d.get("config", {})), list(d.get("static_ids", [])),
                      list(d.get("train_episode_ids", [])))
        static_ids = [task.validation[i].id for i in split.static]
        train_ids = [task.episodes[i].id for i in split.train_episodes]
    except (KeyError, TypeError, IndexError) as exc:
        raise RunFormatError(f"{store.root / 'split.json'} does not fit task {task.name!r} ({exc!r})") from None
    if (split.static_ids and split.static_ids != static_ids) or \
            (split.train_episode_ids and split.train_episode_ids != train_ids):
        raise RunFormatError(f"task {task.name!r} has changed since the run started: the saved split names "
                             "other validation items or episodes; resume with the original task data")
    return split


def rebuild(evo, state: RunState, store: RunStore) -> None:
    """Put the pool and the failure memory of `evo` (a fresh loop.Evolution) where they were."""
    for ev in state.events:
        if isinstance(ev, ev_types.SeedEvent):
            evo.pool.add(PoolEntry(ev.program_id, None, 0, _source(store, ev.program_id), ev.static_score,
                                   ev.title, ev.per_category))
        elif isinstance(ev, ev_types.IterationEvent):
            if ev.added_child:
                evo.pool.add(PoolEntry(ev.program_id, ev.parent_id, ev.iteration, _source(store, ev.program_id),
                                       ev.static_score, ev.title, ev.per_category, no_change=ev.no_change))
            evo.router.restore_replay(ev.replay_keys)
            evo.remember(ev)  # same rule, same order as during the run: identical notes
        elif isinstance(ev, ev_types.ConfirmationEvent):
            evo.prior_confirmation = ev


def check_sources(state: RunState, store: RunStore) -> None:
    """RunFormatError when a program the lineage records has no source: checked before a resume
    writes anything, not found by `rebuild` after the folder was changed."""
    for ev in state.events:
        if isinstance(ev, ev_types.SeedEvent) or (isinstance(ev, ev_types.IterationEvent) and ev.added_child):
            _source(store, ev.program_id)


def _source(store: RunStore, program_id: str) -> str:
    source = store.read_program(program_id)
    if source is None:
        raise RunFormatError(f"{store.root / store.program_rel(program_id)} is missing although lineage.jsonl "
                             f"records {program_id}; the run folder is damaged")
    return source


def preload_usage(router, store: RunStore) -> None:
    """Put the calls made before the crash into the router's ledger, so the final summary's
    totals and any budget count the whole run (calls of a redone iteration count twice: they
    were paid for)."""
    records, _ = store.read_jsonl_tolerant("llm_usage.jsonl")
    router.ledger.restore(records)


def prior_spend(store: RunStore) -> dict:
    """Calls and tokens recorded before a resume (for the progress line)."""
    records, _ = store.read_jsonl_tolerant("llm_usage.jsonl")
    spent = total(spend_by_role(records))  # cache hits are calls, but their tokens were not paid for
    out = {"calls": spent.calls, "tokens": spent.tokens}
    if spent.cost_usd is not None:
        out["cost_usd"] = float(spent.cost_usd)
    return out


def repair_tails(store: RunStore) -> list[str]:
    """Drop partial last lines before anything is appended; returns the warnings."""
    return [w for w in (store.drop_partial_tail(rel) for rel in ("lineage.jsonl", "llm_usage.jsonl", "resumes.jsonl"))
            if w]

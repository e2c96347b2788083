"""Watch a run as a notebook would: each lineage event arrives in `on_event` as it is written.

    python examples/watch_run.py [RUN_FOLDER]
"""
import sys

import mstar
from mstar.run import events

best = []


def show(event) -> None:
    """One line per event; in a notebook, update a plot or a table here instead."""
    if isinstance(event, events.SeedEvent):
        print(f"seed       {event.program_id:<26} static {event.static_score:.3f}")
    elif isinstance(event, events.IterationEvent):
        best.append(event.best_static_score)
        child = f"{event.program_id} {event.static_score:.3f}" if event.program_id else f"no child ({event.status})"
        print(f"iteration {event.iteration:>2} {child:<32} best so far {event.best_static_score:.3f}")
    elif isinstance(event, events.ConfirmationEvent):
        print(f"race       bought {event.items} more items, confirmed {event.confirmed_id}")
    elif isinstance(event, events.TestEvent):
        print(f"test       {event.program_id} {event.test_score:.3f} on held-out questions")


run = mstar.evolve("sample", size=0.3, iterations=4, out=sys.argv[1] if len(sys.argv) > 1 else None,
                   on_event=show, quiet=True)
print(f"{run.status}: champion {run.champion.id}, best static by iteration {best}")
print("spent", run.spend()["total"].calls, "LLM calls")

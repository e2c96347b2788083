"""Your own task, with a scorer mstar does not ship, evolved from a script -- offline, no key.

    python examples/custom_task.py [RUN_FOLDER]
"""
import sys
from pathlib import Path

import mstar

TOOLS = ["Vim", "Emacs", "Helix", "Nano", "Kate", "Zed", "Atom", "Geany"]
NAMES = ["Ada", "Bo", "Cai", "Dee", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo", "Kit", "Lu"]
episodes, queries = [], []
for i, name in enumerate(NAMES):
    old, new = TOOLS[i % 8], TOOLS[(i + 3) % 8]
    episodes.append(mstar.Episode(f"{name}-1", f"{name} started out with the {old} editor."))
    episodes.append(mstar.Episode(f"{name}-2", f"{name} now uses the {new} editor."))
    queries.append(mstar.query(f"q-{name}", f"Which editor does {name} use now?", new,
                               evidence_episodes=[f"{name}-2"]))


def names_only_the_answer(answer: str, query) -> float:
    """1 when the answer names the expected editor and no other one; stale editors cost the point."""
    named = {t for t in TOOLS if t.lower() in answer.lower().replace(",", " ").split()}
    return float(named == {query.answer})


task = mstar.Task("editors", episodes, validation=queries[:8], test=queries[8:], scorer=names_only_the_answer)
folder = Path(sys.argv[1] if len(sys.argv) > 1 else "runs/editors")
run = mstar.evolve(task, out=folder, iterations=3, static_size=4, quiet=True)
best = run.champion
print(f"champion {best.id}: static {best.static:.3f}, test {best.test:.3f}, best seed {best.best_seed}")
run.export(folder / "best.py")
with run.open_memory(store=folder / "memory") as memory:
    memory.ingest("Mo now uses the Kakoune editor.")
    print("memory says:", memory.ask("Which editor does Mo use now?"))

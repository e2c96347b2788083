"""ALFWorld: household text games where memory is experience to reuse, not a quote to find.

Map:
  layouts.py  the rooms the synthetic generator furnishes (data)
  synth.py    deterministic ALFWorld-format games from alfworld's bundled PDDL domain + grammar
  env.py      one game as an mstar.interactive Environment (TextWorld + alfworld wrappers; runs
              inside the game's own process)
  expert.py   expert trajectories (the generator's plan, or alfworld's planner for released
              games), played in the game's process and cached by game digest
  data.py     the released layout reader (json_2.1.1/{train,valid_seen,valid_unseen}/...)
  task.py     the loaders: `alfworld` (released data, --split seen|unseen) and `alfworld-synth`
              (generated, cached on disk) -> a Task whose queries are games (metric "success")
The engine imports none of textworld/alfworld until a game is built or generated: they are the
optional extra `pip install -e ".[alfworld]"`; `require()` turns their absence into one line.
"""
from __future__ import annotations

import importlib.util

FACTORY = "mstar.tasks.alfworld.env:AlfworldEnv"
EXTRA_HINT = ('ALFWorld tasks need the optional extra: pip install -e ".[alfworld]" '
              "(textworld==1.7.0, alfworld==0.4.2)")
_NEEDED = ("textworld", "alfworld", "fast_downward")


def missing_modules() -> list[str]:
    return [name for name in _NEEDED if importlib.util.find_spec(name) is None]


def require() -> None:
    """Raise TaskError with a one-line install hint when the optional extra is missing."""
    missing = missing_modules()
    if missing:
        from mstar.tasks.model import TaskError
        raise TaskError(f"{EXTRA_HINT}; not installed: {', '.join(missing)}")

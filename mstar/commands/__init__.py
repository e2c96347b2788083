"""One module per CLI subcommand; each has `register(subparsers)`.

Adding a command = adding a module here and its name to COMMANDS in mstar/cli.py. `evolve` and
`resume` are thin shells over the Python API (mstar/library/): what a run checks, how it starts,
ends and is interrupted lives there.

  baselines.py  `mstar baselines`: score a set of memory programs on a task's test split and
                print a table like the paper's Table 1 (per-category columns, Overall last);
                optionally write it as markdown + JSON
  check.py      `mstar check PROGRAM.py [--json] ...`: every gate in a real sandbox worker, with
                the offline toolkit model answering the program's LLM calls
  eval.py       `mstar eval PROGRAM --task T [--split test|validation|static]`: score any
                program file (a seed, a baseline, an exported winner) on a task, with per-
                category scores
  evolve.py     `mstar evolve`: launch an evolution run (also `python evolve.py ...`)
  export.py     `mstar export RUN [--program ID] --out FILE`: one program of a run (default: the
                best) as a standalone file with a header comment: run, task, scores, lineage,
                models (mstar/run/export.py)
  lineage.py    `mstar lineage RUN`: the run's tree of programs with score deltas, commit titles
                and markers (BEST, REGRESSION, FAILED, DUPLICATE, ERROR)
  llm_flags.py  the LLM options the commands share, defined once with the Python API
                (mstar/library/llm_options.py)
  memory.py     `mstar memory info STORE` and `mstar memory migrate STORE --program NEW [--out
                DIR]`: look at a memory store, and move its memory to a better program
                (mstar/memory/migrate.py)
  repair.py     `mstar repair RUN [--dry-run]`: set damaged lines of a run's files aside so that
                its other commands can read it again (mstar/run/repair.py)
  report.py     `mstar report RUN [--out FILE]`: one self-contained HTML report of a run
                (mstar/run/report.py)
  resume.py     `mstar resume RUN`: continue a run that stopped before it finished (see
                mstar/run/resume.py)
  runs.py       `mstar runs`: the run folders under --runs-dir with task, progress, best score,
                spend and status
  serve.py      `mstar serve PROGRAM --store DIR`: serve a memory program over MCP, kept in a
                store folder (mstar/memory/server.py; the [serve] extra)
  show.py       `mstar show RUN PROGRAM`: one program's source, its diff against its parent, its
                per-case results and the reflector's commit message and attempts
  ui.py         `mstar ui [--runs-dir runs] [--host 127.0.0.1] [--port 8787] [--token T]`: a
                local, read-only, live web app over the run folders (mstar/ui/)
"""

import sys


def load_task_or_report(name: str, data: str | None, **kwargs):
    """Load a task for a command; on bad input print one clear line and return None
    (the command then exits with status 2)."""
    from mstar.tasks import TaskError, load_task

    try:
        return load_task(name, data, **kwargs)
    except (TaskError, FileNotFoundError, ValueError) as exc:
        print(f"mstar: cannot load task {name!r}: {exc}", file=sys.stderr)
        return None


# The task loader options, defined once with the other options of a run (mstar/library/options.py).
from mstar.library.options import add_task_options, task_options  # noqa: E402,F401

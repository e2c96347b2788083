"""mstar: evolve memory programs for LLM agents (after the M* paper).

    import mstar
    task = mstar.Task("my-task", episodes=[mstar.Episode("e1", "...")],
                      validation=[mstar.query("q1", "...?", "...")], test=[...], scorer=my_scorer)
    run = mstar.evolve(task, iterations=3)        # every `mstar evolve` flag is a keyword
    run.champion.test, run.export("best.py"), run.open_memory(store="memory/")

The public names below are loaded on first use, so `import mstar` stays light.

Where things are:
  loop.py        the evolution loop (paper Algorithm 1a); the only writer of the pool
  iteration/     one iteration's parts: reflect (prompt, reply), mutate (patch -> gates -> child),
                 behaviour (no-change children), rotating_prefetch (the next batch, asked ahead)
  final/         a run's end: finish (confirm, test, summary), champion, race_entry and race (the
                 confirmation: who races, when it stops), race_budget, held_out (tests, some started
                 early), stats (paired intervals), comparison (`mstar baselines`)
  strategies/    the algorithm's decisions: parent selection, failed cases, references, acceptance,
                 when the run stops
  pool.py        the programs of a run with parents and scores
  evaluation/    one evaluation (Algorithm 1b): ingest, read, answer (or play), score; kept knowledge bases
  execution/     where evaluations run: local, or a Ray cluster
  interactive/   interactive tasks: environment protocol, games in their own process
  agent.py       the task agent's prompts and reply parsing
  ast_guard.py   one lock around the engine's own uses of the `ast` module (thread safety)
  config.py      the run configuration: one frozen dataclass tree, resolved once at start
  prompts/       the paper's prompt wording (--prompts paper)
  gepa/          the GEPA baselines (an adapter for the gepa package)
  patch/         V4A patches: parse, locate, apply, make
  program/       programs as the engine sees them: built-in sources, frozen parts, the contract
  split/         static set (k-means), training episodes (facility location), rotating batches
  llm/           one router over four roles: backends, retries, cache, ledger, budgets
  offline/       the deterministic offline models that serve every role with no network
  tasks/         task loaders (sample, LoCoMo, rubric, finance, ALFWorld, JSONL) and metrics
  run/           the run folder: store, typed lineage events, views, resume, export, report
  commands/      one module per CLI subcommand;  cli.py  the `mstar` entry point
  testing/       a local OpenAI-compatible fake server for tests and benchmarks
  library/       the Python API (mstar.evolve, resume, Run) the command line is a shell over
  trackers/      experiment trackers (MLflow, W&B) as listeners on the lineage events
  api.py         MemoryProgram: use an exported program in your own agent
  memory/        where the winner goes: the sandboxed program, persistent stores, namespaces,
                 migration, the MCP server
  ui/            `mstar ui`: the live, read-only view of runs
The sandbox that runs programs is its own package, `sandbox/`.
"""

_PUBLIC = {
    "evolve": "mstar.library.entry", "resume": "mstar.library.entry", "open_run": "mstar.library.entry",
    "options": "mstar.library.entry", "Run": "mstar.library.run_handle", "Champion": "mstar.library.run_handle",
    "SetupError": "mstar.library.errors", "OptionError": "mstar.library.options",
    "RunInterrupted": "mstar.library.exits",
    "Task": "mstar.tasks", "Episode": "mstar.tasks", "QueryItem": "mstar.tasks", "TaskError": "mstar.tasks",
    "ScorerError": "mstar.tasks", "query": "mstar.tasks", "game": "mstar.tasks",
    "MemoryProgram": "mstar.api",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    if name not in _PUBLIC:
        raise AttributeError(f"module 'mstar' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))

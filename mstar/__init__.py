"""mstar: evolve memory programs for LLM agents (after the M* paper).

Where things are:
  loop.py        the evolution loop (paper Algorithm 1a); the only writer of the pool
  finish.py      a run's end: champion.py (confirmation), the test, the summary
  race.py        the confirmation's stopping rule: paired verdicts, their error rate, ties
  behaviour.py   what a child changed: same code, same answers (no-change children)
  stats.py       paired bootstrap intervals
  strategies/    the algorithm's decisions: parent selection, failed cases, references, acceptance,
                 when the run stops
  evaluation/    one evaluation (Algorithm 1b): ingest, read, answer (or play), score; kept knowledge bases
  execution/     where evaluations run: local, or a Ray cluster
  interactive/   interactive tasks: environment protocol, games in their own process
  agent.py       the task agent's prompts and reply parsing
  reflect.py     the reflector's prompt and reply;  mutate.py  reply -> patch -> gates -> child
  prompts/       the paper's prompt wording (--prompts paper)
  gepa/          the GEPA baselines (an adapter for the gepa package)
  patch/         V4A patches: parse, locate, apply, make
  program/       programs as the engine sees them: built-in sources, frozen parts, the contract
  split/         static set (k-means), training episodes (facility location), rotating batches
  pool.py        the programs of a run with parents and scores
  llm/           one router over four roles: backends, retries, cache, ledger, budgets
  offline/       the deterministic offline models that serve every role with no network
  tasks/         task loaders (sample, LoCoMo, rubric, finance, ALFWorld, JSONL) and metrics
  run/           the run folder: store, typed lineage events, views, resume, export, report
  commands/      one module per CLI subcommand;  cli.py  the `mstar` entry point
  testing/       a local OpenAI-compatible fake server for tests and benchmarks
  api.py         MemoryProgram: use an exported program in your own agent
  memory/        where the winner goes: persistent stores, namespaces, migration, the MCP server
The sandbox that runs programs is its own package, `sandbox/`.
"""

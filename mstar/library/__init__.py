"""mstar as a library: the Python API that the command line is a thin shell over.

  module          the idea                                                 the rule it keeps
  entry.py        mstar.evolve / resume / open_run / options                one code path with the CLI
  options.py      every option of a run, defined once (the argparse        a keyword the parser does not know is
                  parser); keywords -> the namespace the CLI parses         refused with the close names
  llm_options.py  the LLM options every command shares                     secrets stay in the environment
  launch.py       checks, then the run (new or resumed), its listeners     nothing spent and no folder made
                                                                            before every check passed
  resuming.py     what a resume may change; the loop rebuilt from a folder  never spends past a budget; a refused
                                                                            resume leaves the folder as it was
  task_files.py   which task a run uses; a Python task kept in its run     the task a run resumes with is the one
                                                                            it began with (the split is checked)
  task_match.py   a task given again against the one the run saved         what was scored does not change mid-run
  run_handle.py   Run and Champion: a run folder as objects                 read from the folder, never cached state
  printing.py     the console lines of a run's start and end
  exits.py        Ctrl-C, SIGTERM, a full disk: one line, resumable         in Python the process is never ended
  wiring.py       the run's LLM router and what hangs on it
  prechecks.py    seeds through the gates, the endpoints' preflight         before any folder or spend
  errors.py       SetupError: a run that cannot start, in one line

Trackers (MLflow, W&B) are listeners on the typed lineage events: mstar/trackers/.
"""

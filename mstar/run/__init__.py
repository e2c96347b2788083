"""The run folder and what reads or shows it.

  module           the idea                                                the rule it keeps
  store.py         the folder: config, programs, cases, lineage, usage     a file is whole before the event that
                                                                           names it; events are appended lines
  events.py        the typed lineage events (one per line)                 event keys are spelled only here
  resume.py        a stopped run's state, read back from its folder        the folder alone says where to go on
  repair.py        damaged lines set aside (`mstar repair`)                the lines are kept, byte for byte, in a
                                                                           .set-aside file; what that loses is said
  spend.py         what a run spent, per role, from its usage records
  projection.py    what the whole run will have spent when it ends
  progress.py      the console lines of a run (seeds, iterations)
  eval_progress.py the live line while an evaluation waits on the LLM
  live_spend.py    every call so far, per role (the console)
  views.py         read-only views for `mstar runs/lineage/show`           never writes into a run folder
  export.py        one program as a standalone file
  report.py        `mstar report`: one self-contained HTML file            no scripts, no network
  plots.py         the report's figures as inline SVG
  xray_text.py     the memory X-ray as text

Below the loop: nothing here imports mstar.loop (a resumed run's loop is rebuilt in
mstar/library/resuming.py). The end of a run's outcome (summary.json) is mstar/final/summary.py.
"""

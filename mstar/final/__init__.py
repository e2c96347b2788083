"""The end of a run: after the iterations, which program is handed over and how sure we are.

  module          the idea                                                 the rule it keeps
  finish.py       the end's order: confirm, test, summarise                 a stopped run runs no test; nothing
                  (called once by the loop)                                 done before the end is redone
  champion.py     the confirmation: the best programs race on paired       the champion is the race's leader (or
                  evidence; the picks of each rule                          the best static score, --pick static)
  race_entry.py   who enters the race: every program whose optimistic      the first --confirm-top always enter; the
                  estimate reaches the leader's pessimistic one             rest only as far as the allowance pays
  race.py         the race's stopping rule: paired verdicts and their      a "behind" verdict is wrong with
                  error rate, ties                                          probability <= 5% over the race
  race_budget.py  what the race may buy: a share of the tokens the run     a batch is cut to what is left; the
                  asked, each racer priced at its own cost                  allowance is never passed
  held_out.py     the test evaluations, some started before the end        each program is tested once; a test no
                  (in the background)                                       longer needed is cancelled
  end_budget.py   under a spend cap, whether the race and the tests fit    a capped run never tests past its cap:
                  what is left, priced from the programs' own calls         it stops, resumable, instead
  stats.py        paired bootstrap intervals over shared items              pure functions, seeded resampling
  summary.py      summary.json: the run's outcome in one record             written when the run ends or stops
  comparison.py   several programs on one split, laid out like the         every row on the same items
                  paper's Table 1 (`mstar baselines`)

Beside the loop (mstar/loop.py), which calls `finish.finish_run` once; the iteration's own parts
are in mstar/iteration/.
"""

"""The parts of one iteration, beside the loop (mstar/loop.py) that calls them in order.

  module                the idea                                           the rule it keeps
  reflect.py            the reflector's prompt and the parsing of its      a reply that is not a patch is an
                        reply (paper Appendix G.2, G.3)                     error the model is shown, not a crash
  mutate.py             reply -> patch -> gates -> child, with up to k     a child that fails its gates never
                        compile-fix rounds, and run-time fixes              enters the pool
  behaviour.py          what an edit changed: same code, same answers      judged on the source or the answers,
                                                                            never on a guess
  rotating_prefetch.py  the next iteration's rotating evaluation, asked    a guess only fills the cache: the
                        ahead for the likely parents                        lineage is the same without it
  guesses.py            what a guess ahead is worth (the odds of its        a guess is sent only when its likely
                        program, its batch's price) and what it cost        saving is worth its likely waste
  lending.py            while the reflector replies, background work may   a lent slot is back before the child's
                        use the calls in flight the run leaves idle         first burst, as the run so far prices it

The loop is the only writer of the pool: these modules propose and check, the loop decides.
"""

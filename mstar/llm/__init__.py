"""The LLM layer: one router over four roles (task, reflector, toolkit, judge), and how a call
is sent, paced, retried, cached, counted and paid for.

  budget.py           Hard budgets on a run's spend, warnings on the way, and a cost estimate
  cache.py            A persistent response cache shared by runs (sqlite, one file in a cache
                      folder)
  command_backend.py  A role served by an external program: the prompt on stdin, the completion
                      on stdout
  ledger.py           The run's ledger: every LLM call, what it cost, and sums of it
  limiter.py          One limiter per endpoint, shared by every role and thread that calls it
  offline_backend.py  The built-in offline backend: deterministic stand-ins for every role
  openai_backend.py   Any OpenAI-compatible chat endpoint, through the official `openai` client
  pacer.py            How fast one endpoint may be sent requests: the rate state behind the
                      shared limiter
  preflight.py        The check a run makes before it spends anything: one cheap call to each
                      role served by an endpoint (`LLMRouter.preflight`, `mstar evolve` / `mstar
                      resume` without --no-preflight)
  prices.py           What a call costs: a price table in USD per million tokens
  replay.py           Replay counters: which occurrence of an identical request this is, for the
                      reflector's cache
  retry.py            When to try a failed call again, and how long to wait first
  roles.py            Who serves each LLM role, and how the router treats its calls (cache mode,
                      concurrency, retries)
  router.py           One interface, four roles: who serves each role, and how a call survives
  scope.py            Which step of a run an LLM call belongs to, carried in a context variable
  settings.py         The LLM part of the configuration: a TOML file, command-line overrides,
                      validation
  single_flight.py    Single flight: a request identical to one already out waits for that one's
                      reply
  slots.py            A role's calls in flight: at most `limit` at once, served by priority
  types.py            Records that flow through the LLM layer, and the errors it raises
"""

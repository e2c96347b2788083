"""What the CLI shows about LLM spend while a run goes.

Fed the loop's lineage events after the progress printer: one line with the
spend per role after every seed and iteration, the estimate of the whole run's
cost once the seeds are evaluated, and a projection that follows the actual
cost of the iterations. Budget warnings are printed by the ledger's callback
as they happen (the CLI passes `warn`).
"""
from __future__ import annotations

import sys
from typing import TextIO

from mstar.llm.budget import RunEstimate, estimate_run, reflector_prompt_tokens
from mstar.run import events as ev_types

REFLECTOR_COMPLETION_TOKENS = 2000   # a commit message and a patch, with some slack


class LiveSpend:
    def __init__(self, router, *, n_seeds: int, iterations: int, train_episodes: int, static_size: int,
                 rotating_size: int, test_episodes: int, test_queries: int, seed_sources: list[str],
                 read_max_chars: int, prompt_budget: int, show: bool, out: TextIO | None = None):
        self.router = router
        self.n_seeds, self.iterations = n_seeds, iterations
        self.sizes = dict(train_episodes=train_episodes, static_size=static_size, rotating_size=rotating_size,
                          test_episodes=test_episodes, test_queries=test_queries)
        self.seed_sources, self.read_max_chars, self.prompt_budget = seed_sources, read_max_chars, prompt_budget
        self.show = show
        self.out = out or sys.stdout
        self.seeds_seen = 0
        self.iteration_costs: list[float] = []
        self.estimate: RunEstimate | None = None

    def __call__(self, ev) -> None:
        if isinstance(ev, ev_types.SeedEvent):
            self.seeds_seen += 1
            self._say(f"          {self.router.ledger.spend_line()}")
            if self.seeds_seen == self.n_seeds:
                self.estimate = self.make_estimate()
                self._say(f"          {self.estimate.line()}")
        elif isinstance(ev, ev_types.IterationEvent):
            self.iteration_costs.append(float((ev.llm or {}).get("cost_usd", 0.0)))
            left = self.iterations - ev.iteration
            mean = sum(self.iteration_costs) / len(self.iteration_costs)
            spent = self.router.ledger.budget.spent_usd
            self._say(f"          {self.router.ledger.spend_line()} | projected ${spent + left * mean:.4f}")

    def make_estimate(self) -> RunEstimate:
        ledger = self.router.ledger
        reflector = self.router.backend("reflector")
        prompt = reflector_prompt_tokens(self.seed_sources, self.read_max_chars, self.prompt_budget)
        price = ledger.prices.lookup(reflector.model, reflector.name)
        usd = price.cost(prompt, REFLECTOR_COMPLETION_TOKENS) if price else 0.0
        return estimate_run(ledger.snapshot(), ledger.cost_of, n_seeds=self.n_seeds, iterations=self.iterations,
                            reflector_cost=(usd, prompt + REFLECTOR_COMPLETION_TOKENS), **self.sizes)

    def _say(self, text: str) -> None:
        if self.show:
            print(text, file=self.out, flush=True)


def cache_line(router) -> str | None:
    """What the response cache saved in this run, with the extraction re-use on its own."""
    report = router.ledger.report()
    total = report["total"]
    if not total["cache_hits"]:
        return None
    line = (f"cache   {total['cache_hits']} of {total['calls']} calls answered from the cache, "
            f"{total['saved_tokens']:,} tokens (${total['saved_usd']:.4f}) saved")
    ext = report["cache_reuse"].get("extract_knowledge_item")
    if ext:
        line += f"; extractions re-used {ext['cache_hits']} ({ext['saved_tokens']:,} tokens)"
    return line


def both(*callbacks):
    """One progress callable that feeds every given one in turn."""
    def call(ev) -> None:
        for cb in callbacks:
            cb(ev)
    return call

"""What the CLI shows about LLM spend while a run goes.

Fed the loop's lineage events after the progress printer: once the seeds are scored and after
every iteration, one line with every call so far from the ledger, per role, against the budget.
It counts what the progress lines' `spend` does not: the connection check, the next iteration's
calls already sent, the prefetch's guesses -- so it says `all calls so far`, and carries no
projection of its own: the whole run's is the `plan` line's and the iteration lines'
(mstar/run/projection.py). A second one here, from the seeds' mean costs, said $0.22 beside the
plan's $0.59, and `projected $X` on this line left the test out. Budget warnings are printed by
the ledger's callback as they happen (the CLI passes `warn`).
"""
from __future__ import annotations

import sys
from typing import TextIO

from mstar.run import events as ev_types
from mstar.run.console import fit

INDENT = 10   # under the seed and iteration lines, as their continuations


class LiveSpend:
    def __init__(self, router, *, n_seeds: int, show: bool, out: TextIO | None = None, width: int | None = None):
        self.router, self.n_seeds, self.show = router, n_seeds, show
        self.out, self.width = out or sys.stdout, width
        self.seeds_seen = 0

    def __call__(self, ev) -> None:
        if isinstance(ev, ev_types.SeedEvent):
            self.seeds_seen += 1
            if self.seeds_seen == self.n_seeds:   # the seeds run together: once, not the same line per seed
                self._say()
        elif isinstance(ev, ev_types.IterationEvent):
            self._say()

    def line(self) -> str:
        return " " * INDENT + "all calls so far: " + self.router.ledger.spend_line().removeprefix("spend ")

    def _say(self) -> None:
        if self.show:
            for text in fit(self.line(), self.width, indent=INDENT):
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

"""What `mstar evolve` / `mstar resume` print while a run goes: one line per seed (its score and
its evaluation's own `cost`) and per iteration with the outcome, the best score so far and for how
many iterations no child has significantly beaten it ("stalled", strategies/stopping.py), the
run's `spend` so far with the whole run's projection, `-> ~... in all` (mstar/run/projection.py:
the one whole-run figure the console prints, first on the `plan` line), and an ETA.

The printer is fed the loop's lineage events (the same records that go to lineage.jsonl), so
it needs no hook of its own and shows exactly what was recorded. Lines are laid out to the
terminal's width by mstar/run/console.py (continuation lines, never cut words); a fresh run
starts with the legend of the terms the lines use.
"""
from __future__ import annotations

import sys
from typing import TextIO

from mstar.run import events as ev_types
from mstar.run.console import console_width, fit, legend_lines, pack
from mstar.strategies.stopping import Stalled, is_gain
from sandbox.engine.terminal import terminal_safe


def format_count(n: float) -> str:
    """1234 -> '1.2k', 3456789 -> '3.46M': short, for one status line."""
    n = float(n)
    for limit, suffix, digits in ((1e9, "G", 2), (1e6, "M", 2), (1e3, "k", 1)):
        if abs(n) >= limit:
            return f"{n / limit:.{digits}f}{suffix}"
    return f"{n:.0f}"


def format_usd(usd: float | None, mark: str = "") -> str:
    """' $0.75' ('' for nothing priced: the offline backend costs nothing); under 10 cents with 4
    decimals, so a seed that cost $0.0041 does not read $0.00."""
    if not usd:
        return ""
    return f" {mark}${usd:.2f}" if abs(usd) >= 0.1 else f" {mark}${usd:.4f}"


def format_duration(seconds: float) -> str:
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _errors(n: int, episodes: int = 0, scorer: int = 0) -> str:
    """Cases left unscored (an LLM call failed, or the task's scorer did on `scorer` of them, when
    the event says), and episodes not ingested because an LLM call failed: shown beside the score,
    never in it."""
    by = f", {scorer} by the task's scorer" if scorer else ""
    out = f" [{n} case error{'s' if n != 1 else ''}{by}]" if n else ""
    return out + (f" [{episodes} episode{'s' if episodes != 1 else ''} not ingested]" if episodes else "")


class ProgressPrinter:
    """Callable on lineage events. `first_iteration` > 1 for a resumed run: the ETA is then
    estimated from this process's iterations only, and spend counts from the resume on unless
    `spend` carries the earlier totals ({"calls", "tokens", "cost_usd"}). `ids`: the program ids
    known up front (the seeds'), so the columns fit the longest of them. `projection`
    (mstar.run.projection.Projection) adds the whole run's projected spend; `patience` the limit
    beside the stalled count. `width`: the columns a line may take (default: the terminal's,
    100 for a pipe); `legend`: print the terms first (default: on a fresh run, not a resumed one)."""

    def __init__(self, total: int, quiet: bool = False, out: TextIO | None = None,
                 first_iteration: int = 1, spend: dict | None = None, ids: list[str] | None = None,
                 projection=None, patience: int | None = None, width: int | None = None,
                 legend: bool | None = None):
        self.total, self.quiet, self.out = total, quiet, out or sys.stdout
        self.width = width or console_width()
        self.legend = first_iteration == 1 if legend is None else legend
        self.best: float | None = None   # the best static score seen, to tell a static jump from a gain
        longest = max((len(i) for i in ids or ()), default=0)
        self.id_w, self.parent_w = max(28, longest), max(22, longest)
        self.before_line = None
        self.first_iteration = first_iteration
        spend = spend or {}
        self.calls = int(spend.get("calls", 0))
        self.tokens = int(spend.get("tokens", 0))
        self.cost: float | None = spend.get("cost_usd")
        self.iteration_seconds: list[float] = []
        self.projection, self.patience = projection, patience
        self.stalled = Stalled()
        self._planned = False

    # ------------------------------------------------------------ bookkeeping (pure, testable)
    def _account(self, ev) -> None:
        llm = ev.llm or {}
        self.calls += int(llm.get("calls", 0))
        self.tokens += int(llm.get("prompt_tokens", 0)) + int(llm.get("completion_tokens", 0))
        if llm.get("cost_usd") is not None:  # only when the LLM layer prices calls
            self.cost = (self.cost or 0.0) + float(llm["cost_usd"])

    def spend_text(self) -> str:
        """The run's spend so far: the sum over the events recorded (the calls of work still
        running are in the `all calls so far` line, mstar/run/live_spend.py)."""
        # Dollars only when some call was priced above zero (the offline backend costs nothing).
        return f"{format_count(self.calls)} calls {format_count(self.tokens)} tok{format_usd(self.cost)}"

    @staticmethod
    def cost_text(ev) -> str:
        """One event's own calls: a seed's line shows its evaluation's, not the run's so far --
        the seeds run together, so a cumulative figure read as the second seed's own (129 calls
        for a seed that made 77)."""
        llm = ev.llm or {}
        tokens = int(llm.get("prompt_tokens", 0)) + int(llm.get("completion_tokens", 0))
        return f"{format_count(int(llm.get('calls', 0)))} calls {format_count(tokens)} tok" \
               f"{format_usd(llm.get('cost_usd'))}"

    def stalled_text(self, ev=None) -> str:
        """Iterations without progress ("" right after some): the stop condition's own count when
        the event carries it (`--patience`: a line catching up is progress too, so the count is
        the one the run stops on), else since a child significantly beat the best program."""
        state = getattr(ev, "patience", None) or {}
        n = state.get("quiet", self.stalled.since_gain)
        if not n:
            return ""
        climbing = ", best still climbing" if state.get("climbing") else ""   # why the run goes on past N
        return f"  stalled {n}/{self.patience}{climbing}" if self.patience else f"  stalled {n}"

    def projected_text(self) -> str:
        p = self.projection
        return f" -> {p.text()}" if p is not None and p.ready else ""

    def eta_seconds(self, iteration: int) -> float | None:
        """Mean seconds of the iterations seen so far times the iterations left."""
        if not self.iteration_seconds:
            return None
        mean = sum(self.iteration_seconds) / len(self.iteration_seconds)
        return mean * max(0, self.total - iteration)

    # ------------------------------------------------------------ printing
    def __call__(self, ev) -> None:
        self._account(ev)
        if self.projection is not None:
            self.projection.observe(ev)
        if isinstance(ev, ev_types.IterationEvent):
            self.stalled.observe(ev)
            if ev.seconds is not None:
                self.iteration_seconds.append(float(ev.seconds))
        jump = self._static_jump(ev)
        if self.quiet:
            return
        if self.legend:
            self.legend = False
            self._say(legend_lines(self.width))
        if isinstance(ev, ev_types.SeedEvent):
            err = f"[failed: {ev.error.get('message', '')}]" if ev.error else ""
            errors = _errors(ev.case_errors, ev.ingest_errors)
            self._say(pack(_safe(f"seed  {ev.program_id:<{self.id_w}} static {ev.static_score:.3f}{errors}",
                                 f"cost {self.cost_text(ev)}", err), self.width, indent=6))
            if self.projection is not None and self.projection.ready and not self._planned:
                self._planned = True
                self._say(fit(self.projection.plan_line(), self.width))
        elif isinstance(ev, ev_types.IterationEvent):
            it = ev.iteration
            if ev.added_child:
                mark = _evidence_mark(ev)
                outcome = (f"child {ev.program_id} static {ev.static_score:.3f} ({ev.delta:+.3f})"
                           f"{mark}{_errors(ev.case_errors, ev.ingest_errors)}")
            else:
                last = ev.attempts[-1] if ev.attempts else {}
                outcome = _shorten(f"{ev.status}: {' '.join(str(last.get('error', '')).split())}", 160)
            eta = self.eta_seconds(it)
            best = f"best {ev.best_static_score:.3f}" + (" (static jump, not a paired gain)" if jump else "")
            head = f"iter {it:>3}/{self.total}  parent {ev.parent_id:<{self.parent_w}} {outcome}"
            rest = _safe(best + self.stalled_text(ev), f"spend {self.spend_text()}{self.projected_text()}",
                         f"eta {format_duration(eta) if eta is not None else '?'}")
            one = pack(_safe(f"{head:<{len(head) - len(outcome) + 58}}") + rest, self.width, indent=TITLE_INDENT)
            if len(one) > 1:   # too narrow for one line: "best" always starts the second, under the title
                one = fit(_safe(head)[0], self.width, indent=TITLE_INDENT) + \
                    pack([" " * TITLE_INDENT + rest[0], *rest[1:]], self.width, indent=TITLE_INDENT)
            self._say(one)
            self._say(fit(_safe(" " * TITLE_INDENT + ev.title[:200])[0], self.width, indent=TITLE_INDENT))
        elif isinstance(ev, ev_types.ConfirmationEvent) and ev.scores:
            self._say(fit(_safe(confirmation_line(ev))[0], self.width, indent=6))
        elif isinstance(ev, ev_types.TestEvent):
            score = f"{ev.test_score:.3f}" if ev.test_score is not None else "-"
            errors = _errors(ev.case_errors, scorer=ev.score_errors)
            self._say(pack(_safe(f"test  {ev.program_id:<{self.id_w}} score {score}{errors}",
                                 f"spend {self.spend_text()}"), self.width, indent=6))
        elif isinstance(ev, ev_types.StoppedEvent):
            self._say(fit(_safe(f"stop  after iteration {ev.iteration}: {ev.reason}  spend {self.spend_text()}")[0],
                          self.width, indent=6))

    def _static_jump(self, ev) -> bool:
        """A new best static score that the paired evidence does not call a gain of the run (the
        stalled count goes on): said beside the best, so the two do not contradict each other."""
        score = None
        if isinstance(ev, ev_types.SeedEvent):
            score = ev.static_score
        elif isinstance(ev, ev_types.IterationEvent):
            score = ev.best_static_score
        if score is None:
            return False
        jump = (isinstance(ev, ev_types.IterationEvent) and ev.added_child and self.best is not None
                and score > self.best + 1e-9 and not is_gain(ev))
        self.best = score if self.best is None else max(self.best, score)
        return jump

    def _say(self, lines: list[str]) -> None:
        if self.before_line is not None:  # e.g. the live display takes its bar off the screen
            self.before_line()
        for line in lines:
            print(line.rstrip(), file=self.out, flush=True)


TITLE_INDENT = 10   # the title under an iteration line, and that line's continuation


def _safe(*segments: str) -> list[str]:
    """Titles, ids and error messages were written by the reflector or a program: their escapes
    are made visible before the line is laid out, so the width counts what is shown."""
    return [terminal_safe(s, newlines=False) for s in segments]


def _shorten(text: str, limit: int) -> str:
    """A failure message cut at a word, marked as cut (`mstar lineage RUN` shows it whole)."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    at_word = cut.rsplit(" ", 1)[0]
    return (at_word if len(at_word) > limit // 2 else cut) + " ... (mstar lineage has it all)"


STOPS = {"decided": "decided", "tied": "tied: no verdict in reach", "budget": "its budget share spent",
         "cap": "its item cap reached", "run budget": "the run's budget reached"}


def confirmation_line(ev) -> str:
    """The race before the test in one line: each racer on its evidence, items bought, why it ended."""
    ranked = ", ".join(f"{pid} {sc['union']:.3f} on {sc.get('n', '?')}" for pid, sc in ev.scores.items())
    batches = max(0, len(ev.rounds) - 1)
    bought = f"{ev.items} more validation items in {batches} batch{'es' if batches != 1 else ''}" if ev.items \
        else "no more validation items"
    why = STOPS.get(ev.stop, ev.stop) if ev.stop else ""
    champion = ev.confirmed_id if ev.rule == "confirmed" else ev.static_id
    return (f"check top {len(ev.scores)} on the paired evidence of the run (static + rotating) and {bought}"
            f"{f' ({why})' if why else ''}: {ranked}; champion {champion} (--pick {ev.rule})")


def _evidence_mark(ev) -> str:
    """What the paired comparison with the parent says, in a word (mstar lineage has the interval)."""
    if ev.no_change:
        return " same answers"
    e = ev.evidence or {}
    if e.get("significant"):
        return " GAIN" if e.get("mean", 0) > 0 else " LOSS"
    return ""

"""What the whole run will have spent when it ends: calls, billed tokens and dollars (issue 28).

Made once the seeds are scored and again after every iteration, for the progress lines:

    spent so far
  + iterations left x one iteration (the mean of this process's iterations; before the first,
    an estimate from the best seed's evaluation: a child scored on the static set, the parent on
    a rotating batch with `--rotating fresh`, ~1.5 reflector calls at the reflector's price. The
    best seed, because parents are drawn by score and most children descend from it; the costliest
    seed made the offline sample's plan line say 13.7M tokens for a run that spent 2.4M)
  + the end: the confirmation (its budget is a share of the tokens asked before it, sent or
    cached, taken here as that share of the spend before it), and the test (the champion and the best seed,
    every episode written, every test question asked) -- at the costs of the best program so far
    and of the best seed, from their own evaluations' calls (before any child: the best
    seed's, twice). Measured on the offline sample run: the champion, a vector-search child,
    costs a tenth of the LLM summariser per question, so pricing the test at the costliest seed
    had the iteration lines project 8.1M tokens for a run that spent 2.4M. Once no iteration is
    left and the best program is still a seed, the end tests that seed alone (mstar/final/finish.py):
    priced twice, the last iteration line of a 2-iteration run said $0.61 for a run that spent
    $0.38 (now $0.39).

This is the one whole-run figure the console prints: the `plan` line, then `-> ~... in all` on
every iteration line. A second estimate, from the seeds' mean cost per question, was printed
under the plan line (`estimate whole run`): it said $0.22 for that run beside the plan's $0.59,
its test $0.088 for a test that cost $0.22.

The seed estimate splits the seeds' calls into per-episode ones (extractions) and per-question
ones (query, answer, toolkit, judge): what a test of other sizes costs follows. Cache hits count
as calls, never as tokens or dollars (they were not billed). A `--patience` run may end sooner:
the projection is for the iterations asked.
"""
from __future__ import annotations

from dataclasses import dataclass

from mstar.llm import scope as llm_scope
from mstar.llm.types import estimate_tokens

REFLECTOR_CALLS = 1.5                 # a reflection and, sometimes, a compile fix
REFLECTOR_COMPLETION_TOKENS = 2000
TESTED_PROGRAMS = 2                   # the champion and the best seed


@dataclass(frozen=True)
class Spend:
    calls: float = 0.0
    tokens: float = 0.0
    usd: float = 0.0

    def __add__(self, o: "Spend") -> "Spend":
        return Spend(self.calls + o.calls, self.tokens + o.tokens, self.usd + o.usd)

    def __mul__(self, k: float) -> "Spend":
        return Spend(self.calls * k, self.tokens * k, self.usd * k)

    @classmethod
    def of_llm(cls, llm: dict | None) -> "Spend":
        """From an event's `llm` sums (mstar.llm.ledger.summarize)."""
        llm = llm or {}
        return cls(int(llm.get("calls", 0)), int(llm.get("prompt_tokens", 0)) + int(llm.get("completion_tokens", 0)),
                   float(llm.get("cost_usd") or 0.0))

    @classmethod
    def of_records(cls, records) -> "Spend":
        return cls(len(records), sum(r.billed_tokens for r in records), sum(r.cost_usd for r in records))


@dataclass(frozen=True)
class Shape:
    """The sizes a run's spend scales with (from its config, split and task)."""
    iterations: int
    n_seeds: int
    train_episodes: int
    static_size: int
    rotating_size: int
    rotating_fresh: bool
    test_episodes: int
    test_queries: int
    confirm_share: float          # 0 without a confirmation
    reflector_prompt_tokens: int
    reflector_usd: float = 0.0    # one reflector call at its price (0 unpriced)


def unit_costs(seed_records, shape: Shape, best_seed: str | None = None) -> tuple[Spend, Spend, Spend]:
    """(one episode written, one question answered, one reflector call) from the seeds' calls:
    `best_seed`'s, whose descendants most children and the champion will be (an LLM-summariser
    seed pays for every stored text at each question; a vector search does not); without it, or
    when it made no call, the costliest seed's."""
    by_seed: dict[str, list] = {}
    for r in seed_records:
        by_seed.setdefault(r.scope or "", []).append(r)
    if best_seed in by_seed:
        by_seed = {best_seed: by_seed[best_seed]}
    episode, question = Spend(), Spend()
    for recs in by_seed.values():
        extract = [r for r in recs if r.kind == "extract_knowledge_item"]
        rest = [r for r in recs if r.kind != "extract_knowledge_item" and r.role != "reflector"]
        e = Spend.of_records(extract) * (1 / max(shape.train_episodes, 1))
        q = Spend.of_records(rest) * (1 / max(shape.static_size, 1))
        episode, question = max(episode, e, key=_weight), max(question, q, key=_weight)
    reflector = Spend(1, shape.reflector_prompt_tokens + REFLECTOR_COMPLETION_TOKENS, shape.reflector_usd)
    return episode, question, reflector


def scope_units(records, episodes: int, questions: int) -> tuple[Spend, Spend]:
    """(one episode written, one question answered) from one evaluation's calls (its scope's
    records, the reflector's left out)."""
    extract = [r for r in records if r.kind == "extract_knowledge_item"]
    rest = [r for r in records if r.kind != "extract_knowledge_item" and r.role != "reflector"]
    return Spend.of_records(extract) * (1 / max(episodes, 1)), Spend.of_records(rest) * (1 / max(questions, 1))


def _weight(s: Spend) -> tuple:
    return (s.usd, s.tokens, s.calls)


def seed_iteration(episode: Spend, question: Spend, reflector: Spend, shape: Shape) -> Spend:
    """One iteration, before any ran: the child on the static set, the parent on a rotating batch
    (its knowledge base kept: questions only), the reflector."""
    child = episode * shape.train_episodes + question * shape.static_size
    parent = question * shape.rotating_size if shape.rotating_fresh else Spend()
    return child + parent + reflector * REFLECTOR_CALLS


def test_phase(episode: Spend, question: Spend, shape: Shape) -> Spend:
    """One program's test."""
    if not shape.test_queries:
        return Spend()
    return episode * shape.test_episodes + question * shape.test_queries


class Projection:
    """Fed the lineage events (after the progress printer has accounted them); `router` is the
    run's, whose ledger holds the seeds' calls. `spent` is what a resumed run spent before."""

    def __init__(self, router, shape: Shape, *, spent: Spend | None = None, done_before: int = 0):
        self.router, self.shape = router, shape
        self.spent = spent or Spend()
        self.done = done_before
        self.iterations: list[Spend] = []
        self.first: Spend | None = None       # one iteration, estimated from the seeds
        self._seed_test: Spend = Spend()      # the best seed's test
        self._child_test: Spend | None = None  # the best program's, once a child is the best
        self.seeds_seen = 0
        self._best: tuple[float, str, bool] | None = None     # (static score, scope, a seed?)
        self._best_seed: tuple[float, str] | None = None

    def observe(self, ev) -> None:
        from mstar.run import events as ev_types
        self.spent = self.spent + Spend.of_llm(getattr(ev, "llm", None))
        if isinstance(ev, ev_types.SeedEvent):
            self.seeds_seen += 1
            if not ev.error and (self._best_seed is None or ev.static_score > self._best_seed[0]):
                self._best_seed = (ev.static_score, ev.program_id)
            self._consider(ev.static_score if not ev.error else None, ev.program_id, True)
            if self.seeds_seen >= self.shape.n_seeds:
                self._from_seeds()
        elif isinstance(ev, ev_types.IterationEvent):
            if self.first is None:
                self._from_seeds()
            self.iterations.append(Spend.of_llm(ev.llm))
            self.done += 1
            if ev.added_child and self._consider(ev.static_score, f"iter_{ev.iteration:03d}", False):
                self._test_from_best()

    def _consider(self, score: float | None, scope: str, seed: bool) -> bool:
        """Is this program the best so far (the champion-to-be, tested at the end)?"""
        if score is None or (self._best is not None and score <= self._best[0]):
            return False
        self._best = (score, scope, seed)
        return True

    def _test_from_best(self) -> None:
        """The test at the costs of the best program so far and of the best seed."""
        if self._best is None or self._best_seed is None or not self.shape.test_queries:
            return
        records = self.router.ledger.snapshot()
        questions = self.shape.static_size + (self.shape.rotating_size if self.shape.rotating_fresh else 0)
        child = scope_units([r for r in records if r.scope == self._best[1]], self.shape.train_episodes, questions)
        seed = scope_units([r for r in records if r.scope == self._best_seed[1]], self.shape.train_episodes,
                           self.shape.static_size)
        self._child_test, self._seed_test = test_phase(*child, self.shape), test_phase(*seed, self.shape)

    def _from_seeds(self) -> None:
        records = [r for r in self.router.ledger.snapshot() if (r.scope or "").startswith("seed_")]
        episode, question, reflector = unit_costs(records, self.shape,
                                                  self._best_seed[1] if self._best_seed else None)
        self.first = seed_iteration(episode, question, reflector, self.shape)
        self._seed_test = test_phase(episode, question, self.shape)

    @property
    def tested(self) -> int:
        """How many programs the end will test: the best seed and the champion-to-be -- while
        iterations are left, a child even if none is the best yet; with none left and a seed the
        best, that seed alone."""
        return TESTED_PROGRAMS if self._child_test is not None or self.done < self.shape.iterations else 1

    @property
    def test(self) -> Spend:
        """The end's tests, a child that is not the best yet priced as the best seed."""
        if self._child_test is not None:
            return self._seed_test + self._child_test
        return self._seed_test * self.tested

    @property
    def ready(self) -> bool:
        return self.first is not None

    def total(self) -> Spend:
        """The whole run's projected spend."""
        if self.iterations:
            n = len(self.iterations)
            per = Spend(sum(s.calls for s in self.iterations) / n, sum(s.tokens for s in self.iterations) / n,
                        sum(s.usd for s in self.iterations) / n)
        else:
            per = self.first or Spend()
        # The prefetch's guesses are in no event (mstar/iteration/rotating_prefetch.py): the ledger has them.
        guessed = Spend.of_llm(self.router.spent_in(llm_scope.PREFETCH))
        if self.iterations:
            per = per + guessed * (1 / len(self.iterations))
        left = max(0, self.shape.iterations - self.done)
        before_end = self.spent + guessed + per * left
        return before_end + before_end * self.shape.confirm_share + self.test

    def text(self) -> str:
        """The projection on an iteration line: 'in all', as the plan line says it."""
        from mstar.run.progress import format_count, format_usd
        t = self.total()
        return f"~{format_count(t.calls)} calls {format_count(t.tokens)} tok{format_usd(t.usd)} in all"

    def plan_line(self) -> str:
        """The line printed once the seeds are scored: the whole run and the parts it adds up
        (the seeds spent, the iterations, the confirmation, the test), so no other line need say it."""
        from mstar.run.progress import format_count, format_usd
        t, per, spent = self.total(), self.first or Spend(), self.spent
        money = f",{format_usd(t.usd, '~')}" if t.usd else ""
        share = f"confirmation ~{self.shape.confirm_share:.0%} of the spend before it; " \
            if self.shape.confirm_share else ""
        n = self.shape.iterations
        return (f"plan    {n} iteration{'' if n == 1 else 's'}: ~{format_count(t.calls)} calls, "
                f"~{format_count(t.tokens)} tokens{money} in all (seeds {format_count(spent.calls)} calls "
                f"{format_count(spent.tokens)} tok{format_usd(spent.usd)}; ~{format_count(per.calls)} calls "
                f"{format_count(per.tokens)} tok{format_usd(per.usd)} per iteration; {share}"
                f"test ~{format_count(self.test.calls)} calls{format_usd(self.test.usd)} "
                f"({self.tested} program{'s' if self.tested != 1 else ''}))")


def for_run(router, cfg, task, evo, **kw) -> Projection:
    """The projection of a run about to start (evo: its loop.Evolution, which holds the split)."""
    from mstar.program.sources import load_program_source
    ev = cfg.evolution
    share = (ev.confirm_budget or 0.0) if ev.confirm_size > 0 and ev.confirm_top > 1 else 0.0
    prompt = reflector_prompt_tokens([load_program_source(s)[1] for s in cfg.seeds], cfg.sandbox.read_max_chars,
                                     ev.prompt_budget_tokens)
    reflector = router.backend("reflector")
    price = router.ledger.prices.lookup(reflector.model, reflector.name)
    shape = Shape(iterations=ev.iterations, n_seeds=len(cfg.seeds), train_episodes=len(evo.train),
                  static_size=len(evo.static), rotating_size=ev.rotating_size, rotating_fresh=ev.rotating == "fresh",
                  test_episodes=len(task.episodes), test_queries=len(task.test), confirm_share=share,
                  reflector_prompt_tokens=prompt,
                  reflector_usd=price.cost(prompt, REFLECTOR_COMPLETION_TOKENS) if price else 0.0)
    return Projection(router, shape, **kw)


def reflector_prompt_tokens(seed_sources: list[str], read_max_chars: int, prompt_budget: int) -> int:
    """A reflection prompt holds the program, a better and a worse reference program and two
    failed cases (question, answer, retrieved memory) plus fixed instructions."""
    longest = max((estimate_tokens(s) for s in seed_sources), default=1500)
    guess = 3 * longest + 2 * (read_max_chars // 4 + 300) + 1500
    return min(guess, prompt_budget)

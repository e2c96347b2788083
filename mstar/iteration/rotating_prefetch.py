"""The next iteration's rotating evaluation, run ahead while this iteration works.

An iteration of the paper's loop (`--rotating fresh`) begins by scoring its parent on a new
rotating batch: for each question the task agent formulates a query, the program reads (a read
may ask the toolkit LLM), the agent answers -- two or three requests one after another before
the reflector can be asked. The batch depends only on the seed and the iteration number
(Split.batch, mstar/split/make.py). The parent is not known: it is drawn from the pool this
iteration's child may still join. So the draw is made ahead, with the next iteration's own
generator (a new instance: the real draw is not disturbed), under the outcomes that decide it:
the child does not join (its gates or evaluation fail, or it answers as its parent did), it joins
at its parent's score, it joins as the best.

- The programs so drawn that are in the pool already are evaluated on the next batch as soon as
  this iteration has drawn its own parent: beside its rotating evaluation, the reflector and the
  child's evaluation, three or more replies in a row, in the background (mstar/llm/scope.py: its
  calls wait behind the iteration's own for the endpoint's slots).
- When the draw may pick the child itself, the child is evaluated on the next batch once it is
  proposed, beside its own static evaluation (the extraction prompts are the same requests:
  single flight sends them once).
- The next iteration waits for the guess of its parent, if one was made, then evaluates as
  always: every request is answered by the response cache and the reads are the same, so the
  result is the one it would have had; its chain is shorter by every reply the guess got back.
  The other guesses for it are cancelled: their calls not yet sent are never sent.

A program whose read() may change its own knowledge base (mstar/evaluation/read_state.py) is never
evaluated ahead (its next evaluation would see the changes); only its query formulations are asked.

Which guesses are sent. A right guess saves wall time; a wrong one costs a batch's requests for
nothing (a right one costs nothing extra: the iteration would have sent the same requests). On a
paid endpoint a wrong guess is money, on a fast one its saving is small, so each guess is priced
before it is sent, and sent only when

    p x chain x latency x worth  >=  (1 - p) x tokens

  p        the probability that its program is the next parent. The draw is deterministic once
           the outcome is known (the next iteration's generator is fixed), so p is the share of the
           outcomes whose draw picks it: the three above, and one for each earlier child of this
           run, at its own gain over its parent (or not joining, as it did) -- so a run whose
           children lose learns that they do.
  chain    the replies a right guess takes off the iteration's critical path: the chain of the
           guesses evaluated so far (chain_calls), 2 before any (a question's formulation, then its
           answer); 1 for a guess of formulations only.
  latency  the endpoint's seconds per reply: the lower quartile of the task role's replies in the
           ledger (a reply that also waited for a slot took longer than the endpoint did).
  tokens   the prompt tokens of the program's batch: what its own guesses cost so far, else its
           static evaluation's question prompts (formulations, the reads' toolkit calls, answers,
           cache hits included; a child being proposed: its parent's) per question times the batch
           size. Programs differ tenfold: llm_summarizer's read sends ~7,500 tokens to the toolkit
           per question.
  worth    the prompt tokens one second of the run's wall time is worth: `--guess-worth`
           (EvolutionConfig.guess_worth, 4,000). With a chain of 2, a guess right one time in three
           is sent at 2,000 ms when its batch costs under ~8,000 prompt tokens (vector_search's: ~3,500;
           llm_summarizer's: ~38,000), at 300 ms under ~1,200; one right two times in three under
           ~32,000 and ~4,800. Why this default: on the 30-session LoCoMo workload
           (docs/guesses.md, bench/bench_lead.py) a default run at 300 ms sends what one with
           `--no-prefetch` sends, and at 2,000 ms 9 requests (0.5% of its prompt tokens) more for
           11 s less (58.4 -> 47.5 s): the guesses keep to the token target of issue 43 (within
           0.9x of 8aa27d6) as far as a run without them does, and keep most of their saving. 0 sends
           only sure guesses (p = 1), a huge value every guess (as before), `--no-prefetch` none.

What the guesses cost and how many were used (their program became the next parent) is counted
per guess (its calls' requests and prompt tokens: llm.scope.Background.charge): each iteration's
event carries its guesses (timing["guesses"]), summary.json and the end of the console the run's.

Only where it pays and cannot change a lineage: the task agent's and the toolkit's replies are
cached ("reuse": the offline backend has none), iterations run one at a time (`--parallel 1`:
with more, the pool the next iteration sees is not this one plus this child), and evaluations run
in this process (a kept knowledge base serves the next evaluation; the programs' loaded constants
are in LOAD_INFO). Against a deterministic endpoint (the fake server) the run's lineage is the one
it makes with `--no-prefetch` (tests/test_rotating_prefetch.py); against a sampling one each reply
is one sample either way.
"""
from __future__ import annotations

import statistics
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_for

from mstar.agent import formulation_messages
from mstar.config import EvolutionConfig
from mstar.evaluation.read_state import read_changes_state
from mstar.evaluation.sessions import LOAD_INFO
from mstar.execution import EvalJob
from mstar.iteration.guesses import Guess, batch_tokens, draw_odds, reply_latency, tally, worth_sending
from mstar.llm import scope as llm_scope
from mstar.llm.slots import LAST
from mstar.pool import PoolEntry

# The ledger's scope of these requests: the run's spend counts them, no iteration's does (a guess
# for iteration n is made during n - 1 and may be for nothing), so what the guesses cost is one line.
SCOPE = llm_scope.PREFETCH
OUTCOMES = 3           # evaluations ahead at once: one per outcome above, and the child (more wait their turn)
WORTH = EvolutionConfig.guess_worth   # prompt tokens a second of wall time is worth, by default (see above)
FIRST_CHAIN = 2        # replies in a row a rotating evaluation takes before any guess has measured it


class RotatingPrefetch:
    """Runs the next iteration's rotating evaluation ahead for its likely parents (see above)."""

    def __init__(self, router, task, split, cfg, executor) -> None:
        self.router, self.task, self.split, self.ev, self.executor = router, task, split, cfg.evolution, executor
        self.worth = float(getattr(self.ev, "guess_worth", WORTH))
        self._calls = ThreadPoolExecutor(max(1, self.ev.rotating_size), thread_name_prefix="prefetch")
        self._evals = ThreadPoolExecutor(OUTCOMES + 1, thread_name_prefix="prefetch-eval")
        # (iteration, program text) -> its guess and its evaluation (None: formulations only)
        self._ahead: dict[tuple[int, str], tuple[Guess, Future | None]] = {}
        self.guesses: list[Guess] = []
        self.declined: set[tuple[int, str]] = set()   # (iteration, program id) the rule did not send
        self._gains: list[float | None] = []   # each earlier child's gain over its parent (None: not joined)
        self._learnt: set[int] = set()
        self._lock = threading.Lock()

    @classmethod
    def for_run(cls, cfg, task, split, router, executor) -> "RotatingPrefetch | NoPrefetch":
        """A prefetcher when it can pay and cannot change the lineage, else one that does nothing."""
        ev = cfg.evolution
        cached = router.cache is not None and all(router.policy(r).cache == "reuse" for r in ("task", "toolkit"))
        if not (ev.prefetch and ev.rotating == "fresh" and ev.parallel == 1 and cached
                and getattr(executor, "in_process", False) and ev.rotating_size > 0 and ev.iterations >= 1):
            return NoPrefetch()
        return cls(router, task, split, cfg, executor)

    def ahead(self, iteration: int, seen: list[PoolEntry], parent: PoolEntry, select, rng_for) -> int:
        """Called once iteration `iteration` has drawn `parent` from `seen`: evaluates iteration + 1's
        batch for the programs of the pool its draw would pick, those worth it. `select(candidates,
        rng)`: the run's parent selection; `rng_for()`: a new instance of the next iteration's generator."""
        self._learn(iteration, seen)
        if iteration >= self.ev.iterations:
            return 0
        child = self._child(iteration, parent, "")
        odds = [(e, p) for e, p in self._odds(select, seen, parent, child, rng_for) if e.program_id != child.program_id]
        return sum(self._offer(iteration + 1, e, p, take_prestart=True) for e, p in odds)

    def ask_next(self, iteration: int, seen: list[PoolEntry], parent: PoolEntry, child_source: str,
                 select, rng_for) -> int:
        """Called once iteration `iteration`'s child (`child_source`) is proposed and before it is
        evaluated: when the next draw may pick the child, its next batch is evaluated too, if worth
        it (the worker started for its static evaluation is left to that one)."""
        if iteration >= self.ev.iterations:
            return 0
        child = self._child(iteration, parent, child_source)
        return sum(self._offer(iteration + 1, e, p, take_prestart=e.program_id != child.program_id,
                               price_as=parent if e.program_id == child.program_id else e)
                   for e, p in self._odds(select, seen, parent, child, rng_for))

    def settle(self, iteration: int, source: str) -> float | None:
        """Before iteration `iteration` evaluates its parent (`source`) on its batch: waits for the
        guess that evaluated it ahead, if one did, and cancels the others. The seconds waited, or
        None when the parent was not evaluated ahead."""
        with self._lock:
            mine = self._ahead.pop((iteration, source), None)
            for key in [k for k in self._ahead if k[0] <= iteration]:
                guess, future = self._ahead.pop(key)
                guess.used = False
                guess.work.cancel()          # its calls not yet sent are never sent
                if future is not None:
                    future.cancel()          # not started: never starts
        if mine is None:
            return None
        guess, future = mine
        guess.used = True
        if future is None:                   # formulations only: the evaluation finds them in the cache
            return None
        guess.work.promote()   # the iteration waits on it now: its calls left go as the iteration's own
        t0 = time.perf_counter()
        wait_for([future])
        return time.perf_counter() - t0

    def account(self, iteration: int) -> dict:
        """For iteration `iteration`'s event: its guesses (those made for its batch) as `tally` counts them."""
        with self._lock:
            mine = [g for g in self.guesses if g.iteration == iteration]
            sent = {g.program_id for g in mine}
            declined = sum(1 for it, pid in self.declined if it == iteration and pid not in sent)
            return {"guesses": tally(mine, declined)} if mine or declined else {}

    def report(self) -> dict:
        """The run's guesses, for summary.json: `tally` of them all, and each one."""
        with self._lock:
            sent = {(g.iteration, g.program_id) for g in self.guesses}
            return {**tally(self.guesses, len(self.declined - sent)), "worth": self.worth,
                    "each": [g.to_dict() for g in self.guesses]}

    def ask(self, iteration: int, sources: list[str], work: llm_scope.Background | None = None) -> int:
        """Ask iteration `iteration`'s rotating formulations for each program text in `sources`
        (those whose loaded constants are known); returns the number of distinct prompts asked."""
        prompts: dict[str, list[dict]] = {}
        for source in sources:
            info = LOAD_INFO.get(source)
            if info is None:
                continue
            for messages in formulation_messages(info, self._queries(iteration)):
                prompts.setdefault(repr(messages), messages)
        with llm_scope.scoped(SCOPE), llm_scope.background(work):
            for messages in prompts.values():
                llm_scope.submit(self._calls, self._one, messages)
        return len(prompts)

    def close(self) -> None:
        """Drop what has not started; wait for what has (no call outlives the run)."""
        self._evals.shutdown(wait=True, cancel_futures=True)
        self._calls.shutdown(wait=True, cancel_futures=True)

    # ------------------------------------------------------------ what a guess is worth
    def _odds(self, select, seen, parent, child, rng_for) -> list[tuple[PoolEntry, float]]:
        return draw_odds(select, seen, parent, child, rng_for, list(self._gains))

    def _learn(self, iteration: int, seen: list[PoolEntry]) -> None:
        """The outcome of the iteration before `iteration`, read from the pool this one sees."""
        before = iteration - 1
        if before < 1 or before in self._learnt:
            return
        self._learnt.add(before)
        child = next((e for e in seen if e.program_id == f"iter_{before:03d}"), None)
        parent = next((e for e in seen if child is not None and e.program_id == child.parent_id), None)
        joined = child is not None and not child.no_change and parent is not None
        self._gains.append(child.static_score - parent.static_score if joined else None)

    def _offer(self, iteration: int, entry: PoolEntry, odds: float, *, take_prestart: bool,
               price_as: PoolEntry | None = None) -> int:
        """Sends the guess of `entry` for `iteration` when the rule says it is worth it (`price_as`:
        the program whose static evaluation prices it, when it has none yet: a child, its parent)."""
        with self._lock:
            if (iteration, entry.source) in self._ahead:
                return 0
        if odds < 1.0:
            formulations_only = read_changes_state(entry.source)
            records = self.router.ledger.snapshot()
            chain, tokens = self._cost(records, entry, formulations_only, price_as or entry)
            if not worth_sending(odds, chain, reply_latency(records), tokens, self.worth):
                with self._lock:
                    self.declined.add((iteration, entry.program_id))
                return 0
        return self._launch(iteration, entry.source, take_prestart=take_prestart, program_id=entry.program_id,
                            odds=odds)

    def _cost(self, records, entry: PoolEntry, formulations_only: bool, price_as: PoolEntry) -> tuple[float, float]:
        """(chain, tokens) of a guess of `entry`: what its own guesses measured, else the question
        prompts of `price_as`'s static evaluation, scaled to a batch."""
        kind = "formulations" if formulations_only else "evaluation"
        with self._lock:
            # Measured: an evaluation that ran to its end before any cancel (one cancelled on the way
            # sent part of its calls), formulations of a right guess (never cancelled).
            done = [g for g in self.guesses if g.kind == kind and (g.chain is not None if kind == "evaluation"
                                                                    else g.used is True)]
        own = [g for g in done if g.program_id == entry.program_id]
        chains = [g.chain for g in done if g.chain is not None]
        chain = 1.0 if formulations_only else statistics.fmean(chains) if chains else float(FIRST_CHAIN)
        if own:
            return chain, statistics.fmean(g.work.prompt_tokens for g in own)
        return chain, batch_tokens(records, price_as, formulations_only, len(self.split.static),
                                   self.ev.rotating_size)

    # ------------------------------------------------------------ sending
    def _launch(self, iteration: int, source: str, *, take_prestart: bool, program_id: str = "",
                odds: float = 1.0) -> int:
        with self._lock:
            if (iteration, source) in self._ahead:
                return 0
            # A read that changes its knowledge base would leave the next evaluation another one.
            formulations_only = read_changes_state(source)
            guess = Guess(iteration, program_id, odds, "formulations" if formulations_only else "evaluation")
            future = None
            if not formulations_only:
                job = EvalJob(source, "validation", tuple(self._batch(iteration)), take_prestart=take_prestart)
                with llm_scope.scoped(SCOPE), llm_scope.background(guess.work):
                    future = llm_scope.submit(self._evals, self._evaluate, job, guess)
            self._ahead[(iteration, source)] = (guess, future)
            self.guesses.append(guess)
        if formulations_only:
            return int(self.ask(iteration, [source], guess.work) > 0)
        return 1

    def _evaluate(self, job: EvalJob, guess: Guess) -> None:
        try:
            result = self.executor.run(job)
            if not guess.work.cancelled:   # a cancelled guess's calls failed unsent: it measured nothing
                guess.chain = result.chain_calls
        except Exception:  # noqa: BLE001 -- a failed guess is no evaluation's error: the evaluation runs again
            pass

    def _one(self, messages: list[dict]) -> None:
        try:
            self.router.call("task", messages, allow_truncated=False, priority=LAST)
        except Exception:  # noqa: BLE001 -- as above: the evaluation asks again
            pass

    def _batch(self, iteration: int) -> list[int]:
        return self.split.batch(self.ev.rotating_size, iteration, self.ev.seed)

    def _queries(self, iteration: int) -> list:
        return [self.task.validation[i] for i in self._batch(iteration)]

    @staticmethod
    def _child(iteration: int, parent: PoolEntry, source: str) -> PoolEntry:
        return PoolEntry(f"iter_{iteration:03d}", parent.program_id, iteration, source, parent.static_score)


class NoPrefetch:
    """What a run without the prefetch calls (the offline backend, --parallel > 1, Ray, ...)."""

    def ahead(self, *args) -> int:
        return 0

    def ask_next(self, *args) -> int:
        return 0

    def settle(self, *args) -> None:
        return None

    def account(self, iteration: int) -> dict:
        return {}

    def report(self) -> None:
        return None

    def close(self) -> None:
        pass

"""One evaluation of a memory program (paper Algorithm 1b).

Fresh knowledge base in its own sandbox worker -> ingest the training episodes (the agent
extracts a KnowledgeItem, the program writes it) -> answer each query (the agent formulates a
Query, the program reads, the agent answers) -> score. An interactive query (a game,
meta["interactive"]) is played after its read instead of answered: mstar/evaluation/playing.py.

With a real model the time goes to waiting, so as much as possible waits at once:
  - every extraction and every query formulation is asked at the start (they need only the
    program's instructions and schema, not its knowledge base; when write() never reads its
    item, only the reflector's examples' extractions: mstar.evaluation.ingest);
  - writes go to the worker in episode order, each as soon as its extraction is back (or at
    once, when write() never reads its item: mstar.evaluation.ingest), so the knowledge base is
    built the same way whatever the concurrency;
  - after the last write, the reads overlap (each on a worker thread of the sandbox, at most
    `SandboxLimits.parallel_reads`), and each answer is asked as soon as its read returns.
Results come back in query order. A program whose read() changes its state (an attribute, a
table, its database: mstar.evaluation.read_state) has its reads run one at a time, in the
order they come, so none sees another half-way; one whose reads only read gets the same
answers at any concurrency.

LLM failures are not scores: a case whose agent or judge call failed after its retries is an
error, left out of the mean and counted; an episode whose extraction (or a toolkit call in its
write) failed is an error of that episode, not written with made-up defaults, and counted
(mstar.evaluation.ingest); when 3 or more failed and their share of the calls or episodes passes
`outage_threshold` the evaluation raises EndpointOutage (the loop stops the run, resumably),
and an error no retry can fix (FatalLLMError: bad key, unknown model) propagates at once.
A task's own scorer that fails on a case makes it an error too (score_error, counted in
case_errors); one that failed on every case it was given raises ScorerOutage, an EndpointOutage.
"""
from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from dataclasses import asdict
from typing import Callable, Sequence

from mstar import agent
from mstar.config import SandboxConfig
from mstar.evaluation.ingest import check_ingestion, ingest
from mstar.evaluation.item_use import write_ignores_item
from mstar.evaluation.read_state import read_changes_state
from mstar.evaluation.records import (OUTAGE_MIN_FAILED, WRITE_EXAMPLES, CaseResult, EndpointOutage, EvalResult,
                                     check_scored, failed_result, summarise)
from mstar.evaluation.playing import play_query
from mstar.evaluation.pools import Bounded, close_later, shared_pool
from mstar.evaluation.prestart import PRESTARTS
from mstar.evaluation import xray
from mstar.evaluation.calls import Calls, Toolkit
from mstar.evaluation.knowledge_identity import relocate, with_own_constants
from mstar.evaluation.sessions import LOAD_INFO, SessionCache, load_difference, session_key
from mstar.llm import scope as llm_scope
from mstar.llm.router import LLMRouter
from mstar.llm.slots import FIRST, LAST
from mstar.llm.types import FatalLLMError
from mstar.split.embed import current_program_embeddings
from mstar.tasks import Episode, QueryItem
from mstar.tasks.model import ScorerError
from mstar.tasks.judging import JudgeFn, Score
from sandbox.engine.session import ProgramSession, SandboxError, SandboxLimits

OUTAGE_THRESHOLD = 0.2    # failed share of an evaluation's LLM calls that means "the endpoint is down"


def sandbox_limits(cfg: SandboxConfig) -> SandboxLimits:
    return SandboxLimits(call_timeout_s=cfg.call_timeout_s, read_max_chars=cfg.read_max_chars,
                         memory_mb=cfg.memory_mb, llm_calls_per_op=cfg.llm_calls_per_op,
                         parallel_reads=getattr(cfg, "parallel_reads", SandboxLimits.parallel_reads))


def _verdict_dict(exc: SandboxError) -> dict:
    v = exc.verdict
    return asdict(v) if hasattr(v, "__dataclass_fields__") else {"message": str(exc)}


class _Program:
    """The worker and what went wrong with it as a whole, shared by the concurrent cases."""

    def __init__(self, session: ProgramSession, toolkit: Toolkit, calls: Calls, serial_reads: bool = False,
                 source: str | None = None) -> None:
        self.session = session
        self.source = source or session.source   # the program evaluated (the session's may be another's)
        self.toolkit, self.calls = toolkit, calls
        self.fatal: dict | None = None
        self.reader: int | None = None   # the program's own read() in another's worker (SessionCache.fit)
        self.sandbox_s = 0.0
        self._lock = threading.Lock()
        # A read() that changes the program's state runs alone (mstar.evaluation.read_state).
        self.read_turn = threading.Lock() if serial_reads else contextlib.nullcontext()

    def read(self, query: dict):
        return self.session.read(query, self.reader)

    def op(self, fn, *args):
        t0 = time.perf_counter()
        try:
            return fn(*args)
        except SandboxError as exc:
            line = getattr(exc.verdict, "line", None)
            if line and self.source != self.session.source:   # a shared knowledge base: its builder's lines
                exc = SandboxError(dataclasses.replace(exc.verdict, line=relocate(line, self.session.source,
                                                                                   self.source)), exc.logs)
            if not self.session.alive():
                with self._lock:
                    self.fatal = self.fatal or _verdict_dict(exc)
            raise exc
        finally:
            with self._lock:
                self.sandbox_s += time.perf_counter() - t0


def evaluate(
    source: str,
    episodes: Sequence[Episode],
    queries: Sequence[QueryItem],
    *,
    metric: Callable[[str, QueryItem, JudgeFn], "Score | float"],
    router: LLMRouter,
    sandbox: SandboxConfig,
    workers: int = 64,
    sessions: SessionCache | None = None,
    outage_threshold: float = OUTAGE_THRESHOLD,
    progress: Callable[[str, int, int], None] | None = None,
    embed="current",
    take_prestart: bool = True,
    keep: bool = True,
) -> EvalResult:
    """Score `source` on `queries` after writing `episodes`. With `sessions`, an ingested
    knowledge base of the same program over the same episodes is reused (reads only), and this
    one is kept for later evaluations (with `keep`; else none is). `progress("writes" | "cases", done, total)` is called as
    episodes are written and cases finish (the CLI's live display). `embed`: the engine-served
    embeddings of the program's chroma collections (mstar.split.embed.program_embeddings; None =
    hashing in the worker; "current" = the process-wide choice, use_program_embeddings).
    `take_prestart`: use a worker started ahead for `source` (mstar.evaluation.prestart)."""
    if isinstance(embed, str) and embed == "current":
        embed = current_program_embeddings()
    progress = progress or (lambda what, done, total: None)
    t0 = time.perf_counter()
    calls = Calls(router)
    key = session_key(source, [ep.id for ep in episodes]) if sessions is not None else None
    kept = sessions.lease(key) if sessions is not None else None
    # The process's threads, at most `workers` of this evaluation's tasks of each kind at once.
    llm_pool, case_pool = Bounded("llm", workers), Bounded("case", min(workers, max(1, len(queries))))
    # The worker's start has threads of its own: in the calls' pool it queued behind the calls of
    # the evaluations asked before it (measured: a third seed's worker started 0.13 s late).
    start_pool = Bounded("start", 1)
    asked = shared = None
    try:
        if kept is None and sessions is not None and not take_prestart and sessions.coming(key):
            # A guess while the program's own evaluation builds this knowledge base (mstar.evaluation
            # .sessions): its formulations go now, its reads wait for that one, not for a second copy.
            hint = LOAD_INFO.get(source)
            if hint is not None:
                msgs = agent.formulation_messages(hint, queries)
                asked = (msgs, [llm_pool.submit(calls.text, "task", m) for m in msgs])
            kept = sessions.lease_when_built(key)
        kept, reader = sessions.fit(kept, source) if kept is not None else (None, None)
        if kept is not None:   # perhaps built by a program of the same writer identity: its prompts are ours
            program, info, writes = (_Program(kept.session, kept.toolkit, calls, read_changes_state(source), source),
                                     with_own_constants(kept.info, source), kept.writes)
            program.reader = reader
        else:
            toolkit = Toolkit(calls)
            llm = llm_scope.bind_fallback(toolkit)
            # A worker started while the child's gates ran (mstar.evaluation.prestart), else a new one.
            taken = PRESTARTS.take(source, session_options(sandbox, embed), llm) if take_prestart else None
            session, starting = taken if taken is not None else (new_session(source, sandbox, embed, llm), None)
            program = _Program(session, toolkit, calls, read_changes_state(source))
            # Known from an earlier load (the gates, or an evaluation): the prompts are asked now
            # and the worker starts meanwhile; else the worker's load comes first.
            hint = LOAD_INFO.get(source)
            if starting is None and hint is not None:
                starting = start_pool.submit(program.op, session.start)
            try:
                info = hint or (starting.result() if starting is not None else program.op(session.start))
            except SandboxError as exc:
                session.close()
                return _failed(queries, _verdict_dict(exc), time.perf_counter() - t0)
        consts = info.constants
        # Query formulation needs only the instructions and the schema: asked right away, with
        # the extractions, so it is back by the time the last episode is written.
        q_msgs = agent.formulation_messages(info, queries)
        # An extraction a write waits for goes first; when write() ignores its item no write waits
        # for any, and only the reflector's examples are asked for, last, after the formulations
        # (mstar.evaluation.ingest says why not the others).
        early = kept is None and write_ignores_item(source)
        pending, extract = [], []

        def ask_extractions(priority: int, count: int | None = None) -> None:
            extract.extend(llm_pool.submit(calls.text, "task", agent.build_extraction_messages(
                consts["INSTRUCTION_KNOWLEDGE_ITEM"], ep.text, info.knowledge_item_schema), priority, False)
                           for ep in episodes[:count])
            pending.extend(extract)
        try:
            if kept is None and not early:
                ask_extractions(FIRST)
            if asked is not None and asked[0] != q_msgs:
                for f in asked[1]:
                    f.cancel()
            q_futs = asked[1] if asked is not None and asked[0] == q_msgs else \
                [llm_pool.submit(calls.text, "task", m) for m in q_msgs]
            pending += q_futs
            if early:
                ask_extractions(LAST, WRITE_EXAMPLES)
            if kept is None and starting is not None:
                try:
                    loaded = starting.result()
                except SandboxError as exc:
                    for f in pending:
                        f.cancel()
                    program.session.close()
                    return _failed(queries, _verdict_dict(exc), time.perf_counter() - t0)
                difference = load_difference(info, loaded)
                if difference:   # e.g. a default of datetime.now(): this program's failure, not the run's
                    for f in pending:
                        f.cancel()
                    program.session.close()
                    return _failed(queries, {"ok": False, "stage": "import", "gate": "determinism",
                                             "rule": "load differs", "message": difference, "line": None},
                                   time.perf_counter() - t0)
            progress("cases", 0, len(queries))
            settle = None
            if kept is None:
                LOAD_INFO.put(source, info)
                writes, settle = ingest(program, episodes, extract, info, progress, early=early)
                check_ingestion(writes, outage_threshold)   # an outage costs no reads
                if keep and sessions is not None and sessions.coming(key) and not any(w.ingest_error for w in writes):
                    shared = sessions.share(key, program.session, info, writes, program.toolkit,   # a guess waits for it
                                            calls.write_tokens)
            case_futs = [case_pool.submit(_case, program, calls, q, m, f, info, metric)
                         for q, m, f in zip(queries, q_msgs, q_futs)]
            finished = iter(range(1, len(case_futs) + 1))   # next() is atomic under the GIL
            for f in case_futs:
                f.add_done_callback(lambda _f: progress("cases", next(finished), len(case_futs)))
            pending += case_futs
            cases = [f.result() for f in case_futs]
            if settle is not None:
                settle()   # the extractions early writes did not wait for, into their records
        except BaseException:  # a fatal LLM error, an interrupt: stop what has not started
            for f in pending:
                f.cancel()
            _done_with(program.session, kept or shared, sessions, None, None, None, keep=False)
            raise
    finally:
        for pool in (start_pool, llm_pool, case_pool):
            pool.join()
    # A knowledge base that misses an episode (its ingestion failed) is not kept for reuse.
    keep = keep and program.fatal is None and kept is None and shared is None \
        and not any(w.ingest_error for w in writes)
    if shared is not None:   # the early writes' extractions, settled since it was shared
        shared.write_tokens = calls.write_tokens
    _done_with(program.session, kept or shared, sessions, key, info, writes, keep=keep, toolkit=program.toolkit,
               write_tokens=calls.write_tokens)
    if calls.failed >= OUTAGE_MIN_FAILED and calls.failed / calls.total > outage_threshold:
        raise EndpointOutage(f"{calls.failed} of {calls.total} LLM calls of this evaluation failed after "
                             f"their retries; last error: {calls.last}")
    check_scored(cases)   # a scorer that failed on every case: ScorerOutage, never a mean of 0
    if program.fatal is None:   # where each wrong answer was lost (no LLM call); a crash lost them all
        xray.attach(cases, queries, writes, episodes, source)
    result = summarise(cases, writes, program.fatal, time.perf_counter() - t0, program.sandbox_s,
                       calls.total, calls.failed, reused=kept is not None)
    result.xray = xray.summary(cases)
    result.load_warnings = [w for w in info.warnings if w.startswith("contract:")]
    result.chain_calls = result.critical_chain()
    result.question_tokens, result.write_tokens = calls.question_tokens, calls.write_tokens
    result.shared_write_tokens = kept.write_tokens if kept is not None else 0
    return result


def session_options(sandbox: SandboxConfig, embed) -> tuple:
    """What a worker is started with besides the program: a prestarted worker serves an
    evaluation only when these are the same."""
    return sandbox_limits(sandbox), tuple(sandbox.allowed_imports), id(embed)


def new_session(source: str, sandbox: SandboxConfig, embed, llm) -> ProgramSession:
    # Each session its own view of the served embeddings: its memo entries go when it closes.
    served = embed.session() if hasattr(embed, "session") else embed
    return ProgramSession(source, allowed_imports=sandbox.allowed_imports, limits=sandbox_limits(sandbox), llm=llm,
                          embed=served, embed_label=getattr(embed, "label", "engine"))


def prestart(source: str, sandbox: SandboxConfig, embed="current") -> object | None:
    """Start `source`'s worker now for an evaluation to come (its token for PRESTARTS.drop)."""
    if isinstance(embed, str) and embed == "current":
        embed = current_program_embeddings()
    token = PRESTARTS.begin(source, session_options(sandbox, embed), lambda llm: new_session(source, sandbox, embed, llm))
    # The evaluation asks whether write() reads its item before its first write (1-2.5 ms of
    # parsing for an evolved program): answered now, while the gates run, and kept (lru_cache).
    shared_pool("llm").submit(write_ignores_item, source)
    return token


def _done_with(session, kept, sessions, key, info, writes, *, keep: bool, toolkit=None, write_tokens: int = 0) -> None:
    if kept is not None:
        sessions.release(kept)
    elif keep and sessions is not None:
        sessions.put(key, session, info, writes, toolkit, write_tokens)
    else:
        close_later(session)   # its kill, reap and cleanup need not hold up the result


def _case(program: _Program, calls: Calls, q: QueryItem, q_msgs: list[dict], q_fut, info,
          metric) -> CaseResult:
    """One query: formulate (already asked), read, answer, score."""
    q_reply, q_err, q_waited = q_fut.result()
    obj, warn = agent.parse_json_object(q_reply) if q_err is None else (None, None)
    qd, warns = agent.fill_fields(obj, info.query_schema)
    warns = ([warn] if warn else []) + warns
    case = CaseResult(q.id, q.question, q.answer, "", 0.0, q.category, qd, "",
                      [q_msgs[-1], {"role": "assistant", "content": q_reply or ""}], warns,
                      waits={"formulate": q_waited})
    if q_err is not None:
        case.llm_error = f"query formulation failed: {q_err}"
        return case
    if program.fatal is not None:
        case.error = "not run: the program failed earlier in this evaluation"
        return case
    failures = program.toolkit.watch(calls)
    try:
        with program.read_turn:
            res = program.op(program.read, qd)
        case.retrieved, case.debug_logs, case.toolkit_calls = res.output or "", res.logs, res.llm_calls
        case.read_cpu_s = round(res.cpu_s, 6)
    except SandboxError as exc:
        case.error = str(exc)
    case.waits["toolkit"] = program.toolkit.waited()
    program.toolkit.check()
    if failures:  # what the program read was built on a failed call: not a verdict on the program
        case.llm_error = f"toolkit call failed: {failures[-1]}"
        return case
    consts = info.constants
    if q.meta.get("interactive"):   # a game to play with what was read, not a question to answer
        if program.fatal is not None:   # its mean is 0 anyway: no game processes for a crashed program
            case.error = case.error or "not played: the program failed in this evaluation"
            return case
        return play_query(case, q, consts, calls.text)
    a_msgs = agent.build_answer_messages(consts["ALWAYS_ON_KNOWLEDGE"], case.retrieved, q.question,
                                         consts["INSTRUCTION_RESPONSE"], query_turns=case.conversation[:2])
    a_reply, a_err, case.waits["answer"] = calls.text("task", a_msgs)
    case.conversation += [a_msgs[-1], {"role": "assistant", "content": a_reply or ""}]
    if a_err is not None:
        case.llm_error = f"answer failed: {a_err}"
        return case
    case.answer = agent.clean_answer(a_reply)
    if program.fatal is not None:  # no judge calls for a program that crashed: its mean is 0 anyway
        case.warnings.append("not scored: the program failed in this evaluation")
        return case
    judge_errors: list[str] = []
    fatal: list[FatalLLMError] = []

    def judge(messages: list[dict]) -> str:
        try:
            text, err, waited = calls.text("judge", messages)
        except FatalLLMError as exc:  # the metric would swallow it as a failed criterion
            fatal.append(exc)
            raise RuntimeError(str(exc)) from None
        case.judge_calls += 1
        case.waits["judge"] = case.waits.get("judge", 0) + waited
        if err is not None:
            judge_errors.append(err)
            raise RuntimeError(err)  # the metric records the criterion as not met; we mark the case
        return text

    try:
        result = metric(case.answer, q, judge)
    except ScorerError as exc:   # the task's own scorer failed: an error of this case, never a 0
        case.score_error = str(exc)
        return case
    if fatal:
        raise fatal[0]
    score = result if isinstance(result, Score) else Score(float(result))
    case.score, case.score_details = score.value, score.details
    case.warnings += score.warnings
    if judge_errors:
        case.llm_error = f"judge failed: {judge_errors[-1]}"
    return case


def _failed(queries: Sequence[QueryItem], verdict: dict, seconds: float) -> EvalResult:
    return failed_result(queries, verdict, seconds)

"""One evaluation of a memory program (paper Algorithm 1b).

Fresh knowledge base in its own sandbox worker -> ingest the training episodes
(agent extracts a KnowledgeItem, program writes it) -> answer each query
(agent formulates a Query, program reads, agent answers) -> score.

The task-agent calls are independent of each other, so they run on a thread
pool; the program's writes and reads go to its one worker in a fixed order,
so an evaluation is reproducible whatever the concurrency.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

from mstar import agent
from mstar.config import SandboxConfig
from mstar.llm.router import LLMRouter
from mstar.tasks.judging import JudgeFn, Score
from mstar.tasks.metrics import per_category_means
from mstar.tasks import Episode, QueryItem
from sandbox.engine.session import ProgramSession, SandboxError, SandboxLimits

MAX_RAW_IN_RECORD = 1500  # write examples keep a prefix of the raw text, not all of it


@dataclass
class CaseResult:
    query_id: str
    question: str
    expected: str
    answer: str
    score: float
    category: str | None
    query: dict
    retrieved: str
    conversation: list[dict]           # query prompt/reply, answer prompt/reply
    warnings: list[str] = field(default_factory=list)
    debug_logs: list[str] = field(default_factory=list)
    toolkit_calls: int = 0
    error: str | None = None
    score_details: dict = field(default_factory=dict)   # e.g. a rubric's per-criterion verdicts


@dataclass
class WriteRecord:
    episode_id: str
    raw_text: str
    item: dict
    warnings: list[str] = field(default_factory=list)
    debug_logs: list[str] = field(default_factory=list)
    error: str | None = None


@dataclass
class EvalResult:
    mean_score: float
    cases: list[CaseResult]
    writes: list[WriteRecord]
    per_category: dict[str, float]
    error: dict | None = None           # verdict when the program failed as a whole
    seconds: float = 0.0
    sandbox_seconds: float = 0.0        # time spent waiting on the worker (writes, reads, start)

    def to_dict(self) -> dict:
        return asdict(self)


def sandbox_limits(cfg: SandboxConfig) -> SandboxLimits:
    return SandboxLimits(call_timeout_s=cfg.call_timeout_s, read_max_chars=cfg.read_max_chars,
                         memory_mb=cfg.memory_mb, llm_calls_per_op=cfg.llm_calls_per_op)


def _verdict_dict(exc: SandboxError) -> dict:
    v = exc.verdict
    return asdict(v) if hasattr(v, "__dataclass_fields__") else {"message": str(exc)}


def evaluate(
    source: str,
    episodes: Sequence[Episode],
    queries: Sequence[QueryItem],
    *,
    metric: Callable[[str, QueryItem, JudgeFn], "Score | float"],
    router: LLMRouter,
    sandbox: SandboxConfig,
    workers: int = 8,
) -> EvalResult:
    t0 = time.perf_counter()
    sb_time = 0.0
    toolkit_llm = lambda messages: router.text("toolkit", messages)  # noqa: E731
    session = ProgramSession(source, allowed_imports=sandbox.allowed_imports,
                             limits=sandbox_limits(sandbox), llm=toolkit_llm)
    writes: list[WriteRecord] = []
    cases: list[CaseResult] = []
    fatal: dict | None = None
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool, session:
        try:
            ts = time.perf_counter()
            info = session.start()
            sb_time += time.perf_counter() - ts
        except SandboxError as exc:
            return _failed(queries, _verdict_dict(exc), time.perf_counter() - t0)
        consts = info.constants

        # Phase 1: ingestion. Extractions in parallel, each write as soon as its extraction (and
        # the writes before it) are done. Query formulation needs only the instructions and the
        # schema, not the knowledge base, so it is queued right behind the extractions and runs
        # while the episodes are written (a pipeline: no phase waits for a whole other phase).
        extract_msgs = [agent.build_extraction_messages(consts["INSTRUCTION_KNOWLEDGE_ITEM"], ep.text,
                                                        info.knowledge_item_schema) for ep in episodes]
        extract_futs = [pool.submit(_safe_text, router, "task", m) for m in extract_msgs]
        q_msgs = [agent.build_query_messages(consts["INSTRUCTION_QUERY"], q.question, info.query_schema)
                  for q in queries]
        q_futs = [pool.submit(_safe_text, router, "task", m) for m in q_msgs]
        for ep, fut in zip(episodes, extract_futs):
            reply, err = fut.result()
            obj, warn = agent.parse_json_object(reply) if err is None else (None, f"task agent failed: {err}")
            item, warns = agent.fill_fields(obj, info.knowledge_item_schema)
            warns = ([warn] if warn else []) + warns
            rec = WriteRecord(ep.id, ep.text[:MAX_RAW_IN_RECORD], item, warns)
            if fatal is None:
                try:
                    ts = time.perf_counter()
                    res = session.write(item, ep.text)
                    sb_time += time.perf_counter() - ts
                    rec.debug_logs = res.logs
                except SandboxError as exc:
                    sb_time += time.perf_counter() - ts
                    rec.error = str(exc)
                    if not session.alive():
                        fatal = _verdict_dict(exc)
            writes.append(rec)

        # Phase 2: queries. Reads in order, each answer queued as soon as its read returns.
        q_replies: list[tuple[str, str | None]] = []
        a_msgs: list[list[dict]] = []
        a_futs = []
        retrieved: list[tuple[dict, str, list[str], list[str], int, str | None]] = []
        for q, msgs, q_fut in zip(queries, q_msgs, q_futs):
            reply, err = q_fut.result()
            q_replies.append((reply, err))
            obj, warn = agent.parse_json_object(reply) if err is None else (None, f"task agent failed: {err}")
            qd, warns = agent.fill_fields(obj, info.query_schema)
            warns = ([warn] if warn else []) + warns
            text, logs, calls, error = "", [], 0, None
            if fatal is None:
                try:
                    ts = time.perf_counter()
                    res = session.read(qd)
                    sb_time += time.perf_counter() - ts
                    text, logs, calls = res.output or "", res.logs, res.llm_calls
                except SandboxError as exc:
                    sb_time += time.perf_counter() - ts
                    error = str(exc)
                    if not session.alive():
                        fatal = _verdict_dict(exc)
            else:
                error = "not run: the program failed earlier in this evaluation"
            retrieved.append((qd, text, warns, logs, calls, error))
            a_msgs.append(agent.build_answer_messages(consts["ALWAYS_ON_KNOWLEDGE"], text, q.question,
                                                      consts["INSTRUCTION_RESPONSE"]))
            a_futs.append(pool.submit(_safe_text, router, "task", a_msgs[-1]))
        a_replies = [f.result() for f in a_futs]

        # Scoring: judged metrics (rubric, L-J) call the judge role, so it runs on the pool too.
        answers = [agent.clean_answer(reply) if err is None else "" for reply, err in a_replies]
        judge = lambda messages: router.text("judge", messages)  # noqa: E731
        scores = list(pool.map(lambda qa: _score(metric, qa[1], qa[0], judge, fatal), zip(queries, answers)))

    for q, qm, (q_reply, _), am, (a_reply, a_err), r, answer, sc in zip(
            queries, q_msgs, q_replies, a_msgs, a_replies, retrieved, answers, scores):
        qd, text, warns, logs, calls, error = r
        if a_err is not None:
            warns = warns + [f"answer failed: {a_err}"]
        conversation = [qm[-1], {"role": "assistant", "content": q_reply or ""},
                        am[-1], {"role": "assistant", "content": a_reply or ""}]
        cases.append(CaseResult(q.id, q.question, q.answer, answer, sc.value, q.category, qd, text,
                                conversation, warns + sc.warnings, logs, calls, error, sc.details))
    mean = sum(c.score for c in cases) / len(cases) if cases else 0.0
    if fatal is not None:
        mean = 0.0  # a program that crashed its worker does not get partial credit
    per_cat = per_category_means([c.score for c in cases], [c.category for c in cases])
    return EvalResult(mean, cases, writes, per_cat, fatal, time.perf_counter() - t0, sb_time)


def _score(metric, answer: str, item: QueryItem, judge: JudgeFn, fatal: dict | None) -> Score:
    if fatal is not None:   # no judge calls for a program that crashed: its mean is 0 anyway
        return Score(0.0, ["not scored: the program failed in this evaluation"])
    result = metric(answer, item, judge)
    return result if isinstance(result, Score) else Score(float(result))


def _safe_text(router: LLMRouter, role: str, messages: list[dict]) -> tuple[str, str | None]:
    try:
        return router.text(role, messages), None
    except Exception as exc:  # recorded in the case; one failed call never sinks the evaluation
        return "", str(exc)


def _failed(queries: Sequence[QueryItem], verdict: dict, seconds: float) -> EvalResult:
    cases = [CaseResult(q.id, q.question, q.answer, "", 0.0, q.category, {}, "", [],
                        error="program failed to load") for q in queries]
    return EvalResult(0.0, cases, [], {}, verdict, seconds, seconds)

"""What one evaluation produces: per-case and per-write records, and their sum.

Plain dataclasses that serialise to JSON (cases/<id>.<split>.json in the run folder) and back,
so a resumed run can reuse a parent's evaluation (`--rotating reuse`) without running it again.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

from mstar.tasks.metrics import per_category_means
from mstar.tasks.model import case_scored


# An outage needs this many failed calls (or episodes) besides their share (OUTAGE_THRESHOLD): one
# call that failed its retries is luck (at 20% faults and 3 retries, 0.16% of calls), and in a
# small evaluation (the race buys 1-2 items of a racer: 4 calls) one such call passed the share
# and stopped a run whose endpoint worked (tests/test_llm_e2e.py). A real outage fails them all;
# an evaluation too small to show it leaves its cases unscored, and the next one stops the run.
OUTAGE_MIN_FAILED = 3


class EndpointOutage(RuntimeError):
    """Too many of an evaluation's LLM calls failed even after their retries: the endpoint is
    down or broken, and the evaluation says nothing about the program. The run stops, resumable."""


class ScorerOutage(EndpointOutage):
    """The task's own scorer failed on every case an evaluation gave it (its evaluator is down, or
    it cannot score this kind of answer): nothing was scored, and a mean over no case is no score
    -- not 0, and not the program's fault. As an outage of the endpoint, the run stops, resumable
    once the scorer works; an EndpointOutage, so that every caller that stops on one stops on it."""


def check_scored(cases: list["CaseResult"]) -> None:
    """Raise ScorerOutage when the scorer failed on every case it was given, at least
    OUTAGE_MIN_FAILED of them, and so no case was scored (the cases an LLM call lost are the LLM's:
    too many of them are an EndpointOutage). Fewer say little: a race buys one or two items, and a
    scorer that fails on some answers fails on all of those as often as not; they stay errors of
    their cases, counted, and the paired evidence leaves them out."""
    failed = [c.score_error for c in cases if c.score_error is not None]
    if len(failed) >= OUTAGE_MIN_FAILED and not any(c.scored for c in cases):
        lost = len(cases) - len(failed)
        rest = f" (the other {lost} lost an LLM call)" if lost else ""
        raise ScorerOutage(f"the task's scorer failed on all {len(failed)} answers this evaluation gave it{rest}, so no case "
                           f"was scored (no score, not 0); last error: {failed[-1]}")


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
    error: str | None = None           # the program failed on this case (its read raised)
    score_details: dict = field(default_factory=dict)   # e.g. a rubric's per-criterion verdicts
    llm_error: str | None = None       # an LLM call of this case failed after retries: not scored
    judge_calls: int = 0
    waits: dict = field(default_factory=dict)   # requests made (not cache hits) per step: formulate,
                                                # toolkit, answer (act: an interactive game's steps),
                                                # judge -- for critical_chain
    corrupt: bool = False              # an interactive game that cannot be played whatever the memory
                                       # (no admissible command at reset): counted, not scored
    read_cpu_s: float = 0.0            # the worker thread's CPU in read() (waiting on the toolkit not in it)
    attribution: dict | None = None    # where the answer was lost, when the task knows its evidence
                                       # (mstar.evaluation.attribution): label, evidence, recall, precision
    score_error: str | None = None     # the task's own scorer failed on this case: not scored

    @property
    def scored(self) -> bool:
        return case_scored(self)


# The write records the reflector is shown as examples (mstar/loop.py), the first of an evaluation.
# When write() never reads its item only these episodes' items are asked for (mstar.evaluation.ingest).
WRITE_EXAMPLES = 2


@dataclass
class WriteRecord:
    episode_id: str
    raw_text: str
    item: dict
    warnings: list[str] = field(default_factory=list)
    debug_logs: list[str] = field(default_factory=list)
    error: str | None = None
    llm_error: str | None = None       # an LLM call of this episode failed after its retries
    ingest_error: str | None = None    # why the knowledge base lacks what this episode would have put in:
                                       # its extraction failed (not written) or a toolkit call in write() did
    toolkit_calls: int = 0
    waits: dict = field(default_factory=dict)   # requests made per step: extract, toolkit
    seconds: float = 0.0               # the worker's write() (toolkit calls included)
    early: bool = False                # written before its extraction was back (write() never reads
                                       # its item: mstar.evaluation.item_use); `item` came later
    extracted: bool = True             # False: its item was never asked for (an early write past the
                                       # first WRITE_EXAMPLES); `item` is the schema's defaults


@dataclass
class EvalResult:
    mean_score: float                   # over the scored cases (no LLM or scorer error, not a corrupt game)
    cases: list[CaseResult]
    writes: list[WriteRecord]
    per_category: dict[str, float]
    error: dict | None = None           # verdict when the program failed as a whole
    seconds: float = 0.0
    sandbox_seconds: float = 0.0        # time spent waiting on the worker (writes, reads, start)
    case_errors: int = 0                # cases left unscored by an error: an LLM call failed, or the
                                        # task's scorer did (those are counted in score_errors too)
    ingest_errors: int = 0              # episodes whose ingestion an LLM call failed (WriteRecord.ingest_error)
    score_errors: int = 0               # cases left unscored because the task's own scorer failed on them
    corrupt_cases: int = 0              # interactive games left unscored because they are corrupt
    failed_calls: int = 0               # LLM calls that failed after their retries
    calls: int = 0                      # LLM calls this evaluation made (agent and judge)
    reused_kb: bool = False             # the ingested knowledge base was kept from an earlier evaluation
    load_warnings: list[str] = field(default_factory=list)   # "contract: ..." notes (shown to the reflector)
    chain_calls: int = 0                # LLM calls that had to happen one after another (benchmarks'
                                        # critical-path bound: chain_calls x latency)
    write_seconds: float = 0.0          # the writes, one after another in the worker (0 when reused):
                                        # program work on the critical path that the bound counts as 0
    read_cpu_seconds: float = 0.0       # the reads' CPU in the worker, summed: they overlap their waits
                                        # but not one another's Python (one interpreter), so program work too
    xray: dict | None = None            # the cases' attributions summed (mstar.evaluation.xray.summary)
    question_tokens: int = 0            # tokens its questions' calls asked, sent or cached (evaluation/calls.py)
    write_tokens: int = 0               # ... and its writes' calls (extractions, the writes' toolkit calls)
    shared_write_tokens: int = 0        # what those writes asked in the evaluation that built the knowledge
                                        # base this one read (reused_kb): what writing it again would ask

    def critical_chain(self) -> int:
        """The longest run of requests that depend on each other in this evaluation (a call the
        response cache answered costs no wait and does not count): the extraction wave (unless the
        writes went without it) and every toolkit request of the writes (in episode order), then for the slowest case the
        later of that and its query formulation (asked at the start), its read's toolkit
        requests, its answer and its judge requests."""
        ingest = 0
        if not self.reused_kb:
            ingest = max((w.waits.get("extract", 0) for w in self.writes if not w.early), default=0) \
                + sum(w.waits.get("toolkit", 0) for w in self.writes)
        per_case = (max(ingest, c.waits.get("formulate", 0)) + c.waits.get("toolkit", 0) + c.waits.get("answer", 0)
                    + c.waits.get("act", 0) + c.waits.get("judge", 0) for c in self.cases)
        return max(per_case, default=ingest)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "EvalResult":
        """The record of a cases/<id>.<split>.json file (older files lack the newer fields)."""
        def build(kind, d):
            names = {f.name for f in fields(kind)}
            return kind(**{k: v for k, v in d.items() if k in names})
        out = build(cls, {**{k: v for k, v in data.items() if k not in ("cases", "writes")},
                          "cases": [], "writes": []})
        out.cases = [build(CaseResult, c) for c in data.get("cases", [])]
        out.writes = [build(WriteRecord, w) for w in data.get("writes", [])]
        return out


def failed_result(queries, verdict: dict, seconds: float, why: str = "program failed to load") -> EvalResult:
    """The result of an evaluation that failed as a whole (`verdict` says how): every query an
    error with `why`, the mean 0."""
    cases = [CaseResult(q.id, q.question, q.answer, "", 0.0, q.category, {}, "", [], error=why) for q in queries]
    return EvalResult(0.0, cases, [], {}, verdict, seconds, seconds)


def summarise(cases: list[CaseResult], writes: list[WriteRecord], fatal: dict | None, seconds: float,
              sandbox_seconds: float, calls: int, failed_calls: int, reused: bool) -> EvalResult:
    scored = [c for c in cases if c.scored]
    mean = sum(c.score for c in scored) / len(scored) if scored else 0.0
    if fatal is not None:
        mean = 0.0  # a program that crashed its worker does not get partial credit
    per_cat = per_category_means([c.score for c in scored], [c.category for c in scored])
    return EvalResult(mean, cases, writes, per_cat, fatal, seconds, sandbox_seconds,
                      # One count of the unscored cases for every place that shows them (the
                      # lineage's events, the console, summary.json): a scorer's failure is as
                      # much a missing score as an LLM call's.
                      case_errors=sum(1 for c in cases if c.llm_error is not None or c.score_error is not None),
                      ingest_errors=0 if reused else sum(1 for w in writes if w.ingest_error is not None),
                      corrupt_cases=sum(1 for c in cases if c.corrupt and c.llm_error is None),
                      score_errors=sum(1 for c in cases if c.score_error is not None),
                      failed_calls=failed_calls, calls=calls, reused_kb=reused,
                      write_seconds=0.0 if reused else round(sum(w.seconds for w in writes), 3),
                      read_cpu_seconds=round(sum(c.read_cpu_s for c in cases), 3))

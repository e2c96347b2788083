"""Evaluating a memory program (paper Algorithm 1b).

    run.py        evaluate(): ingest the episodes, read and answer each query, score -- waiting
                  on as many LLM calls at once as the roles allow
    ingest.py     the writes, in episode order -- without waiting for extractions a write ignores;
                  an episode whose LLM call failed is an error of that episode (check_ingestion)
    item_use.py   whether a program's write() can read its item (from its source)
    read_state.py whether a program's read() can change its state: then its reads run one at a time
    playing.py    an interactive query (meta["interactive"]): the game played after the read
    records.py    CaseResult, WriteRecord, EvalResult (JSON in the run folder), EndpointOutage,
                  ScorerOutage (the task's scorer failed on every case: nothing scored)
    attribution.py  where a case's answer was lost (never stored / not retrieved / not used): the
                  matcher and its threshold, a pure function of texts
    xray.py       each case's attribution in an evaluation, and the program's sums (recall, precision)
    knowledge_identity.py  which programs build the same knowledge base: a child that changed only
                  the prompts the engine builds, or read() too, reads its parent's, with its own
                  prompts (and its own read(), run in the parent's worker)
    sessions.py   SessionCache: ingested knowledge bases kept alive for the next evaluation; LOAD_INFO,
                  what loading a program told the engine, and load_difference between two loads
    pools.py      the threads every evaluation shares; finished workers closed in the background
    prestart.py   a child's evaluation worker started while its gates run
"""
from mstar.evaluation.records import CaseResult, EndpointOutage, EvalResult, ScorerOutage, WriteRecord
from mstar.evaluation.run import OUTAGE_THRESHOLD, evaluate, sandbox_limits
from mstar.evaluation.sessions import SessionCache, session_key

__all__ = ["CaseResult", "EndpointOutage", "EvalResult", "OUTAGE_THRESHOLD", "ScorerOutage", "SessionCache",
           "WriteRecord", "evaluate", "sandbox_limits", "session_key"]

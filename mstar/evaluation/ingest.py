"""Ingestion: an evaluation's writes, one per episode, in episode order.

A write normally goes to the worker as soon as its extraction (and every write before it) is
back. When the program's write() provably never reads its item (mstar.evaluation.item_use), the
writes go at once, each with a placeholder item (every field at its default): the knowledge base
is the same, built while no extraction is in flight. Only the first WRITE_EXAMPLES episodes'
items are asked for then, filled into their records when they arrive (`settle`): the reflector
is shown those as examples of what the extraction makes (mstar/loop.py); the others' would cost
a request each and change nothing. The rest of the records say `extracted=False`.

Why not ask them all, as the paper's pipeline does: an item no write reads cannot change the
knowledge base, a score or a reflection, yet the 28 other requests competed with the calls the
evaluation waits on. Three seeds ask ~185 calls through the run's 64 in flight (two of them
share these extractions): 30 that only records needed took slots a moment before the
summariser's toolkit calls were asked, pushing 3-5 of those, and their answers, a reply later
(bench/bench_lead.py at 2,000 ms: the seeds' phase ~9 s against a chain of 6 s).

An LLM call that fails after its retries is an error of its episode, never a guess written in
its place: an episode whose extraction failed is not written (writing the schema's defaults and
scoring what the program made of them would score the endpoint, not the program), and one whose
write() met a failed toolkit call is marked too. Both set the record's `ingest_error`; they are
counted beside the score (EvalResult.ingest_errors) and, past the outage threshold, stop the run
as an outage does (mstar.evaluation.run). An early write's extraction is only its record's: it
failing leaves the knowledge base as it is, so it is the record's `llm_error` alone.
"""
from __future__ import annotations

import time
from typing import Callable

from mstar import agent
from mstar.evaluation.records import OUTAGE_MIN_FAILED, EndpointOutage, WriteRecord
from sandbox.engine.session import SandboxError

MAX_RAW_IN_RECORD = 1500  # write examples keep a prefix of the raw text, not all of it


def ingest(program, episodes, extract, info, progress, *, early: bool = False
           ) -> tuple[list[WriteRecord], Callable[[], None]]:
    """Write `episodes` through `program` (run._Program); `extract` holds each episode's
    extraction future (early: the first episodes' only, see the module docstring). Returns the
    records and `settle()`, which waits for the extractions the writes did not wait for (early)
    and records them; it raises what the extraction raised."""
    records: list[WriteRecord] = []
    progress("writes", 0, len(episodes))
    placeholder = agent.fill_fields(None, info.knowledge_item_schema)[0] if early else None
    for i, ep in enumerate(episodes):
        if early:
            rec = WriteRecord(ep.id, ep.text[:MAX_RAW_IN_RECORD], dict(placeholder), [], early=True,
                              extracted=i < len(extract))
        else:
            rec = WriteRecord(ep.id, ep.text[:MAX_RAW_IN_RECORD], {}, [])
            if not _extracted(rec, extract[i].result(), info):
                rec.ingest_error = rec.llm_error + " (the episode was not written)"
        if rec.ingest_error is None:
            _write(program, rec, ep.text)
        records.append(rec)
        progress("writes", len(records), len(episodes))

    def settle() -> None:
        if early:
            for rec, fut in zip(records, extract):   # the first len(extract) records
                _extracted(rec, fut.result(), info)
    return records, settle


def _extracted(rec: WriteRecord, result: tuple[str, str | None, int], info) -> bool:
    """Put one extraction's outcome into its record; False when the call failed after its retries
    (then no item is made up: the record says the call failed, not that the reply was odd)."""
    reply, err, waited = result
    rec.waits["extract"] = waited
    if err:
        rec.llm_error = f"extraction failed after its retries: {err}"
        return False
    obj, warn = agent.parse_json_object(reply)
    rec.item, warns = agent.fill_fields(obj, info.knowledge_item_schema)
    rec.warnings = ([warn] if warn else []) + warns + rec.warnings
    return True


def _write(program, rec: WriteRecord, text: str) -> None:
    if program.fatal is not None:
        return
    failures = program.toolkit.watch(program.calls)
    t_write = time.perf_counter()
    try:
        res = program.op(program.session.write, rec.item, text)
        rec.debug_logs, rec.toolkit_calls = res.logs, res.llm_calls
        rec.waits["toolkit"] = program.toolkit.waited()
    except SandboxError as exc:
        rec.error = str(exc)
    rec.seconds = round(time.perf_counter() - t_write, 4)
    program.toolkit.check()
    if failures:
        rec.llm_error = rec.llm_error or f"toolkit call failed: {failures[-1]}"
        rec.ingest_error = f"a toolkit call in write() failed after its retries: {failures[-1]}"


def check_ingestion(writes, threshold: float) -> None:
    """Episodes whose ingestion an LLM call failed: past `threshold` of them the endpoint is down
    and the evaluation says nothing about the program (EndpointOutage); below it they are counted
    beside the score (EvalResult.ingest_errors)."""
    failed = [w for w in writes if w.ingest_error]
    if len(failed) >= OUTAGE_MIN_FAILED and len(failed) / len(writes) > threshold:
        raise EndpointOutage(f"{len(failed)} of {len(writes)} episodes could not be ingested because an LLM call "
                             f"failed after its retries; last error: {failed[-1].ingest_error}")

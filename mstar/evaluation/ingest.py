"""Ingestion: an evaluation's writes, one per episode, in episode order.

A write normally goes to the worker as soon as its extraction (and every write before it) is
back. When the program's write() provably never reads its item (mstar.evaluation.item_use), the
writes go at once, each with a placeholder item (every field at its default), and the extracted
items are filled into the write records when they arrive (`settle`): the knowledge base is the
same, built while the extractions are still in flight instead of after them.
"""
from __future__ import annotations

import time
from typing import Callable

from mstar import agent
from mstar.evaluation.records import WriteRecord
from sandbox.engine.session import SandboxError

MAX_RAW_IN_RECORD = 1500  # write examples keep a prefix of the raw text, not all of it


def ingest(program, episodes, extract, info, progress, *, early: bool = False
           ) -> tuple[list[WriteRecord], Callable[[], None]]:
    """Write `episodes` through `program` (run._Program); `extract` holds each episode's
    extraction future. Returns the records and `settle()`, which waits for the extractions the
    writes did not wait for (early) and records them; it raises what the extraction raised."""
    records: list[WriteRecord] = []
    progress("writes", 0, len(episodes))
    placeholder = agent.fill_fields(None, info.knowledge_item_schema)[0] if early else None
    for ep, fut in zip(episodes, extract):
        if early:
            rec = WriteRecord(ep.id, ep.text[:MAX_RAW_IN_RECORD], dict(placeholder), [], early=True)
        else:
            rec = WriteRecord(ep.id, ep.text[:MAX_RAW_IN_RECORD], {}, [])
            _extracted(rec, fut.result(), info)
        _write(program, rec, ep.text)
        records.append(rec)
        progress("writes", len(records), len(episodes))

    def settle() -> None:
        if early:
            for rec, fut in zip(records, extract):
                _extracted(rec, fut.result(), info)
    return records, settle


def _extracted(rec: WriteRecord, result: tuple[str, str | None, int], info) -> None:
    """Put one extraction's outcome into its record."""
    reply, err, waited = result
    obj, warn = agent.parse_json_object(reply) if err is None else (None, None)
    rec.item, warns = agent.fill_fields(obj, info.knowledge_item_schema)
    rec.warnings = ([warn] if warn else []) + warns + rec.warnings
    if err:
        rec.llm_error = f"task agent failed: {err}"
    rec.waits["extract"] = waited


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

"""Replaying a namespace's writes into a fresh worker: at open, and for every forget
(mstar.memory.namespace builds the worker; the toolkit LLM answers from the tape, mstar.memory.tape).

  at open     every logged write, each toolkit call answered from its record, in order: no LLM is
              called. A write() that now raises where it did not (or the reverse) leaves the
              namespace read-only; one that takes the worker down leaves it unusable; both named.
              A call sent with another prompt than recorded is only warned about (a program that
              is not deterministic): the log is the memory.
  for a forget  the kept writes, re-recorded: a toolkit call the program sends as recorded gets
              its recorded reply; one whose prompt changed -- the forgotten entries are gone from
              the program's state, and the prompt was built from that state -- is asked of the live
              toolkit LLM. The kept records come back with this replay's exchanges and write()
              errors, and those are what the compacted log holds: no reply written from a
              forgotten text is served or kept, and a restart replays exactly the rebuilt worker.
              A live call that fails, or a write() that takes the worker down, refuses the forget
              (`ForgetRefused`) before anything is changed.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from mstar.memory.log import LogRecord
from mstar.memory.sandboxed import Ingested, MemoryProgramError, SandboxedProgram
from mstar.memory.store import StoreError
from mstar.memory.tape import ToolkitTape


class ForgetRefused(StoreError):
    """The kept entries could not be rebuilt without the forgotten ones: nothing was changed."""


def one_line(text: object, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def replay(memory: SandboxedProgram, records: list[LogRecord], tape: ToolkitTape, *, name: str,
           note: Callable[[str], None]) -> tuple[int, str, str]:
    """Replay a log at open; returns (writes replayed, why read-only, why unusable)."""
    diverged: list[str] = []
    replayed = 0
    for number, rec in enumerate(records, 1):
        out = Ingested(dict(rec.item))
        with tape.serving(rec.toolkit) as served:
            try:
                memory.write_extracted(out, rec.text)
            except MemoryProgramError as exc:
                # Not `broken`: reopening would replay into the same failure at every request.
                dead = (f"replaying write {number} of {len(records)} took the program's "
                        f"worker down: {one_line(out.error or exc)}")
                note(f"namespace {name!r} cannot be used: {dead}")
                return replayed, dead, dead
        replayed += 1
        if bool(out.error) != bool(rec.error):
            was = f"raised ({one_line(rec.error or '', 120)})" if rec.error else "succeeded"
            now = f"raises ({one_line(out.error or '', 120)})" if out.error else "succeeds"
            read_only = f"replaying write {number}: write() {now} where it {was} when remembered"
            note(f"namespace {name!r} is read-only: {read_only}")
            return replayed, read_only, ""
        if served.diverged:
            diverged.append(f"write {number}: {served.diverged}")
    if diverged:
        note(f"namespace {name!r}: {len(diverged)} replayed write(s) asked the toolkit LLM something "
             f"other than recorded (the program is not deterministic?); first: {diverged[0]}")
    return replayed, "", ""


def rebuild(memory: SandboxedProgram, kept: list[LogRecord], tape: ToolkitTape, *, name: str) -> list[LogRecord]:
    """Replay a forget's kept records, re-recording them; returns them as rebuilt (a record whose
    exchanges and error did not change is the same record: its log line keeps its bytes).
    ForgetRefused when they cannot all be rebuilt."""
    rebuilt: list[LogRecord] = []
    for rec in kept:
        out = Ingested(dict(rec.item))
        with tape.rerecording(rec.toolkit) as again:
            try:
                memory.write_extracted(out, rec.text)
            except MemoryProgramError as exc:
                raise ForgetRefused(
                    f"namespace {name!r}: forget refused: replaying the kept entry {rec.entry_id!r} took the "
                    f"program's worker down ({one_line(out.error or exc, 200)}); nothing was forgotten, the store "
                    "is unchanged (forget that entry too, or the namespace whole)") from None
        if again.failed:
            # The program may have caught the failure and gone on; its state would then not be what
            # a store that never saw the forgotten entries holds, so nothing is changed.
            raise ForgetRefused(
                f"namespace {name!r}: forget refused: without the forgotten entries, write() of the kept entry "
                f"{rec.entry_id!r} asks the toolkit LLM something new and the toolkit LLM failed "
                f"({one_line(again.failed, 200)}); nothing was forgotten, the store is unchanged")
        if again.made != rec.toolkit or out.error != rec.error:
            # The old error text goes too: it may quote a reply (or state) built from a forgotten text.
            rec = dataclasses.replace(rec, toolkit=again.made, error=out.error)
        rebuilt.append(rec)
    return rebuilt

"""Setting damaged lines of a run's JSON-lines files aside, so the run can be read and resumed.

A crash leaves at most a partial *last* line (mstar/run/store.py), which the readers skip and
`mstar resume` drops. A bad line in the middle -- a flipped byte, a disk error, a hand edit --
is damage: every reader refuses the file and names the line. `mstar repair RUN` is the way on.

What it does, per file (lineage.jsonl, llm_usage.jsonl, resumes.jsonl):
- a line is damaged when it is not a JSON object, or (lineage.jsonl) not an event this version
  reads (mstar.run.events.from_dict refuses it); an unterminated last line is a torn write,
  left to the readers as always;
- the damaged lines are appended, byte for byte, to `<file>.set-aside` beside it, each after a
  `#` line naming its line number, the time and the problem. That file is only ever appended to:
  nothing set aside is deleted, and a line can be put back by hand;
- then the file is replaced (atomically) by its other lines, in order.
The side file is written and fsync'd before the file is replaced, so a crash in between loses
nothing (the damaged line is then in both).

What that loses is said before anything is changed (and with --dry-run only said): a lineage
event's program is no longer in the pool, so `mstar resume` does that iteration (or seed
evaluation, confirmation, final test) again -- read as far as the damaged text allows (its
"event", "iteration" and "program_id"); later events that name it as their parent keep the name,
and its source in programs/ is kept. A usage record's call is missing from the spend totals.
"""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from mstar.run import events as ev_types

FILES = ("lineage.jsonl", "llm_usage.jsonl", "resumes.jsonl")
SIDE_SUFFIX = ".set-aside"

# What can still be read of a damaged lineage line: a field's string or integer value, by its key
# (the kind of event is stored under "kind").
_FIELD = {("kind" if key == ev_types.KIND_KEY else key): re.compile(rf'"{key}"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)')
          for key in (ev_types.KIND_KEY, "iteration", "program_id", "parent_id")}


@dataclass
class Damaged:
    file: str
    line: int             # 1-based
    raw: bytes            # the line as it was, without its newline
    problem: str
    guess: dict = field(default_factory=dict)   # what could still be read of it (lineage lines): kind, ...

    def loss(self, finished: bool = False) -> str:
        """What setting this line aside loses, in a sentence; `finished`: the run's final test is
        recorded (then nothing is done again: the lineage just no longer shows the step)."""
        if self.file == "llm_usage.jsonl":
            return "one LLM call's record: its tokens and cost are missing from the spend totals"
        if self.file == "resumes.jsonl":
            return "one entry of the run's resume history (nothing the run needs)"
        kind, it, pid = self.guess.get("kind"), self.guess.get("iteration"), self.guess.get("program_id")
        if finished:
            what = f"iteration {it}" if kind == "iteration" and isinstance(it, int) else \
                f"seed {pid}" if kind == "seed" and pid else f"the {kind} step" if kind else "an unreadable event"
            return (f"{what}'s record: the run has finished, so nothing is done again; the lineage, `mstar show` "
                    "and the report no longer show it")
        if kind == "iteration" and isinstance(it, int):
            child = f", and its child {pid} leaves the pool" if pid else ""
            return f"iteration {it}'s record{child}: `mstar resume` does iteration {it} again"
        if kind == "seed":
            return f"seed {pid or '?'}'s evaluation: `mstar resume` evaluates it again"
        if kind in ("confirmation", "test"):
            return f"the {kind} step's record: `mstar resume` does it again"
        if kind == "stopped":
            return "a note of why the run stopped once (nothing the run needs)"
        return ("an event that cannot be read at all: if it was an iteration, `mstar resume` does that iteration "
                "again (iterations without an event are redone)")


def _guess(raw: bytes) -> dict:
    text = raw.decode("utf-8", "replace")
    out = {}
    for name, pattern in _FIELD.items():
        m = pattern.search(text)
        if m:
            try:
                out[name] = json.loads(m.group(1))
            except ValueError:
                pass
    return out


def _problem(file: str, raw: bytes) -> str | None:
    """Why a complete line is damaged, or None when it is sound."""
    try:
        rec = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return f"not UTF-8 ({exc.reason} at byte {exc.start})"
    except json.JSONDecodeError as exc:
        return f"not a JSON line ({exc.msg})"
    if not isinstance(rec, dict):
        return "not a JSON object"
    if file == "lineage.jsonl":
        try:
            ev_types.from_dict(rec)
        except (ValueError, TypeError) as exc:
            return f"not a lineage event ({exc})"
    return None


def find_damaged(root: Path, file: str) -> list[Damaged]:
    """The damaged complete lines of one file (none when it is missing)."""
    path = root / file
    if not path.is_file():
        return []
    lines = path.read_bytes().split(b"\n")
    out = []
    for n, raw in enumerate(lines[:-1], 1):     # lines[-1]: after the last newline (a torn write, or b"")
        if not raw.strip():
            continue
        problem = _problem(file, raw)
        if problem is not None:
            out.append(Damaged(file, n, raw, problem, _guess(raw) if file == "lineage.jsonl" else {}))
    return out


def finished(root: Path, damaged: list[Damaged]) -> bool:
    """Does a sound line of lineage.jsonl record the final test?"""
    path, bad = root / "lineage.jsonl", {d.line for d in damaged if d.file == "lineage.jsonl"}
    if not path.is_file():
        return False
    for n, raw in enumerate(path.read_bytes().split(b"\n")[:-1], 1):
        if n not in bad and raw.strip() and json.loads(raw).get(ev_types.KIND_KEY) == ev_types.TestEvent.KIND:
            return True
    return False


def orphans(root: Path, damaged: list[Damaged], finished: bool = False) -> list[str]:
    """Later lineage events that name a set-aside program as their parent (they keep the name)."""
    lost = {d.guess["program_id"]: d.line for d in damaged
            if d.file == "lineage.jsonl" and isinstance(d.guess.get("program_id"), str)}
    if not lost:
        return []
    bad = {d.line for d in damaged if d.file == "lineage.jsonl"}
    out = []
    for n, raw in enumerate((root / "lineage.jsonl").read_bytes().split(b"\n")[:-1], 1):
        if n in bad or not raw.strip():
            continue
        rec = json.loads(raw)
        parent = rec.get("parent_id")
        if parent in lost and n > lost[parent]:
            until = "" if finished else " until `mstar resume` writes the redone iteration's child there"
            out.append(f"iteration {rec.get('iteration')} names {parent} as its parent, whose source is "
                       f"programs/{parent}.py{until}")
    return out


def set_aside(root: Path, file: str, damaged: list[Damaged]) -> Path:
    """Append the damaged lines to the side file (fsync'd), then replace the file by the rest.
    Returns the side file."""
    path, side = root / file, root / (file + SIDE_SUFFIX)
    data = path.read_bytes()
    lines = data.split(b"\n")
    bad = {d.line for d in damaged}
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    block = b"".join(f"# line {d.line} of {file}, set aside by mstar repair at {stamp}: {d.problem}\n".encode()
                     + d.raw + b"\n" for d in damaged)
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(block)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    kept = b"\n".join(raw for n, raw in enumerate(lines, 1) if n not in bad)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(kept)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return side

"""The run folder: everything needed to inspect a run and export its best program.

Layout of runs/<name>/:
  config.json          resolved configuration (no secrets)
  split.json           static / rotating / training indices
  programs/<id>.py     every program's source (children also when they failed a gate)
  lineage.jsonl        one event per line (seed evaluations, iterations, final test)
  cases/<id>.<split>.json   per-case results (full trajectories)
  llm_usage.jsonl      one record per LLM call
  best_program.py      the best program by static score
  summary.json         final scores
  resumes.jsonl        one line per `mstar resume` of this run
  .lock                held (flock) by the process that runs it; released when it exits or dies
Writes are atomic (temp file + rename) and each JSON line goes to the file in one
write call as soon as it exists, so a crash (even SIGKILL) leaves at most a
partial *last* line, which the readers below detect and `mstar resume` drops.
A write that fails (disk full, read-only) removes its temp file; a process killed in
the middle of one leaves `.<name>.tmp<pid>`, which `sweep_temp` removes (resume does).
Every JSON written is strict JSON: a float that is not finite is written as null.

config.json and summary.json carry `format_version`; readers refuse folders from
a version they do not know with a message that says so (RunFormatError).
"""
from __future__ import annotations

import fcntl
import json
import math
import os
import re
import threading
from pathlib import Path
from typing import Any

# Bump when the layout or a record changes in a way older readers would misread.
FORMAT_VERSION = 1

# The run locks this process holds. An flock belongs to the open file, which a fork shares: a
# child forked by os.fork (a multiprocessing pool's worker, say) would hold the run's lock for
# its whole life and keep the folder "in use" after this process let it go. Each child closes
# them at once. (subprocess's children close them at exec: the descriptor is close-on-exec.)
_HELD_LOCKS: set[int] = set()


def _drop_held_locks_in_child() -> None:
    for fd in _HELD_LOCKS:
        try:
            os.close(fd)
        except OSError:
            pass
    _HELD_LOCKS.clear()


os.register_at_fork(after_in_child=_drop_held_locks_in_child)


class RunFormatError(ValueError):
    """A run folder that cannot be read: missing, damaged, or written by another format version.
    The message names the file and the problem."""


def repair_hint(root: Path) -> str:
    """The way on from a damaged line in the middle of a run's JSON-lines file (mstar/run/repair.py)."""
    return f"`mstar repair {root}` sets damaged lines aside (kept in a side file) and says what that loses"


class RunLockedError(RuntimeError):
    """Another live process holds the run folder."""


TEMP_NAME = re.compile(r"^\..+\.tmp(\d+)$")


def atomic_write_text(path: Path, text: str, mode: int | None = None) -> None:
    """Write `text` whole or not at all (a temporary file beside it, renamed); with `mode`, the
    file has exactly that mode from the start (a memory store's export: 0600, it holds every text)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666 if mode is None else mode)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            if mode is not None:
                os.fchmod(fh.fileno(), mode)   # a leftover of an earlier try keeps its own mode otherwise
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:  # disk full, read-only, an interrupt: no temp file is left behind
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def json_safe(value: Any) -> Any:
    """`value` with every float that is not finite (NaN, inf) replaced by None: JSON has no NaN,
    and most readers refuse the `NaN` Python would write."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def dumps(value: Any, **kwargs) -> str:
    """Strict JSON (see json_safe); the one way the run folder and the commands write JSON."""
    return json.dumps(json_safe(value), allow_nan=False, **{"default": str, **kwargs})


class RunStore:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._lock = threading.Lock()
        self._lock_fd: int | None = None
        self._lock_pid = 0

    def check_new(self) -> None:
        """FileExistsError when the folder cannot be a new run's: it exists and holds anything, or
        it -- or a folder above it -- is a file (`out="results.json"`, a typo: the folder
        cannot be made, and Python's own NotADirectoryError would come after the checks).
        Checked again by create."""
        for path in (self.root, *self.root.parents):
            if path.is_dir():
                break
            if path.exists() or path.is_symlink():   # a file, or a link that leads nowhere
                where = "is" if path == self.root else f"would be inside {path}, which is"
                raise FileExistsError(f"run folder {self.root} {where} a file, not a folder; "
                                      "choose another --out (or --name)")
        if self.root.is_dir() and any(self.root.iterdir()):
            raise FileExistsError(f"run folder {self.root} already exists and is not empty; "
                                  "choose another --name or remove it")

    def create(self) -> None:
        self.check_new()
        (self.root / "programs").mkdir(parents=True, exist_ok=True)
        (self.root / "cases").mkdir(parents=True, exist_ok=True)

    def write_json(self, rel: str, data: Any) -> None:
        atomic_write_text(self.root / rel, dumps(data, indent=2, ensure_ascii=False) + "\n")

    def write_text(self, rel: str, text: str) -> None:
        atomic_write_text(self.root / rel, text)

    def write_config(self, config: dict) -> None:
        self.write_json("config.json", {"format_version": FORMAT_VERSION, **config})

    def append_jsonl(self, rel: str, record: dict) -> None:
        data = (dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:
            # One write(2) on an O_APPEND descriptor: a kill lands before or after the line,
            # or (for very large lines, rarely) inside it -- never between two lines.
            fd = os.open(self.root / rel, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)

    def sweep_temp(self, pid: int | None = None) -> list[Path]:
        """Remove temp files of atomic writes left by a process that died mid-write (all of them,
        or only those of `pid`); the caller holds the folder. Returns what was removed."""
        removed = []
        if not self.root.is_dir():
            return removed
        for path in self.root.rglob(".*.tmp*"):
            m = TEMP_NAME.match(path.name)
            if m and (pid is None or int(m.group(1)) == pid) and path.is_file():
                try:
                    path.unlink()
                    removed.append(path)
                except OSError:
                    pass
        return removed

    @staticmethod
    def program_rel(program_id: str) -> str:
        """Where a program's source lives in the run folder (the one place this path is built)."""
        return f"programs/{program_id}.py"

    @staticmethod
    def cases_rel(program_id: str, split: str) -> str:
        return f"cases/{program_id}.{split}.json"

    def inside(self, rel: str, named: str) -> Path:
        """`rel` under the run folder, refused (RunFormatError) when it would lead out of it.
        Program ids and splits come from the folder's own lineage, which may have been received
        from elsewhere: an id like `../../../private/secret` must not read (or write) a file
        outside the run. Resolved, so a symlink planted in programs/ or cases/ is caught too."""
        path = self.root / rel
        if "\0" in rel or not path.resolve().is_relative_to(self.root.resolve()):
            raise RunFormatError(f"{self.root / 'lineage.jsonl'}: {named} leads outside the run folder; "
                                 "nothing was read from there (the lineage is damaged or was crafted)")
        return path

    def write_program(self, program_id: str, source: str) -> None:
        self.inside(self.program_rel(program_id), f"program id {program_id!r}")
        self.write_text(self.program_rel(program_id), source)

    def read_program(self, program_id: str) -> str | None:
        """The program's source, or None when the run folder has none under that id."""
        path = self.inside(self.program_rel(program_id), f"program id {program_id!r}")
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def write_cases(self, program_id: str, split: str, data: dict) -> None:
        self.inside(self.cases_rel(program_id, split), f"program id {program_id!r} (split {split!r})")
        self.write_json(self.cases_rel(program_id, split), data)

    def read_cases(self, program_id: str, split: str) -> dict | None:
        path = self.inside(self.cases_rel(program_id, split), f"program id {program_id!r} (split {split!r})")
        return self.read_json(self.cases_rel(program_id, split)) if path.is_file() else None

    def read_jsonl(self, rel: str) -> list[dict]:
        """Every record; any line that is not JSON is an error naming file and line."""
        records, partial = self.read_jsonl_tolerant(rel)
        if partial is not None:
            raise RunFormatError(partial)
        return records

    def read_jsonl_tolerant(self, rel: str) -> tuple[list[dict], str | None]:
        """Records, plus a message when the last line is a partial write (that line is left
        out). A bad line anywhere else means the file is damaged: RunFormatError."""
        path = self.root / rel
        if not path.exists():
            return [], None
        text = path.read_text(encoding="utf-8", errors="replace")
        lines = text.split("\n")
        out, partial = [], None
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
                if not isinstance(rec, dict):
                    raise json.JSONDecodeError("not a JSON object", line, 0)
                out.append(rec)
            except json.JSONDecodeError as exc:
                if n == len(lines):  # no newline after it: the process died while writing it
                    partial = (f"{path}:{n}: the last line is a partial write "
                               f"({len(line)} characters, {exc.msg}); it was left out")
                else:
                    raise RunFormatError(f"{path}:{n}: not a JSON line ({exc.msg}); the file is damaged -- "
                                         + repair_hint(self.root)) from None
        return out, partial

    def drop_partial_tail(self, rel: str) -> str | None:
        """Cut a partial last line (see read_jsonl_tolerant) so the next append starts a fresh
        line; also ends a complete last line that lacks its newline. Returns the warning."""
        path = self.root / rel
        if not path.exists():
            return None
        _, partial = self.read_jsonl_tolerant(rel)
        data = path.read_bytes()
        if data.endswith(b"\n") or not data:
            return partial
        cut = data.rfind(b"\n") + 1 if partial is not None else len(data)
        with open(path, "r+b") as fh:
            fh.truncate(cut)
            if partial is None:
                fh.seek(cut)
                fh.write(b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        return partial

    def read_json(self, rel: str) -> Any:
        path = self.root / rel
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RunFormatError(f"{path} is missing") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RunFormatError(f"{path}: not valid JSON ({exc}); the file is damaged") from None

    def read_config(self) -> tuple[int, dict]:
        """(format version, configuration) of the run; version 0 means a folder written before
        versions were recorded."""
        if not (self.root / "config.json").exists():
            what = "does not exist" if not self.root.exists() else "has no config.json"
            raise RunFormatError(f"{self.root} {what}: not an mstar run folder")
        data = self.read_json("config.json")
        if not isinstance(data, dict):
            raise RunFormatError(f"{self.root / 'config.json'}: expected a JSON object")
        data = dict(data)
        version = data.pop("format_version", 0)
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise RunFormatError(f"{self.root}: run format {version!r} is newer than this mstar reads "
                                 f"(format {FORMAT_VERSION}); upgrade mstar to open it")
        return version, data

    # ------------------------------------------------------------ who runs it
    def acquire_lock(self) -> None:
        """Mark the folder as in use by this process. The kernel drops an flock when its holder
        exits or is killed, so a crashed run never looks like a running one."""
        fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise RunLockedError(f"run {self.root} is in use by another mstar process (pid {holder}); "
                                 "wait for it to finish or stop it first") from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._lock_fd, self._lock_pid = fd, os.getpid()
        _HELD_LOCKS.add(fd)

    def release_lock(self) -> None:
        if self._lock_fd is not None:
            if os.getpid() == self._lock_pid:   # in a forked child the descriptor is closed already
                _HELD_LOCKS.discard(self._lock_fd)
                os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None

    def is_locked(self) -> bool:
        """True while some live process (this one included) holds the folder."""
        path = self.root / ".lock"
        if self._lock_fd is not None:
            return True
        if not path.exists():
            return False
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False


def find_run(ref: str | Path, runs_dir: str | Path = "runs") -> Path:
    """A run folder given as a path, or as a name under `runs_dir`."""
    path = Path(ref)
    if path.is_dir():
        return path
    under = Path(runs_dir) / str(ref)
    if under.is_dir():
        return under
    places = list(dict.fromkeys((path, under)))     # an absolute path is both: name it once
    files = [p for p in places if p.exists()]
    if files:
        raise RunFormatError(f"{files[0]} is a file, not a run folder: give the run's folder")
    if len(places) == 1:
        raise RunFormatError(f"no run folder at {path}")
    raise RunFormatError(f"no run folder {str(ref)!r}: neither {path} nor {under} exists")

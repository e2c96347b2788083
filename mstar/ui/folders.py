"""The runs under --runs-dir, as the UI sees them: names, folders, cached views, change stamps.

A run is named by its folder's name, and only a direct child of the runs folder that holds a
config.json is one: a name from a URL is looked up in that listing, never joined onto a path
as it comes, so `..` or `a/b` can reach nothing. Each run's RunView is rebuilt only when
lineage.jsonl, summary.json or config.json changed (size or modification time), so a page that
polls a 1,000-iteration run does not re-read its lineage on every request; llm_usage.jsonl is
read incrementally (usage.UsageTail). Nothing here opens a file for writing.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from mstar.run.store import RunFormatError, RunStore
from mstar.run.views import LineageNode, RunView, lineage_nodes
from mstar.ui.usage import UsageTail

WATCHED = ("lineage.jsonl", "summary.json", "config.json")   # what a RunView is built from


class RunNotFound(LookupError):
    """No run of that name under the runs folder (the message says which name)."""


class RunUnreadable(RuntimeError):
    """The folder is a run but cannot be read (damaged, newer format): the reader's message."""


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return st.st_size, st.st_mtime_ns


def proc_locks() -> str | None:
    """The kernel's table of file locks (Linux), or None where there is none to read."""
    try:
        return Path("/proc/locks").read_text()
    except OSError:
        return None


def lock_held(root: Path, table: str | None = None) -> bool:
    """Is a live process running this run (holding the flock on its .lock)? Read from /proc/locks,
    which takes no lock: RunStore.is_locked probes by taking a shared flock for a moment, and a
    page that asks every quarter second could make `mstar resume` find the folder "in use" in
    that moment. Elsewhere than Linux, that probe it is."""
    try:
        inode = (root / ".lock").stat().st_ino
    except (FileNotFoundError, NotADirectoryError):
        return False
    table = table if table is not None else proc_locks()
    if table is None:
        return RunStore(root).is_locked()
    for line in table.splitlines():    # "1: FLOCK  ADVISORY  WRITE 6714 fe:00:2263084 0 EOF"
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5].rsplit(":", 1)[-1] == str(inode):
            return True
    return False


class SnapshotView(RunView):
    """A RunView read once and asked many times: its events do not change (a new one is built
    when the files do), so what is derived from them alone is computed once. The best program
    is found in one pass (RunView.best_id's rule: highest static score, earliest on ties; the
    summary's once finished), which a 1,000-iteration page asks for on every request. Liveness
    stays a live question, answered without a flock (lock_held)."""

    def __init__(self, root):
        super().__init__(root)
        self.store.is_locked = lambda: lock_held(self.root)

    @cached_property
    def best_id(self) -> str | None:
        if self.summary and self.summary.get("best_id"):
            return self.summary["best_id"]
        best = None
        for n in lineage_nodes(self.events):
            if n.program_id and n.static_score is not None and (best is None or n.static_score > best.static_score):
                best = n
        return best.program_id if best else None

    @cached_property
    def _nodes(self) -> list[LineageNode]:
        return lineage_nodes(self.events, self.best_id)

    def nodes(self) -> list[LineageNode]:
        return list(self._nodes)

    def node(self, program_id: str) -> LineageNode | None:
        return self._by_id.get(program_id)

    @cached_property
    def _by_id(self) -> dict[str, LineageNode]:
        return {n.program_id: n for n in self._nodes if n.program_id}


@dataclass
class _Entry:
    root: Path
    usage: UsageTail
    stamp: tuple | None = None
    view: SnapshotView | None = None
    problem: str | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class RunFolders:
    def __init__(self, runs_dir: str | Path):
        self.base = Path(runs_dir)
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        """Every run under the runs folder, by name."""
        try:
            children = list(os.scandir(self.base))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(e.name for e in children if e.is_dir() and os.path.isfile(os.path.join(e.path, "config.json")))

    def _entry(self, name: str) -> _Entry:
        if not name or "/" in name or "\\" in name or "\0" in name or name in (".", "..") \
                or not (self.base / name / "config.json").is_file():
            raise RunNotFound(f"no run named {name!r} under {self.base}")
        with self._lock:
            entry = self._entries.get(name)
            if entry is None:
                root = self.base / name
                entry = self._entries[name] = _Entry(root, UsageTail(root / "llm_usage.jsonl"))
            return entry

    def folder(self, name: str) -> Path:
        return self._entry(name).root

    def view(self, name: str) -> SnapshotView:
        """The run's view, rebuilt when its lineage, summary or config changed. RunUnreadable
        when the folder cannot be read."""
        entry = self._entry(name)
        with entry.lock:
            stamp = tuple(_stat(entry.root / f) for f in WATCHED)
            if stamp != entry.stamp:
                try:
                    entry.view, entry.problem = SnapshotView(entry.root), None
                except (RunFormatError, OSError, KeyError, TypeError, ValueError) as exc:
                    entry.view, entry.problem = None, str(exc)
                entry.stamp = stamp
            if entry.view is None:
                raise RunUnreadable(entry.problem or f"{entry.root}: cannot be read")
            return entry.view

    def usage(self, name: str) -> UsageTail:
        return self._entry(name).usage.refresh()

    def last_event_at(self, name: str) -> float | None:
        """When the lineage last changed (its file's modification time): events carry no clock."""
        st = _stat(self._entry(name).root / "lineage.jsonl")
        return st[1] / 1e9 if st else None

    def stamp(self, name: str, locks: str | None = None) -> dict:
        """What the live stream compares: `lineage` changes when an event, the summary, the
        config or the run's lock (running or not) changed; `usage` when an LLM call was recorded."""
        entry = self._entry(name)
        lineage = tuple(_stat(entry.root / f) for f in WATCHED)
        locked = lock_held(entry.root, locks)
        return {"lineage": repr((lineage, locked)), "usage": repr(_stat(entry.root / "llm_usage.jsonl"))}

    def runs_stamp(self) -> dict:
        """The runs list's stamp: the names, each run's lineage and lock, and its usage file."""
        names = self.names()
        parts, locks = {}, proc_locks()              # one read of the lock table for every run
        for n in names:
            try:
                parts[n] = self.stamp(n, locks)
            except RunNotFound:       # removed between the listing and the look
                continue
        return {"lineage": repr((names, [p["lineage"] for p in parts.values()])),
                "usage": repr([p["usage"] for p in parts.values()])}

"""The memory a process tree holds: summed PSS, sampled in a thread, its peak kept (issue 43).

PSS (proportional set size) counts each page a process maps divided by the number of processes
that map it, so the PSS of a tree's processes adds up to what the tree costs the machine: a page
the fork server shares with its forked workers is counted once over all of them, not once each.
The kernel sums it per process in /proc/<pid>/smaps_rollup.

A process is put in a kind by its place in the tree, not its command line (a forked worker
carries its fork server's): the root is the engine; a child of the engine running
sandbox.worker.forkserver is the fork server, and what it forks are workers (each worker's pid
namespace has an init, `cat`, beside it -- and, in code before 2e0e836, a keeper process above
it -- counted with the workers); a child of the engine
started as sandbox.worker.main is a worker too (no fork server); anything else is "other".

    with TreeMemory(pid) as mem:      # sampled every `every` seconds until the block ends
        ...
    mem.peak_total, mem.peak_by_kind   # MB at the sample whose total was largest; per kind, each its own peak
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

KINDS = ("engine", "forkserver", "worker", "other")


def children_of() -> dict[int, list[int]]:
    """Every process's children, by parent pid (one pass over /proc)."""
    out: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:   # gone meanwhile
            continue
        # The command name (field 2) is in parentheses and may hold spaces: the ppid follows its ")".
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def pss_kb(pid: int) -> int | None:
    """The process's PSS in kB (None: gone, or its memory map not readable by us)."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def tree_kinds(root: int) -> dict[int, str]:
    """Every live process of the tree under `root` (itself included), with its kind."""
    kids = children_of()
    kinds = {root: "engine"}
    todo = [(root, "engine")]
    while todo:
        pid, kind = todo.pop()
        for child in kids.get(pid, []):
            if kind == "engine":
                cmd = _cmdline(child)
                k = ("forkserver" if "sandbox.worker.forkserver" in cmd
                     else "worker" if "sandbox.worker.main" in cmd else "other")
            else:
                k = "worker" if kind in ("forkserver", "worker") else kind
            kinds[child] = k
            todo.append((child, k))
    return kinds


def sample(root: int) -> tuple[dict[str, float], dict[str, int]]:
    """One sample: MB and process count per kind (unreadable processes are counted, at 0 MB)."""
    mb = dict.fromkeys(KINDS, 0.0)
    count = dict.fromkeys(KINDS, 0)
    for pid, kind in tree_kinds(root).items():
        kb = pss_kb(pid)
        count[kind] += 1
        mb[kind] += (kb or 0) / 1024
    return mb, count


class TreeMemory:
    """Samples the tree under `pid` in a thread until the `with` block ends; keeps the peaks."""

    def __init__(self, pid: int, every: float = 0.1) -> None:
        self.pid, self.every = pid, every
        self.peak_total = 0.0
        self.at_peak: dict[str, float] = dict.fromkeys(KINDS, 0.0)     # the kinds at the total's peak
        self.count_at_peak: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.peak_by_kind: dict[str, float] = dict.fromkeys(KINDS, 0.0)
        self.peak_count: dict[str, int] = dict.fromkeys(KINDS, 0)
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-memory", daemon=True)

    def __enter__(self) -> "TreeMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def take(self) -> None:
        mb, count = sample(self.pid)
        self.samples += 1
        total = sum(mb.values())
        if total > self.peak_total:
            self.peak_total, self.at_peak, self.count_at_peak = total, mb, count
        for k in KINDS:
            self.peak_by_kind[k] = max(self.peak_by_kind[k], mb[k])
            self.peak_count[k] = max(self.peak_count[k], count[k])

    def _run(self) -> None:
        while True:
            try:
                self.take()
            except OSError:   # the root is gone: nothing more to see
                pass
            if self._stop.wait(self.every):
                return

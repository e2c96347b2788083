"""The fork server's part of a forked worker's jail (docs/sandbox.md, L6): its pid namespace and cgroup.

A worker started as a fresh interpreter splits itself (sandbox.jail.pidns): a keeper stays outside
the new pid namespace as the parent of its init and of the worker, and moves the three into a
cgroup. A forked worker needs no keeper. The fork server is already the parent that reaps it and
reports its exit status, so the server makes the namespace just before the fork and holds init's
lifeline itself. What that saves is the keeper: a Python process whose copy-on-write pages came to
~2.5 MB of its own for each live worker (measured in a run: 5.8 MB of PSS each, 9 at the peak).

Per fork, in the server (single-threaded, so its namespace switches race with nothing):

  before  unshare(CLONE_NEWPID) and init (cat, on a lifeline pipe) as pid 1 of the new space
  fork    the worker is pid 2 there; its parent, the server, is outside (getppid() reads 0)
  after   setns back to the server's own pid namespace for its next children; the cgroup
          w<worker pid> made and worker and init moved in (pids as the server sees them); one
          report line to the worker, which reads it before any program code runs
  reaped  the server closes the lifeline: init reads EOF, and the kernel ends the namespace
          (had anything been left in it, it would be SIGKILLed)

The worker is told by two arguments only the server adds (`--pid-namespace-made`,
`--jail-report-fd`). Where the server cannot make a namespace (no CAP_SYS_ADMIN, no cat), it
forks as before and the worker tries its own split, which reports why it could not.
"""
from __future__ import annotations

import argparse
import ctypes
import functools
import json
import os
from dataclasses import dataclass

from sandbox.jail import cgroups, pidns
from sandbox.jail.limits import LayerUnavailable, _libc

CLONE_NEWPID = pidns.CLONE_NEWPID


@dataclass
class Plan:
    """One fork's namespace, made before the fork."""

    init: int
    lifeline: int  # the write end; the server's only
    memory_mb: int | None  # None: the engine asked for no cgroup
    report_r: int | None = None  # the worker's end of its report pipe
    report_w: int | None = None


class ForkJail:
    def __init__(self) -> None:
        try:
            self.own_ns: int | None = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.own_ns = None  # no way back after an unshare: leave the split to each worker
        self.lifelines: dict[int, tuple[int, int]] = {}  # worker pid -> (init pid, lifeline)

    def prepare(self, args: list[str]) -> Plan | None:
        """Before the fork: the namespace the next child is born in, or None when the worker
        should be forked as it is (the engine asked for no namespace, or the kernel refuses)."""
        wish = _wishes(args)
        if wish is None or not wish[0] or self.own_ns is None:
            return None
        memory_mb = wish[1]
        try:
            init, lifeline = pidns.new_namespace_with_init()
        except pidns.InitFailed:
            self._back_home()  # unshare worked: the next children would be born there
            return None
        except LayerUnavailable:
            return None  # unshare refused (not root): nothing to undo, and setns would be refused too
        plan = Plan(init, lifeline, memory_mb)
        if memory_mb is not None:
            plan.report_r, plan.report_w = os.pipe2(os.O_CLOEXEC)
        return plan

    def child_args(self, plan: Plan, args: list[str], report_target: int) -> list[str]:
        """The worker's arguments when it was forked into `plan`'s namespace."""
        extra = ["--pid-namespace-made"]
        if plan.report_r is not None:
            extra += ["--jail-report-fd", str(report_target)]
        return [*args, *extra]

    def after_fork(self, plan: Plan, pid: int | None) -> None:
        """In the server, right after the fork (`pid` None: the fork failed). First of all the
        server's own namespace again, so that nothing else it starts lands in the worker's."""
        self._back_home()
        if plan.report_r is not None:
            os.close(plan.report_r)
        if pid is None:
            pidns.end_init(plan.init, plan.lifeline)
            if plan.report_w is not None:
                os.close(plan.report_w)
            return
        self.lifelines[pid] = (plan.init, plan.lifeline)
        if plan.report_w is not None:
            pidns.send_report(plan.report_w, cgroups.join_report(plan.memory_mb or 0, [pid, plan.init], owner=pid))

    def reaped(self, pid: int) -> None:
        """A child was reaped: if it was a worker, its namespace goes with it."""
        held = self.lifelines.pop(pid, None)
        if held is not None:
            os.close(held[1])  # init reads EOF and exits; the server reaps it like any child

    def _back_home(self) -> None:
        if _libc().setns(ctypes.c_int(self.own_ns), ctypes.c_int(CLONE_NEWPID)) != 0:
            # Every later child would be born in the last worker's namespace: the server must not
            # serve on (not an OSError, which the server reports per request and survives).
            raise NamespaceStuck(f"setns back to the fork server's pid namespace failed: "
                                 f"{os.strerror(ctypes.get_errno())}")


class NamespaceStuck(RuntimeError):
    """The server could not return to its own pid namespace."""


@functools.lru_cache(maxsize=1)
def _parser() -> argparse.ArgumentParser:
    """The worker's own parser, made once: the server reads every fork's arguments with it."""
    from sandbox.worker.main import arguments

    return arguments()


def _wishes(args: list[str]) -> tuple[bool, int | None] | None:
    """(a pid namespace wanted, the cgroup's memory cap or None) from the worker's arguments;
    None if they do not parse (the worker will say what is wrong with them)."""
    try:
        parsed, _ = _parser().parse_known_args(args)
        memory_mb = int(json.loads(parsed.limits)["memory_mb"])
    except (SystemExit, ValueError, KeyError, TypeError):
        return None
    if parsed.pid_namespace_made:
        return None
    return not parsed.no_pid_namespace, None if parsed.no_cgroup else memory_mb

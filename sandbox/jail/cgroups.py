"""A cgroup per worker (docs/sandbox.md, L6, "when a cgroup is available"): a cap on the number of tasks
(pids.max) and on the resident memory of the worker's whole process group.

rlimits are per process and RLIMIT_AS counts address space, not pages in use; a cgroup bounds
what the worker and its namespace's init (and the keeper of a worker that split itself,
sandbox.jail.pidns) use together, threads included. The fork server moves a forked worker and
its init in right after the fork (sandbox.worker.fork_jail), a keeper its three right after the
split, while the worker is still starting up (the worker waits for their report before any
program code runs); a worker without either joins alone.

Layout: `<own cgroup>/mstar-sandbox/w<launched pid>` under the caller's own cgroup of each
hierarchy, so any limit above ours still applies. cgroup v1 (a hierarchy per controller, as on
these machines) and v2 (one hierarchy; both controllers must be delegated to our level) are
supported; where neither is writable -- not root, or a read-only /sys/fs/cgroup -- the layer is
reported as unavailable. A cgroup cannot be removed by the process in it: the engine removes it
once the keeper is reaped (`remove`), and every new worker sweeps up what an engine that died
left behind (`_sweep`).
"""
from __future__ import annotations

import errno
import os
import time
from typing import Sequence

from sandbox.jail.limits import LayerUnavailable

PIDS_MAX = 64  # tasks: [keeper +] init + worker and chromadb's threads (~20 measured) leave room
MEMORY_SLACK_MB = 64  # init and any keeper, on top of the worker's own memory limit
PARENT = "mstar-sandbox"


def _hierarchies() -> dict[str, str]:
    """controller -> directory of the caller's own cgroup in it ('unified' for v2)."""
    own = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for name in controllers.split(",") if controllers else ["unified"]:
                    own[name] = path
        with open("/proc/self/mountinfo") as f:
            mounts = [line.split() for line in f]
    except OSError as exc:
        raise LayerUnavailable(f"cannot read /proc/self/cgroup or mountinfo: {exc}") from None
    found = {}
    for fields in mounts:
        sep = fields.index("-")
        fstype, options, mount_point, root = fields[sep + 1], fields[sep + 3], fields[4], fields[3]
        if fstype == "cgroup":
            for name in ("pids", "memory"):
                if name in options.split(",") and name in own:
                    found[name] = _join(mount_point, root, own[name])
        elif fstype == "cgroup2" and "unified" in own:
            found.setdefault("unified", _join(mount_point, root, own["unified"]))
    return found


def _join(mount_point: str, root: str, path: str) -> str:
    relative = os.path.relpath(path, root) if path.startswith(root) else path.lstrip("/")
    return os.path.normpath(os.path.join(mount_point, relative))


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _plan(memory_mb: int) -> list[tuple[str, dict[str, str]]]:
    """(parent directory, files to write in the new cgroup) for each hierarchy to use."""
    memory = str((memory_mb + MEMORY_SLACK_MB) * 1024 * 1024)
    found = _hierarchies()
    plan = []
    if "pids" in found:  # v1
        plan.append((found["pids"], {"pids.max": str(PIDS_MAX)}))
    if "memory" in found:
        plan.append((found["memory"], {"memory.limit_in_bytes": memory}))
    if not plan and "unified" in found:
        base = found["unified"]
        try:
            available = open(os.path.join(base, "cgroup.controllers")).read().split()
        except OSError:
            available = []
        if not {"pids", "memory"} <= set(available):
            raise LayerUnavailable(f"cgroup v2 at {base} does not offer the pids and memory controllers to us")
        plan.append((base, {"pids.max": str(PIDS_MAX), "memory.max": memory}))
    if not plan:
        raise LayerUnavailable("no cgroup hierarchy with a pids or memory controller is mounted")
    return plan


def join_worker_cgroup(memory_mb: int, members: Sequence[int] = (0,), owner: int | None = None) -> str:
    """Create the cgroup(s) named after `owner` (default: this process; the engine removes it by
    the pid it launched), set the limits, move `members` in (pids as this process sees them; 0 is
    this process itself)."""
    for base, limits in _plan(memory_mb):
        parent = os.path.join(base, PARENT)
        mine = os.path.join(parent, f"w{os.getpid() if owner is None else owner}")
        try:
            os.makedirs(parent, exist_ok=True)
            if "memory.max" in limits:  # v2: hand both controllers down to the workers' level
                _write(os.path.join(parent, "cgroup.subtree_control"), "+pids +memory")
            _sweep(parent)
            os.makedirs(mine, exist_ok=True)
            for name, value in limits.items():
                _write(os.path.join(mine, name), value)
            for pid in members:  # one pid per write: the kernel takes one at a time
                _write(os.path.join(mine, "cgroup.procs"), str(pid))
        except OSError as exc:
            raise LayerUnavailable(f"cgroup {mine}: {exc.strerror or exc}") from None
    return "cgroup"


def join_report(memory_mb: int, members: Sequence[int], owner: int | None = None) -> str:
    """`join_worker_cgroup` as the one report line its worker reads (sandbox.jail.pidns.parse_report):
    "layer:cgroup", or "warning:join_worker_cgroup: <why>"."""
    try:
        return "layer:" + join_worker_cgroup(memory_mb, members, owner)
    except LayerUnavailable as exc:
        return f"warning:join_worker_cgroup: {exc}"


def remove(launched_pid: int, patience_s: float = 1.0) -> bool:
    """Remove the cgroup(s) of a reaped launched process (a forked worker, or a keeper); False if
    one is left. A cgroup stays busy until its last task is reaped (init, once its lifeline
    closes; a worker's zombie, which goes to the nearest subreaper when its keeper dies): wait up
    to `patience_s` for that, then leave it to the next worker's sweep."""
    try:
        plan = _plan(0)
    except LayerUnavailable:
        return True
    deadline = time.monotonic() + patience_s
    removed = True
    for base, _ in plan:
        path = os.path.join(base, PARENT, f"w{launched_pid}")
        while True:
            try:
                os.rmdir(path)
                break
            except FileNotFoundError:
                break
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    removed = False
                    break
                time.sleep(0.01)
    return removed


def _sweep(parent: str) -> None:
    """Remove cgroups whose launched process no longer exists (an engine killed before it could
    clean up)."""
    for name in os.listdir(parent):
        if not (name.startswith("w") and name[1:].isdigit()):
            continue
        try:
            os.kill(int(name[1:]), 0)
            continue  # alive (or the pid was reused): leave it for a later sweep
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        try:
            os.rmdir(os.path.join(parent, name))
        except OSError:
            pass

"""Which launcher starts a session that was given none (engine side).

Kept apart from `launch` (the subprocess launcher) and `forkserver` (the fork-server launcher),
which it chooses between, so that neither of those imports the other's chooser.
"""
from __future__ import annotations

import threading

from sandbox.engine.forkserver import ForkServerLauncher, ForkServerUnavailable, fork_server_supported
from sandbox.engine.launch import Launcher, SubprocessLauncher

_default: Launcher | None = None
_default_lock = threading.Lock()


def default_launcher() -> Launcher:
    """The launcher of sessions created without one: one shared fork server per engine process
    where the platform supports it (fresh interpreters if it cannot start), else fresh
    interpreters. Chosen on first use; `set_default_launcher` overrides it."""
    global _default
    with _default_lock:
        if _default is None:
            _default = (ForkServerLauncher(fallback=SubprocessLauncher()) if fork_server_supported()
                        else SubprocessLauncher())
        return _default


def set_default_launcher(launcher: Launcher | None) -> Launcher | None:
    """Use `launcher` for sessions created without one from now on, e.g.
    `set_default_launcher(SubprocessLauncher())`; None restores the automatic choice. Returns the
    previous choice (None if none was made yet). Live sessions keep the launcher they started
    with; a replaced fork server keeps running for them until the engine exits."""
    global _default
    with _default_lock:
        previous, _default = _default, launcher
        return previous


def warm_default_launcher() -> bool:
    """Start the default launcher's fork server now, in a thread of its own, where there is one
    and it is not up yet; True when a start was begun. A server takes ~0.8 s to import chromadb
    (docs/sandbox.md), and the first session waited for all of it: in mstar, every run's seeds did.
    Begun before the run's preflight and split, it is up by the time they are done. A server that
    cannot start here is found out here, as by a first session (it logs why; sessions fall back)."""
    launcher = default_launcher()
    if not isinstance(launcher, ForkServerLauncher) or launcher.server_pid is not None or launcher.failure:
        return False
    threading.Thread(target=_start_quietly, args=(launcher,), name="forkserver-warm", daemon=True).start()
    return True


def _start_quietly(launcher: ForkServerLauncher) -> None:
    try:
        launcher.start()
    except ForkServerUnavailable:
        pass   # logged by the launcher; each session falls back to fresh interpreters

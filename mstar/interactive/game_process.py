"""One game in its own child process, driven over a pipe, with a wall-clock limit.

Why a process per game: text-game engines keep global state and are not thread-safe (TextWorld's
parsers, gym registries), a game can hang in C code, and a crash must cost one case, not the run.
The paper's own code runs each episode in its own process too.

Life of a game:
  0. `GameProcess(spec, timeout_s=..., call_timeout_s=...)`; entering the context forks a child
     from multiprocessing's fork server (context "forkserver"; the modules in `preload` are
     imported once in the server, so a child is ready in tens of ms instead of an interpreter
     start plus the engine's imports). The child makes itself a process-group leader and arms a
     SIGALRM backstop; it builds the environment from the spec (mstar.interactive.env) when
     the first request comes.
  1. `reset()` / `step(cmd)` take one of ENGINE_SLOTS (engines computing at once, default the
     cores), send one request and wait for one reply, at most the smaller of `call_timeout_s`
     and what is left of the game's `timeout_s`. The game's clock runs while the engine works
     (waiting for its replies), not while the agent thinks or the game waits for a slot: a slow
     LLM or a busy machine is not a hung game, and LLM calls have their own timeouts.
  2. A reply that does not come in time -> the child's process group is SIGKILLed and the call
     raises `GameError(kind="timeout")`; a child that died -> `GameError(kind="crash")` with its
     exit code or signal; an exception inside the environment -> `GameError(kind="env")` with
     the exception's type and message. The step loop (episode.py) turns every GameError into a
     value on the case, so nothing escapes to the run.
  3. Leaving the context asks the child to close, waits briefly, then kills it regardless.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
import traceback
from typing import Sequence

from mstar.interactive.env import EnvSpec, Observation, StepResult, build_env

DEFAULT_TIMEOUT_S = 300.0       # engine time of a whole game: 50 ALFWorld steps take a few seconds
DEFAULT_CALL_TIMEOUT_S = 60.0   # one reset/step; longer means the engine hangs
CHILD_BACKSTOP_S = 3600.0       # a child still alive this long after it started kills itself (an
                                # orphan stuck in C code never sees its pipe close)
_preload_lock = threading.Lock()
_preloaded: set[str] = set()


class EngineSlots:
    """How many game engines may compute at once in this process's games (default: the cores).

    A game's process mostly waits for the agent; when it computes (building the game, reset,
    step) it is CPU-bound. Twenty-four games of one evaluation resetting at once on two cores took
    over a minute each -- past the step limit, though none hung. So a request takes a slot before
    it is sent and the game's clock starts only then: a game waiting for a slot is not a slow game,
    and as many games as the evaluator likes can be open while their agents think."""

    def __init__(self, n: int):
        self._cond = threading.Condition()
        self.limit, self.busy = max(1, int(n)), 0

    def resize(self, n: int) -> None:
        with self._cond:
            self.limit = max(1, int(n))
            self._cond.notify_all()

    def __enter__(self):
        with self._cond:
            self._cond.wait_for(lambda: self.busy < self.limit)
            self.busy += 1
        return self

    def __exit__(self, *exc) -> None:
        with self._cond:
            self.busy -= 1
            self._cond.notify()


ENGINE_SLOTS = EngineSlots(max(2, os.cpu_count() or 1))


class GameError(Exception):
    """A game that could not go on: kind is "timeout", "crash" or "env"."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


def _context(preload: Sequence[str]):
    ctx = multiprocessing.get_context("forkserver")
    with _preload_lock:
        # "__main__" first, as multiprocessing's default does: the server imports the main script
        # once (as __mp_main__), so each game child does not re-run it.
        wanted = set(preload) | {"__main__", "mstar.interactive.game_process"}
        if not wanted <= _preloaded:
            # Only takes effect if the fork server has not started yet; a later, different
            # preload list just means slower imports in the child, never a wrong result.
            _preloaded.update(wanted)
            ctx.set_forkserver_preload(["__main__"] + sorted(_preloaded - {"__main__"}))
    return ctx


def _child_main(conn, spec_dict: dict, backstop_s: float) -> None:
    """Child side: build the environment, then serve reset/step/close until told or orphaned."""
    try:
        os.setpgid(0, 0)   # our own group, so a kill takes anything the engine started too
    except OSError:
        pass
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(max(1, int(backstop_s)))
    env, build_error = None, None
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            break
        op = request[0]
        if op == "close":
            break
        if env is None and build_error is None:
            # Built on the first request, not at start: building is engine work, and the parent
            # times (and rations, ENGINE_SLOTS) engine work per request.
            try:
                env = build_env(EnvSpec(spec_dict["factory"], spec_dict.get("kwargs") or {}))
            except BaseException as exc:  # reported on this request, not lost with the process
                build_error = _describe(exc)
        if build_error is not None:
            conn.send(("error", build_error))
            continue
        try:
            result = env.reset() if op == "reset" else env.step(request[1])
        except BaseException as exc:
            conn.send(("error", _describe(exc)))
            continue
        conn.send(("ok", result))
    try:
        if env is not None:
            env.close()
    finally:
        conn.close()


def _describe(exc: BaseException) -> str:
    where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    at = f" (at {where[0].filename.rsplit('/', 1)[-1]}:{where[0].lineno})" if where else ""
    return f"{type(exc).__name__}: {exc}{at}"


class GameProcess:
    """An Environment-like handle whose game runs in a child process (see module docstring)."""

    def __init__(self, spec: EnvSpec, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S, preload: Sequence[str] = ()):
        if timeout_s <= 0 or call_timeout_s <= 0:
            raise ValueError("timeouts must be positive")
        self.spec = spec
        self.timeout_s = float(timeout_s)
        self.call_timeout_s = float(call_timeout_s)
        self.preload = tuple(preload) or ((spec.module,) if spec.module else ())
        self._proc = None
        self._conn = None
        self._t0 = 0.0
        self.engine_s = 0.0       # time spent waiting for the engine's replies
        self.killed = False

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "GameProcess":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> None:
        ctx = _context(self.preload)
        parent, child = ctx.Pipe()
        self._t0 = time.monotonic()
        self._proc = ctx.Process(target=_child_main, daemon=True,
                                 args=(child, self.spec.to_dict(), max(CHILD_BACKSTOP_S, 2 * self.timeout_s)))
        self._proc.start()
        child.close()
        self._conn = parent

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._t0 if self._t0 else 0.0

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def remaining_s(self) -> float:
        """What is left of the game's limit (engine time; see the module docstring)."""
        return self.timeout_s - self.engine_s

    def close(self) -> None:
        if self._proc is None:
            return
        try:
            self._conn.send(("close",))
        except (OSError, ValueError):
            pass
        self._proc.join(1.0)
        if self._proc.is_alive():
            self._kill()
        self._conn.close()
        self._proc = None

    def _kill(self) -> None:
        self.killed = True
        pid = self._proc.pid
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self._proc.kill()
        except (OSError, ValueError):
            pass
        self._proc.join(2.0)

    # ------------------------------------------------------------------ requests
    def reset(self) -> Observation:
        return self._call(("reset",))

    def step(self, command: str) -> StepResult:
        return self._call(("step", command))

    def _call(self, request: tuple):
        if self._proc is None:
            raise GameError("crash", "the game process is not running")
        wait = min(self.call_timeout_s, self.remaining_s())
        if wait <= 0:
            self._kill()
            raise GameError("timeout", f"game exceeded its wall-clock limit of {self.timeout_s:g} s; killed")
        with ENGINE_SLOTS:
            t0 = time.monotonic()
            try:
                self._conn.send(request)
                ready = self._conn.poll(wait)
            except (OSError, ValueError, BrokenPipeError):
                raise self._crash() from None
            finally:
                self.engine_s += time.monotonic() - t0
        if not ready:
            self._kill()
            if self.remaining_s() <= 0:
                raise GameError("timeout", f"game exceeded its wall-clock limit of {self.timeout_s:g} s; killed")
            raise GameError("timeout", f"{request[0]} took longer than {self.call_timeout_s:g} s; killed")
        try:
            status, payload = self._conn.recv()
        except (EOFError, OSError):
            raise self._crash() from None
        if status == "error":
            raise GameError("env", payload)
        return payload

    def _crash(self) -> GameError:
        self._proc.join(2.0)
        code = self._proc.exitcode
        if code is None:
            self._kill()
            return GameError("crash", "lost the pipe to the game process; killed it")
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        return GameError("crash", f"game process died ({how})")

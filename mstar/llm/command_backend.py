"""A role served by an external program: the prompt on stdin, the completion on stdout.

For example a coding-agent CLI as the reflector (`claude -p`, `codex exec -`, a
script around a local model). The command line is split like a shell would
(no shell runs it). Each call starts a fresh process in its own process group,
so a timeout kills the program and anything it started. A non-zero exit is an
error naming the command and the end of its stderr (not retried: a broken
command fails the same way again); a timeout is retried like a slow server.
"""
from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time

from mstar.llm.types import (ChatResponse, EmptyCompletionError, LLMError, TransientLLMError,
                             estimate_tokens, messages_text)

STDERR_TAIL = 1500


def render_prompt(messages: list[dict]) -> str:
    """One user message is passed as it is; a conversation gets a header per message."""
    if len(messages) == 1 and messages[0].get("role") == "user":
        return str(messages[0].get("content", ""))
    return "\n\n".join(f"### {m.get('role', 'user')}\n{m.get('content', '')}" for m in messages)


class CommandBackend:
    name = "command"

    def __init__(self, role: str, command: str | list[str] | None, *, timeout_s: float = 600.0,
                 model: str | None = None):
        if not command:
            raise LLMError(f"role {role!r}: backend 'command' needs a command "
                           f"(for example  --llm '{role}.command=python my_model.py')")
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise LLMError(f"role {role!r}: the command is empty")
        self.role = role
        self.argv = argv
        self.timeout_s = timeout_s
        self.model = model if model and model != "offline" else os.path.basename(argv[0])

    def complete(self, messages: list[dict]) -> ChatResponse:
        prompt = render_prompt(messages)
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise LLMError(f"role {self.role!r}: cannot start command {self.argv[0]!r}: {exc}") from exc
        try:
            out, err = proc.communicate(prompt.encode("utf-8"), timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise TransientLLMError(f"role {self.role!r}: command {self.argv[0]!r} timed out after "
                                    f"{self.timeout_s:g}s (killed)", kind="timeout")
        latency = time.perf_counter() - start
        if proc.returncode != 0:
            tail = err.decode("utf-8", "replace").strip()[-STDERR_TAIL:]
            raise LLMError(f"role {self.role!r}: command {self.argv[0]!r} exited with status "
                           f"{proc.returncode}" + (f": {tail}" if tail else " (no stderr)"))
        text = out.decode("utf-8", "replace")
        if not text.strip():
            raise EmptyCompletionError(f"role {self.role!r}: empty completion (command {self.argv[0]!r} "
                                       "wrote nothing to stdout)")
        return ChatResponse(text=text.rstrip("\n"), model=self.model, backend=self.name,
                            prompt_tokens=estimate_tokens(messages_text(messages)),
                            completion_tokens=estimate_tokens(text), latency_s=latency)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()

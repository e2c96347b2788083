"""Driving `mstar serve` with the official MCP SDK's own client (ClientSession over stdio and over
streamable HTTP), for the server tests and bench/bench_memory.py. Import only after checking the
SDK is there (`pytest.importorskip("mcp", ...)`)."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import AsyncIterator

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

MISSING_NOTE = "needs the [serve] extra (the MCP SDK): pip install -e '.[serve]'"


def serve_argv(program, store: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "mstar.cli", "serve", *([str(program)] if program else []), "--store", str(store),
            *extra]


def quiet_env(**extra: str) -> dict[str, str]:
    """The test's environment without a real endpoint: the offline backend serves every role."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MSTAR_")}
    env.update(extra)
    return env


@contextlib.asynccontextmanager
async def stdio_session(program, store: Path, *extra: str, env: dict | None = None) -> AsyncIterator[ClientSession]:
    argv = serve_argv(program, store, *extra)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env or quiet_env())
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


class HttpServer:
    """`mstar serve --transport http --port 0` in a process of its own; `url` once it listens."""

    def __init__(self, program, store: Path, *extra: str, env: dict | None = None, timeout: float = 120) -> None:
        self.proc = subprocess.Popen(serve_argv(program, store, "--transport", "http", "--port", "0", *extra),
                                     stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                                     env=env or quiet_env())
        self.lines: list[str] = []
        found = threading.Event()
        self.url = ""

        def read() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.lines.append(line.rstrip("\n"))
                match = re.search(r"at (http://\S+/mcp)", line)
                if match and not self.url:
                    self.url = match.group(1)
                    found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        found.wait(timeout)
        if not self.url:
            self.kill()
            raise RuntimeError(f"the server did not start: {self.lines[-5:]}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def __enter__(self) -> "HttpServer":
        return self

    def __exit__(self, *exc) -> None:
        self.kill()


@contextlib.asynccontextmanager
async def http_session(url: str, headers: dict | None = None) -> AsyncIterator[ClientSession]:
    import httpx2
    async with httpx2.AsyncClient(headers=headers or {}, timeout=httpx2.Timeout(60.0, read=300.0)) as client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def server_pids(store: Path) -> list[int]:
    """The `mstar serve` processes serving `store` (found by their command line)."""
    found = []
    needle = str(store).encode()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if b"mstar.cli\x00serve" in cmdline and needle in cmdline:
                found.append(int(entry))
    return found


def wait_gone(pid: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                return
        except OSError:
            return
        time.sleep(0.05)


async def remember(session: ClientSession, text: str, namespace: str) -> dict:
    result = await session.call_tool("remember", {"text": text, "namespace": namespace})
    assert not result.is_error, result.content
    return result.structured_content


async def recall(session: ClientSession, question: str, namespace: str, answer: bool = False) -> dict:
    result = await session.call_tool("recall", {"question": question, "namespace": namespace, "answer": answer})
    assert not result.is_error, result.content
    return result.structured_content

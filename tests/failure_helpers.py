"""Shared by tests/test_failures_*.py: small runs against the project's fake server (the real
`openai` client on loopback), and the checks every failure test makes of a run folder."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMALL = ["--task", "sample", "--size", "0.3", "--static-size", "6", "--seeds", "vector_search"]


def endpoint(base_url: str, cache_dir, *, model: str = "gpt-test", retries: int = 3, timeout_s: float = 30.0,
             concurrency: int = 16) -> list[str]:
    """Every role on the fake server under one model name (the server reads roles from the prompt)."""
    return ["--base-url", base_url, "--model", model, "--llm", "defaults.backoff_s=0.01",
            "--llm", f"defaults.max_retries={retries}", "--llm", f"defaults.timeout_s={timeout_s}",
            "--llm", f"defaults.concurrency={concurrency}",
            *(["--cache-dir", str(cache_dir)] if cache_dir else ["--no-cache"])]


def events(run: Path) -> list[dict]:
    return [json.loads(l) for l in (run / "lineage.jsonl").read_text().splitlines() if l.strip()]


def usage(run: Path) -> list[dict]:
    path = run / "llm_usage.jsonl"
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()] if path.exists() else []


def stable(evs: list[dict]) -> list[dict]:
    """Events without what differs between two runs of the same lineage (times, spend)."""
    return [{k: v for k, v in e.items() if k not in ("seconds", "timing", "llm")} for e in evs]


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def assert_strict_json(run: Path) -> None:
    """Every JSON file and JSON line of the folder parses as strict JSON (no NaN, no Infinity)."""
    for path in run.rglob("*.json"):
        json.loads(path.read_text(), parse_constant=_no_constant)
    for path in run.rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            if line.strip():
                json.loads(line, parse_constant=_no_constant)


def temp_files(run: Path) -> list[Path]:
    return [p for p in run.rglob("*") if ".tmp" in p.name]


def error_lines(err: str) -> list[str]:
    """The lines of stderr that say something (not the LLM layer's price warnings)."""
    return [l for l in err.splitlines() if l.strip() and "no price for model" not in l]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """The fake server in its own process, so a test can kill it as an outage would (every
    connection refused) and start it again on the same port."""

    def __init__(self, port: int | None = None, *args: str) -> None:
        self.port = port or free_port()
        self.args = args
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "ServerProcess":
        self.proc = subprocess.Popen([sys.executable, "-m", "mstar.testing.fake_server", "--port", str(self.port),
                                      *self.args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        assert self.proc.stdout.readline().strip() == self.base_url
        return self

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.kill()


def mstar_process(*args: str, env: dict | None = None) -> subprocess.Popen:
    """`mstar ARGS` as its own process (for signals), output captured."""
    return subprocess.Popen([sys.executable, "-m", "mstar.cli", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def wait_for(predicate, timeout: float = 120.0, every: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the condition did not come true in time")
        time.sleep(every)

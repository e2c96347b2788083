"""A persistent response cache shared by runs (sqlite, one file in a cache folder).

The key is a hash of everything that decides a reply -- who serves it (backend,
base URL or command, model), the messages and the sampling parameters -- and
nothing that does not (API key, timeout). Only complete, non-empty replies are
stored: failures and truncated replies never are. Identical extraction prompts
across evaluations (a child that changed only its Logic asks exactly what its
parent asked) are answered here, without a request.

Many threads of one run and many runs at once may share the file: sqlite in WAL
mode lets readers proceed while one writer commits, a busy timeout waits out
the other processes' locks, and the first writer of a key wins (INSERT OR IGNORE),
so racing writers of the same request never conflict.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path

from mstar.llm.types import ChatResponse, LLMError

CACHE_VERSION = 1      # bump when the key or the stored record changes meaning
FILE_NAME = "responses.sqlite"


def request_key(identity: dict, messages: list[dict], params: dict, occurrence: int | None = None) -> str:
    """Stable hash of one request. `occurrence` (n-th time this exact request is asked
    in this process) keeps repeated asks apart when a role wants fresh samples."""
    payload = {"v": CACHE_VERSION, "who": identity, "messages": messages,
               "params": {k: v for k, v in sorted(params.items()) if v is not None}}
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    digest = hashlib.sha256(blob.encode("utf-8")).hexdigest()
    return digest if occurrence is None else f"{digest}#{occurrence}"


def _while_locked(statement, patience_s: float = 30.0) -> None:
    """Run `statement`, again while another process holds the file: SQLite answers "database is
    locked" at once, without its busy handler, to a connection switching to WAL while another
    one sets the file up (4 processes opening one new cache: 1 of 160 failed so)."""
    deadline = time.monotonic() + patience_s
    while True:
        try:
            statement()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


class ResponseCache:
    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.path = self.directory / FILE_NAME
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=60, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA busy_timeout=60000")
            _while_locked(lambda: self._conn.execute("PRAGMA journal_mode=WAL"))
            self._conn.execute("PRAGMA synchronous=NORMAL")
            _while_locked(lambda: self._conn.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, role TEXT, model TEXT, "
                "response TEXT NOT NULL, created REAL NOT NULL)"))
        except (OSError, sqlite3.Error) as exc:
            raise LLMError(f"cannot open the response cache at {self.path}: {exc} "
                           "(delete the file, choose another --cache-dir, or pass --no-cache)") from exc
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.stores = 0
        self.errors: list[str] = []   # a cache that cannot be written slows a run; it never fails it

    def get(self, key: str) -> ChatResponse | None:
        try:
            with self._lock:
                row = self._conn.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
                self.hits, self.misses = self.hits + (row is not None), self.misses + (row is None)
        except sqlite3.Error as exc:
            self._note_error("read", exc)
            row = None
        if row is None:
            return None
        data = json.loads(row[0])
        fields = ChatResponse.__dataclass_fields__
        return ChatResponse(**{k: v for k, v in data.items() if k in fields})

    def put(self, key: str, response: ChatResponse, *, role: str = "") -> bool:
        """Store a good reply; returns False (and stores nothing) for a reply that must not be cached."""
        if response.finish_reason == "length" or not response.text.strip() or response.cache_hit:
            return False
        blob = json.dumps(response.to_dict(), ensure_ascii=False)
        try:
            with self._lock:
                self._conn.execute(
                    "INSERT OR IGNORE INTO responses (key, role, model, response, created) VALUES (?, ?, ?, ?, ?)",
                    (key, role, response.model, blob, time.time()))
                self.stores += 1
        except sqlite3.Error as exc:
            self._note_error("write", exc)
            return False
        return True

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def _note_error(self, what: str, exc: Exception) -> None:
        self.misses += what == "read"
        if len(self.errors) < 20:
            self.errors.append(f"cache {what} failed: {exc}")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

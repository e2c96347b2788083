"""toolkit.db: a fresh in-memory sqlite3 database behind a capability wrapper (docs/sandbox.md, L4).

The raw connection lives only in the closure of make_database. The authorizer and limits close
sqlite's ways out of memory: ATTACH (also with a bound filename the authorizer cannot see, hence
SQLITE_LIMIT_ATTACHED = 0, which also stops VACUUM INTO), load_extension,
and pragmas beyond a harmless allowlist. A progress handler interrupts statements that run past
the op deadline, so a runaway recursive CTE ends with an exception before the engine's SIGKILL.
Statements are fetched eagerly: a Cursor holds plain rows, never sqlite's cursor (`.connection`).
"""
from __future__ import annotations

import sqlite3
import threading
from typing import Any, Callable

from sandbox.worker.toolkit import OpClock, plain_in, plain_out

_DENIED_ACTIONS = {
    sqlite3.SQLITE_ATTACH: "ATTACH DATABASE (VACUUM INTO attaches too)",
    sqlite3.SQLITE_DETACH: "DETACH DATABASE",
}
# data_version and page_size are also issued by sqlite itself when a program creates an FTS5
# (full-text search) or R*Tree table, which memory programs do; both are harmless on :memory:.
_ALLOWED_PRAGMAS = frozenset(
    "table_info table_xinfo table_list index_list index_info index_xinfo foreign_key_list "
    "foreign_keys user_version journal_mode synchronous cache_size case_sensitive_like "
    "recursive_triggers busy_timeout data_version page_size".split()
)
_DENIED_FUNCTIONS = frozenset({"load_extension", "fts3_tokenizer", "readfile", "writefile", "edit"})
_PROGRESS_STEPS = 10_000


def make_database(clock: OpClock) -> Any:
    """A fresh in-memory database behind a capability wrapper."""
    # Concurrent reads run in threads of their own (sandbox.worker.main); every statement goes
    # through `run` under one lock, so the connection is never used by two threads at once.
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    lock = threading.RLock()
    conn.execute("PRAGMA temp_store = MEMORY")  # no temp files (RLIMIT_FSIZE, tmp dir)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)  # also blocks VACUUM INTO
    conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, 16 * 1024 * 1024)
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, 1_000_000)
    denial: list[str] = []

    def authorizer(action: int, arg1: Any, arg2: Any, _db: Any, _source: Any) -> int:
        reason = _DENIED_ACTIONS.get(action)
        if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() not in _ALLOWED_PRAGMAS:
            reason = f"PRAGMA {arg1}"
        elif action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _DENIED_FUNCTIONS:
            reason = f"SQL function {arg2}()"
        if reason is None:
            return sqlite3.SQLITE_OK
        denial.append(reason)
        return sqlite3.SQLITE_DENY

    conn.set_authorizer(authorizer)
    conn.set_progress_handler(lambda: 1 if clock.expired() else 0, _PROGRESS_STEPS)

    def run(call: Callable[[], sqlite3.Cursor]) -> tuple:
        with lock:
            denial.clear()
            try:
                cursor = call()
                rows = cursor.fetchall()
                return rows, cursor.rowcount, cursor.lastrowid, plain_out(cursor.description)
            except sqlite3.DatabaseError as exc:
                if denial:
                    raise sqlite3.DatabaseError(f"not authorized in toolkit.db: {denial[0]} is not allowed") from None
                if "interrupted" in str(exc) and clock.expired():
                    raise sqlite3.OperationalError("interrupted: the SQL statement ran past the op deadline") from None
                raise

    def check_sql(sql: Any) -> str:
        if not isinstance(sql, str):
            raise TypeError(f"SQL must be a str, got {type(sql).__name__}")
        return str.__str__(sql)

    def params(parameters: Any) -> Any:
        if isinstance(parameters, dict):
            return plain_in(parameters, "SQL parameters")
        if not isinstance(parameters, (list, tuple)):
            raise TypeError(f"SQL parameters must be a list, tuple or dict, got {type(parameters).__name__}")
        return tuple(plain_in(parameters, "SQL parameters"))

    class Cursor:
        """Results of one statement, fetched eagerly; no link back to the connection."""

        __slots__ = ("_rows", "_pos", "rowcount", "lastrowid", "description")

        def __init__(self) -> None:
            self._rows, self._pos = [], 0
            self.rowcount, self.lastrowid, self.description = -1, None, None

        def _load(self, result: tuple) -> "Cursor":
            self._rows, self.rowcount, self.lastrowid, self.description = result
            self._pos = 0
            return self

        def execute(self, sql: str, parameters: Any = ()) -> "Cursor":
            sql, bound = check_sql(sql), params(parameters)
            return self._load(run(lambda: conn.execute(sql, bound)))

        def executemany(self, sql: str, seq_of_parameters: Any) -> "Cursor":
            sql = check_sql(sql)
            rows = [params(p) for p in seq_of_parameters]
            return self._load(run(lambda: conn.executemany(sql, rows)))

        def executescript(self, sql_script: str) -> "Cursor":
            script = check_sql(sql_script)
            return self._load(run(lambda: conn.executescript(script)))

        def fetchone(self) -> Any:
            if self._pos >= len(self._rows):
                return None
            self._pos += 1
            return self._rows[self._pos - 1]

        def fetchmany(self, size: int = 1) -> list:
            chunk = self._rows[self._pos : self._pos + max(0, int(size))]
            self._pos += len(chunk)
            return chunk

        def fetchall(self) -> list:
            chunk = self._rows[self._pos :]
            self._pos = len(self._rows)
            return chunk

        def close(self) -> None:
            self._rows, self._pos = [], 0

        def __iter__(self):
            # A list iterator, not a generator: a generator would carry a host frame.
            return iter(self.fetchall())

    class Database:
        """toolkit.db: sqlite3 in memory. execute/executemany/executescript return a Cursor."""

        __slots__ = ()
        _guarded_writes = True  # RestrictedPython write guards: setting row_factory is allowed

        def execute(self, sql: str, parameters: Any = ()) -> Cursor:
            return Cursor().execute(sql, parameters)

        def executemany(self, sql: str, seq_of_parameters: Any) -> Cursor:
            return Cursor().executemany(sql, seq_of_parameters)

        def executescript(self, sql_script: str) -> Cursor:
            return Cursor().executescript(sql_script)

        def cursor(self) -> Cursor:
            return Cursor()

        def commit(self) -> None:
            with lock:
                conn.commit()

        def rollback(self) -> None:
            with lock:
                conn.rollback()

        def close(self) -> None:
            """No-op: the engine owns the connection for the life of the knowledge base."""

        @property
        def total_changes(self) -> int:
            return conn.total_changes

        @property
        def in_transaction(self) -> bool:
            return conn.in_transaction

        @property
        def row_factory(self) -> Any:
            return conn.row_factory

        @row_factory.setter
        def row_factory(self, value: Any) -> None:
            # A callable factory would be handed sqlite's raw cursor (and its .connection).
            if value is not None and value is not sqlite3.Row:
                raise TypeError("toolkit.db.row_factory accepts only sqlite3.Row or None")
            with lock:
                conn.row_factory = value

    return Database()

"""The store page's JSON (`mstar ui --store DIR`): a memory store looked at, never changed.

    summary   the program (name, hash, source), each namespace with its entry count and last write
    entries   a page of one namespace's entries, with a text filter (mstar.memory.entries)
    recall    what the program's read() returns for a question, from a worker replayed from the log

Logs are read under a shared lock (mstar.memory.log.read_log): a namespace a server holds open
is answered with one line saying so (409), not read under it. The recall box has no LLM: the
question goes into every text field of the program's Query, as is, so what is shown is read()
itself. Its worker is a throwaway replayed from the log (toolkit replies served from the log,
nothing written), kept while the log is unchanged (at most MAX_WORKERS), started and closed on
one long-lived thread of its own (a worker dies with the thread that started it; request threads
come and go).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mstar import agent
from mstar.memory.entries import page
from mstar.memory.log import read_log
from mstar.memory.store import StoreError, check_namespace, open_store
from mstar.ui.api import NotFound

MAX_WORKERS = 2


class StoreView:
    def __init__(self, root: str | Path) -> None:
        self.folder = open_store(root, None, create=False)       # StoreError: not a store
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="ui-store-workers")
        self._workers: OrderedDict[str, tuple[tuple, object]] = OrderedDict()
        self._lock = threading.Lock()

    def _log(self, namespace: str) -> Path:
        path = self.folder.namespaces_dir / check_namespace(namespace) / "log.jsonl"
        if not path.is_file():
            raise NotFound(f"the store has no namespace {namespace!r}")
        return path

    def summary(self) -> dict:
        spaces = []
        for name in self.folder.namespaces():
            try:
                records = read_log(self._log(name))
                spaces.append({"name": name, "entries": len(records),
                               "last_write": records[-1].at if records else None, "problem": None})
            except (StoreError, OSError, RuntimeError) as exc:
                spaces.append({"name": name, "entries": None, "last_write": None, "problem": str(exc)})
        return {"store": str(self.folder.root), "program": self.folder.name, "sha256": self.folder.sha256,
                "source": self.folder.source, "namespaces": spaces}

    def entries(self, namespace: str, offset: int = 0, limit: int = 50, contains: str | None = None) -> dict:
        return page(namespace, read_log(self._log(namespace)), offset, limit, contains or None).to_dict()

    def recall(self, namespace: str, question: str) -> dict:
        path = self._log(namespace)
        stat = path.stat()
        key = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        return self._thread.submit(self._recall, namespace, path, key, question).result()

    def _recall(self, namespace: str, path: Path, key: tuple, question: str) -> dict:
        from mstar.memory.namespace import Namespace
        from mstar.memory.sandboxed import Answer
        held = self._workers.get(namespace)
        if held is None or held[0] != key:
            if held is not None:
                held[1].close()
            ns = Namespace(self.folder, namespace, task_llm="offline", toolkit_llm="offline")
            memory, _state = ns.build(read_log(path))
            self._workers[namespace] = (key, memory)
            while len(self._workers) > MAX_WORKERS:
                self._workers.popitem(last=False)[1][1].close()
        self._workers.move_to_end(namespace)
        memory = self._workers[namespace][1]
        schema = memory.info.query_schema
        query, _ = agent.fill_fields({f["name"]: question for f in schema if f.get("type") == "str"}, schema)
        result = memory.read_into(Answer("", query, ""))
        return {"namespace": namespace, "question": question, "query": query, "retrieved": result.retrieved,
                "error": result.error}

    def close(self) -> None:
        def close_all() -> None:
            for _key, memory in self._workers.values():
                memory.close()
            self._workers.clear()
        self._thread.submit(close_all)
        self._thread.shutdown(wait=True)

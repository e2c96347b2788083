"""The run folder: everything needed to inspect a run and export its best program.

Layout of runs/<name>/:
  config.json          resolved configuration (no secrets)
  split.json           static / rotating / training indices
  programs/<id>.py     every program's source (children also when they failed a gate)
  lineage.jsonl        one event per line (seed evaluations, iterations, final test)
  cases/<id>.<split>.json   per-case results (full trajectories)
  llm_usage.jsonl      one record per LLM call
  best_program.py      the best program by static score
  summary.json         final scores
Writes are atomic (temp file + rename) and JSON lines are flushed per event, so
a crash never leaves a half-written file behind.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class RunStore:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self._lock = threading.Lock()

    def create(self) -> None:
        if self.root.exists() and any(self.root.iterdir()):
            raise FileExistsError(f"run folder {self.root} already exists and is not empty; "
                                  "choose another --name or remove it")
        (self.root / "programs").mkdir(parents=True, exist_ok=True)
        (self.root / "cases").mkdir(parents=True, exist_ok=True)

    def write_json(self, rel: str, data: Any) -> None:
        atomic_write_text(self.root / rel, json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")

    def write_text(self, rel: str, text: str) -> None:
        atomic_write_text(self.root / rel, text)

    def append_jsonl(self, rel: str, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with self._lock:
            with open(self.root / rel, "a", encoding="utf-8") as fh:
                fh.write(line)
                fh.flush()

    def write_program(self, program_id: str, source: str) -> None:
        self.write_text(f"programs/{program_id}.py", source)

    def write_cases(self, program_id: str, split: str, data: dict) -> None:
        self.write_json(f"cases/{program_id}.{split}.json", data)

    def read_jsonl(self, rel: str) -> list[dict]:
        path = self.root / rel
        if not path.exists():
            return []
        out = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not a JSON line ({exc.msg})") from exc
        return out

"""Embeddings computed in a child process, so that the engine does not keep what computing them loads.

A run embeds its split once (questions, then episodes: mstar.split.make) and never again, yet a
model loaded for it stayed in the engine for the whole run: torch and all-MiniLM-L6-v2 ~500 MB,
scikit-learn for the hashing embedder ~60 MB (bench/bench_run_memory.py). `ApartEmbedder` runs the
same embedder in `python -m mstar.split.embed MODEL BATCH`, started at the first call and kept for
the next until `close()` or until the ApartEmbedder goes: the same code, model, threads and
batches, hence the same vectors. Requests and replies are length-prefixed frames on its pipes.
"""
from __future__ import annotations

import json
import struct
import subprocess
import sys
import tempfile
import threading
import weakref
from typing import Sequence

import numpy as np


class ApartEmbedder:
    """`model` ("hashing" or a sentence-transformers model) embedded in a child process; `name`:
    the embedder's own name (what a split records); see the module docstring."""

    def __init__(self, model: str, name: str, batch_size: int = 64) -> None:
        self.model, self.name, self.batch_size = model, name, batch_size
        self.calls = 0
        self._child: subprocess.Popen | None = None
        self._said = None                  # the child's stderr (a file: a pipe left unread could fill)
        self._end = None
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        blob = json.dumps(_texts(texts)).encode()
        with self._lock:
            self.calls += 1
            child = self._start()
            try:
                child.stdin.write(struct.pack(">I", len(blob)) + blob)
                child.stdin.flush()
                rows, dim = struct.unpack(">II", read_exactly(child.stdout, 8))
                data = read_exactly(child.stdout, rows * dim * 4)
            except (OSError, EOFError, struct.error):
                child.wait(timeout=30)
                self._said.seek(0)
                said = self._said.read().decode(errors="replace").strip()[-1500:]
                self.close()
                raise ValueError(f"embedding with {self.model!r} failed in its process: {said}") from None
        return np.frombuffer(data, dtype=np.float32).reshape(rows, dim).copy()

    def close(self) -> None:
        if self._end is not None:
            self._end()
        self._child = self._end = None

    def _start(self) -> subprocess.Popen:
        if self._child is None:
            self._said = tempfile.TemporaryFile()
            self._child = subprocess.Popen([sys.executable, "-m", "mstar.split.embed", self.model, str(self.batch_size)],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._said)
            self._end = weakref.finalize(self, _end_child, self._child)
        return self._child


def _end_child(child: subprocess.Popen) -> None:
    """Its stdin closed, the child ends (EOF); killed if it does not."""
    try:
        child.stdin.close()
        child.wait(timeout=10)
    except Exception:  # noqa: BLE001 -- gone already, or stuck: killed below
        pass
    if child.poll() is None:
        child.kill()
        child.wait()


def read_exactly(stream, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            raise EOFError("the embedding process ended")
        data += chunk
    return data


def _texts(texts) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not one string")
    return [str(t) for t in texts]

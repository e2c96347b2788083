"""The errors the Python API raises before a run starts (or goes on): each one line."""
from __future__ import annotations


class SetupError(Exception):
    """A run that cannot start (or go on): one line, and the command line's exit code (2: bad
    input, 3: an endpoint that does not answer, 1: a disk that cannot be written). A message
    that is empty was printed already (the preflight prints its own line)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code

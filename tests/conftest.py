"""Set-up every test shares."""
from __future__ import annotations

import pytest

from sandbox.engine.spares import SPARES


@pytest.fixture(autouse=True)
def _console_width_of_a_pipe(monkeypatch):
    """The console wraps its lines to COLUMNS when it is set (mstar/run/console.py), and several
    tests compare whole lines as they read in a pipe (100 columns). pytest-xdist's workers get the
    controller's terminal width in COLUMNS (80 in CI's log), and so could a user's shell: neither
    must decide what these tests see. Subprocesses inherit os.environ, so the runs they start too."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(autouse=True)
def _no_spare_workers_between_tests():
    """An evolution's executor keeps spare workers (sandbox/engine/spares.py) until it is closed.
    A test that builds one and never closes it must not hand its spares to the next test, whose
    sessions (and their launcher and jail settings) are its own."""
    yield
    SPARES.keep(0)

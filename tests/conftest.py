"""Set-up every test shares."""
from __future__ import annotations

import pytest

from sandbox.engine.spares import SPARES


@pytest.fixture(autouse=True)
def _no_spare_workers_between_tests():
    """An evolution's executor keeps spare workers (sandbox/engine/spares.py) until it is closed.
    A test that builds one and never closes it must not hand its spares to the next test, whose
    sessions (and their launcher and jail settings) are its own."""
    yield
    SPARES.keep(0)

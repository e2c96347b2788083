"""The CPU a read costs its worker (OpResult.cpu_s; summed into the lineage: tests/test_eval_timing.py):
the program's own work, which the benchmarks' critical-path bound leaves out. Waiting on a toolkit
call is not in it; what a worker reports is kept within [0, the op's wall time]."""
from __future__ import annotations

import math
import time

import pytest

from sandbox.engine.received import reported_cpu
from test_sandbox_host import kb, session

BUSY_OR_WAITING = kb('''
    def __init__(self, toolkit):
        self.toolkit = toolkit

    def write(self, item, raw_text):
        pass

    def read(self, query):
        if query.text == "busy":
            total = 0
            for i in range(400000):
                total += i % 7
            return str(total)
        return self.toolkit.llm_completion([{"role": "user", "content": "wait"}])
''')


def test_a_read_reports_its_cpu_and_not_its_waiting():
    def slow_llm(messages):
        time.sleep(0.3)
        return "waited"
    with session(BUSY_OR_WAITING, llm=slow_llm) as s:
        s.start()
        busy = s.read({"text": "busy"})
        waiting = s.read({"text": "wait"})
    assert busy.output.isdigit() and waiting.output == "waited"
    assert 0.01 < busy.cpu_s <= busy.seconds            # 400k loop steps under the sandbox's guards
    assert waiting.seconds >= 0.3 and waiting.cpu_s < 0.05


@pytest.mark.parametrize("value, expected", [
    (0.25, 0.25), (0, 0.0), (-1.0, 0.0), (99.0, 0.5), (True, 0.0), ("0.2", 0.0), (None, 0.0),
    (math.nan, 0.0), (math.inf, 0.0), ([0.1], 0.0)])
def test_what_a_worker_reports_is_kept_within_what_is_possible(value, expected):
    assert reported_cpu(value, 0.5) == expected

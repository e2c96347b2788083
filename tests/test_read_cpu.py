"""The CPU a read costs its worker (OpResult.cpu_s -> CaseResult.read_cpu_s -> EvalResult.read_cpu_seconds,
`read_cpu_s` / `child_read_cpu_s` in the lineage's timing): the program's own work, which the
benchmarks' critical-path bound leaves out. Waiting on a toolkit call is not in it; what a worker
reports is kept within [0, the op's wall time]."""
from __future__ import annotations

import json
import math
import time

import pytest

from mstar.cli import main
from mstar.run import events as ev_types
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


def test_the_evaluation_sums_its_reads_cpu_into_the_lineage(tmp_path):
    out = tmp_path / "run"
    assert main(["evolve", "--task", "sample", "--size", "0.3", "--static-size", "6", "--confirm-size", "0",
                 "--quiet", "--iterations", "2", "--out", str(out)]) == 0
    evs = ev_types.read_lineage(out / "lineage.jsonl")
    for e in ev_types.seeds(evs):
        record = json.loads((out / "cases" / f"{e.program_id}.static.json").read_text())
        per_read = [c["read_cpu_s"] for c in record["cases"]]
        assert per_read and all(x >= 0 for x in per_read) and sum(per_read) > 0
        assert record["read_cpu_seconds"] == pytest.approx(sum(per_read), abs=2e-3)
        assert e.timing["read_cpu_s"] == record["read_cpu_seconds"]
    children = [e for e in ev_types.iterations(evs) if e.program_id]
    assert children and all(e.timing["child_read_cpu_s"] >= 0 for e in children)
    for e in children:
        record = json.loads((out / "cases" / f"{e.program_id}.static.json").read_text())
        assert e.timing["child_read_cpu_s"] == record["read_cpu_seconds"]

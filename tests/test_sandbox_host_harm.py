"""Issue 30: what a program can make the engine do for it is bounded, judged from outside.

- finding 6: a toolkit LLM call is bounded in messages and UTF-8 bytes, not only characters;
  135,000 empty messages per call took the checker to a 999 MB peak and a 67 MB report.
Each check runs the real engine (the checker as a subprocess, or a ProgramSession with a real
worker) and measures what a user would: peak RSS, wall time, exit codes, the checker's JSON.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.engine.llm_proxy import LLM_PROMPT_MAX_BYTES, LLM_PROMPT_MAX_CHARS, serve_llm_request
from sandbox.protocol import MAX_LLM_MESSAGES

HERE = Path(__file__).parent
ROOT = HERE.parent

# `python -m sandbox ARGS`, reporting the checker's own peak RSS (the engine side: its workers are
# other processes) on the last line of stderr.
PEAK_RSS = """
import resource, runpy, sys
sys.argv = ["sandbox", *sys.argv[1:]]
try:
    runpy.run_module("sandbox", run_name="__main__")
except SystemExit as exc:
    code = exc.code
finally:
    print(f"PEAK_RSS_MB {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}", file=sys.stderr)
    sys.exit(code if isinstance(code, int) else 1)
"""


def check_with_peak_rss(*args: str, timeout: float = 180) -> tuple[subprocess.CompletedProcess, float]:
    proc = subprocess.run([sys.executable, "-c", PEAK_RSS, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)
    peak = float(proc.stderr.strip().splitlines()[-1].split()[-1])
    return proc, peak


# ------------------------------------------------------------------------ finding 6: prompt size

def test_the_checker_stays_small_when_a_program_sends_135000_empty_messages():
    """Before: every call was served; peak 999 MB, a 67 MB --json report, "many: served"."""
    proc, peak = check_with_peak_rss(str(HERE / "hostile" / "h173_llm_many_empty_messages.py"), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["read_outputs"] and set(report["read_outputs"]) == {"many: ValueError"}
    assert report["llm_calls"] == [] and len(proc.stdout) < 20_000
    assert peak < 150, peak


def test_the_engine_counts_messages_and_bytes_of_what_a_worker_sends():
    """A subverted worker skips its own check; the engine's reply refuses before the provider."""
    served = []

    def llm(messages):
        served.append(messages)
        return "ok"

    many = serve_llm_request(llm, [{"role": "user", "content": ""}] * 135_000, 1, 1, "per read()")
    assert not many["ok"] and f"at most {MAX_LLM_MESSAGES} messages" in many["error"]
    emoji = "\U0001F600" * (LLM_PROMPT_MAX_CHARS // 2)          # 100,000 characters, 400,000 bytes
    wide = serve_llm_request(llm, [{"role": "user", "content": emoji}], 1, 1, "per read()")
    assert not wide["ok"] and f"the {LLM_PROMPT_MAX_BYTES}-byte cap" in wide["error"]
    assert served == []
    fine = serve_llm_request(llm, [{"role": "user", "content": "x" * 100}] * MAX_LLM_MESSAGES, 1, 1, "per read()")
    assert fine == {"op": "llm_reply", "ok": True, "text": "ok"} and len(served[0]) == MAX_LLM_MESSAGES

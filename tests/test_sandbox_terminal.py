"""Text that programs and models wrote reaches a terminal harmlessly (issue 16, finding 3).

`sandbox.engine.terminal.terminal_safe` directly; then every printing path, from outside: the
checker (`python -m sandbox`, a real subprocess) on tests/hostile/h171, which prints escape
sequences into logs, outputs and its error; `mstar show`, `mstar lineage`, `mstar runs` and the
progress lines on a run folder whose commit titles, bodies, errors, answers and sources carry
them; and the HTML report, which must escape markup and show control characters.
"""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mstar.cli import main
from mstar.run import events as ev_types
from mstar.run.progress import ProgressPrinter
from mstar.run.report import build_report
from mstar.run.store import RunStore
from mstar.run.views import RunView
from run_helpers import SEED_A, make_synthetic_run
from sandbox.engine.terminal import terminal_safe

ROOT = Path(__file__).resolve().parent.parent
ESCAPES = Path(__file__).parent / "hostile" / "h171_terminal_escapes.py"
# Characters a terminal acts on; none may reach stdout raw.
RAW = ("\x1b", "\x07", "\x9b", "\r", "\u202e", "\x08", "\x00", "\u200b", "\ufeff", "\U000e006f")
SPOOF = "\x1b[2J\x1b[Hok: True\r\nstage: ok\x1b]0;pwned\x07\x1b]52;c;cm0gLXJmIH4K\x07\x9b2J\u202eexe.txt\x08\x00"
HOSTILE_TITLE = "<script>alert('x')</script> Keep it " + SPOOF


def assert_harmless(text: str) -> None:
    for ch in RAW:
        assert ch not in text, f"{ch!r} reached the output raw"


# ------------------------------------------------------------------------------ the function

@pytest.mark.parametrize("raw,shown", [
    ("\x1b[31mred", "\\x1b[31mred"),
    ("bell\x07", "bell\\x07"),
    ("over\rwrite", "over\\rwrite"),
    ("csi\x9b2J", "csi\\x9b2J"),
    ("del\x7f", "del\\x7f"),
    ("\u202eevil", "\\u202eevil"),
    ("iso\u2066late\u2069", "iso\\u2066late\\u2069"),
    ("sep\u2028line", "sep\\u2028line"),
    ("lone\ud800", "lone\\ud800"),
    ("nul\x00", "nul\\x00"),
    # issue 30: what prints as nothing, so a log reads the same to a person as to the reflector
    ("zero\u200bwidth", "zero\\u200bwidth"),
    ("word\u2060joiner", "word\\u2060joiner"),
    ("\ufeffbom", "\\ufeffbom"),
    ("soft\u00adhyphen", "soft\\xadhyphen"),
    ("tags " + "".join(chr(0xE0000 + ord(c)) for c in "rm -rf"), "tags " + "".join(
        f"\\U{0xE0000 + ord(c):08x}" for c in "rm -rf")),
    ("smuggled\U000e0101", "smuggled\\U000e0101"),
])
def test_terminal_safe_shows_what_a_terminal_would_run(raw, shown):
    assert terminal_safe(raw) == shown
    assert_harmless(terminal_safe(raw))


def test_ordinary_text_in_any_script_passes_unchanged():
    text = "caf\u00e9 \u00fcber \u4e2d\u6587 \u0639\u0631\u0628\u064a \U0001F600 -- ok"
    assert terminal_safe(text) == text


def test_terminal_safe_keeps_ordinary_text():
    text = "Zoë's café, 東京, emoji 🙂, tab\tand\nnewline, a \\x1b literal"
    assert terminal_safe(text) == text
    assert terminal_safe(text, newlines=False) == text.replace("\n", "\\n")
    assert terminal_safe("a\tb", tabs=False) == "a\\tb"
    assert terminal_safe(None) == "None" and terminal_safe(3) == "3"
    print(terminal_safe("lone\ud800"))  # printable: a lone surrogate would make print() raise


# ------------------------------------------------------------------------------ the checker

def run_check(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run([sys.executable, "-m", "sandbox", str(ESCAPES), *args], cwd=ROOT, env=env,
                          capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def checked():
    return {"text": run_check(), "json": run_check("--json")}


def test_checker_text_mode_shows_escapes_and_the_real_verdict(checked):
    proc = checked["text"]
    assert proc.returncode == 1
    out = proc.stdout.decode("utf-8")
    assert_harmless(out)
    lines = out.splitlines()
    assert lines[:2] == ["ok: False", "stage: read"]
    assert lines[2].startswith("error: [read/runtime/exception] line 48: ValueError: \\x1b[2J\\x1b[Hok: True\\r")
    # The only column-0 lines are the checker's own: the program's "stage: ok" is indented or escaped.
    assert [line for line in lines if line.startswith(("ok:", "stage:"))] == ["ok: False", "stage: read"]
    assert ("[write#0] \\x1b]52;c;cm0gLXJmIH4K\\x07\\x9b2J\\u202egnp.exe\\u200b\\U000e006f\\U000e0062\\U000e0065"
            "\\U000e0079\\ufeff") in lines
    assert "[load] \\x1b]0;all gates passed\\x07loaded" in lines
    assert "  \\x1b[2J\\x1b[Hok: True\\r" in lines  # the read output, indented


def test_checker_json_mode_is_ascii_with_every_control_escaped(checked):
    proc = checked["json"]
    assert proc.returncode == 1
    assert_harmless(proc.stdout.decode("utf-8"))
    assert proc.stdout.isascii()
    data = json.loads(proc.stdout)
    assert "\x9b2J\u202egnp.exe" in data["logs"][2] and data["verdict"]["stage"] == "read"


# ------------------------------------------------------------------------------ mstar's CLI

@pytest.fixture
def hostile_run(tmp_path):
    """The synthetic run, with escape sequences wherever a model or a program wrote text."""
    root = make_synthetic_run(tmp_path / "runs" / "syn")
    path = root / "lineage.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for rec in records:
        if rec.get("iteration") == 1:
            rec["title"], rec["body"] = HOSTILE_TITLE, "- line one\n- " + SPOOF
            rec["attempts"][0]["error"] = "gate: " + SPOOF
        if rec.get("iteration") == 3:
            rec["title"] = HOSTILE_TITLE
            rec["attempts"][-1]["error"] = "reply: " + SPOOF
    path.write_text("".join(json.dumps(rec) + "\n" for rec in records))
    store = RunStore(root)
    store.write_program("iter_001", SEED_A.replace("Seed A.", "Seed A. " + SPOOF))
    case = {"query_id": "q1", "question": "Where? " + SPOOF, "expected": "the bakery", "answer": SPOOF,
            "score": 0.0, "category": "single-hop", "error": "read failed: " + SPOOF}
    store.write_cases("iter_001", "static", {"mean_score": 0.0, "cases": [case], "per_category": {}})
    return root


def test_show_renders_hostile_titles_sources_and_cases_harmlessly(hostile_run, capsys):
    assert main(["show", str(hostile_run), "iter_001"]) == 0
    out = capsys.readouterr().out
    assert_harmless(out)
    assert "Title: <script>alert('x')</script> Keep it \\x1b[2J\\x1b[Hok: True\\r\\nstage: ok" in out
    assert '"""Seed A. \\x1b[2J' in out and "answer: \\x1b[2J" in out
    assert main(["show", str(hostile_run), "iter_001", "--json"]) == 0
    raw = capsys.readouterr().out
    assert_harmless(raw) and raw.isascii()
    assert json.loads(raw)["title"] == HOSTILE_TITLE


def test_lineage_renders_hostile_titles_and_errors_harmlessly(hostile_run, capsys):
    assert main(["lineage", str(hostile_run)]) == 0
    out = capsys.readouterr().out
    assert_harmless(out)
    assert "[BEST]  <script>alert('x')</script> Keep it \\x1b[2J" in out
    assert "[FAILED]  <script>" in out and "-- reply: \\x1b[2J" in out
    lines = out.splitlines()   # header + five programs + the test line: no title added a line
    assert len(lines) == 7 and lines[-1].startswith("test iter_001 ")


def test_runs_and_progress_lines_are_harmless(hostile_run, capsys):
    shutil.copytree(hostile_run, hostile_run.parent / "bad\x1b]0;x\x07run")  # a name nobody should print raw
    assert main(["runs", "--runs-dir", str(hostile_run.parent)]) == 0
    out = capsys.readouterr().out
    assert_harmless(out)
    assert "bad\\x1b]0;x\\x07run" in out
    printed = io.StringIO()
    events = [e for e in RunView(hostile_run).events if isinstance(e, (ev_types.SeedEvent, ev_types.IterationEvent))]
    printer = ProgressPrinter(total=4, out=printed)
    for ev in events:
        printer(ev)
    assert_harmless(printed.getvalue())
    assert "<script>alert('x')</script> Keep it \\x1b[2J" in printed.getvalue()


def test_report_escapes_markup_and_shows_control_characters(hostile_run):
    page = build_report(RunView(hostile_run))
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; Keep it \\x1b[2J" in page
    assert_harmless(page.replace("\r\n", "\n"))
    assert "\\x1b]52;c;cm0gLXJmIH4K\\x07" in page  # the clipboard sequence, as text

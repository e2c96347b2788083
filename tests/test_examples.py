"""The examples run as a user runs them: from outside the checkout, as scripts (issue 38)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(script: str, tmp_path: Path) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "MSTAR_"))}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / script), str(tmp_path / "run")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_the_custom_task_example_evolves_exports_and_remembers(tmp_path):
    out = _run("custom_task.py", tmp_path)
    assert "champion " in out and ", test " in out
    assert (tmp_path / "run" / "best.py").exists() and (tmp_path / "run" / "task.json").exists()
    assert "memory says:" in out and "Kakoune" in out.split("memory says:")[1]
    assert len((ROOT / "examples" / "custom_task.py").read_text().splitlines()) <= 40


def test_the_watch_example_sees_every_event_as_it_comes(tmp_path):
    out = _run("watch_run.py", tmp_path)
    lines = out.splitlines()
    assert sum(line.startswith("seed ") for line in lines) == 3
    assert [line.split()[1] for line in lines if line.startswith("iteration")] == ["1", "2", "3", "4"]
    assert any(line.startswith("test ") for line in lines) and "finished: champion" in out
    # the iteration lines came before the end, as they happened (not printed from the folder after)
    assert lines.index(next(line for line in lines if line.startswith("iteration  4"))) < \
        lines.index(next(line for line in lines if line.startswith("finished")))

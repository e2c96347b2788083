"""End-to-end: the main job on the bundled sample task, offline, with real sandbox workers."""
import json
import subprocess
import sys
from pathlib import Path

from mstar.cli import main
from run_helpers import unwrapped

ROOT = Path(__file__).resolve().parents[1]
TIMING_KEYS = {"seconds", "timing"}


def _lineage(run: Path) -> list[dict]:
    events = [json.loads(l) for l in (run / "lineage.jsonl").read_text().splitlines() if l.strip()]
    return [{k: v for k, v in e.items() if k not in TIMING_KEYS} for e in events]


def test_same_seed_gives_identical_lineage_and_a_complete_run_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-that-must-not-leak")
    runs = []
    for name in ("a", "b"):
        out = tmp_path / name
        assert main(["evolve", "--task", "sample", "--iterations", "3", "--seed", "7", "--out", str(out),
                     "--quiet"]) == 0
        runs.append(out)
    first, second = _lineage(runs[0]), _lineage(runs[1])
    assert first == second
    kinds = [e["event"] for e in first]
    assert kinds == ["seed"] * 3 + ["iteration"] * 3 + ["confirmation", "test"]
    run = runs[0]
    for rel in ("config.json", "split.json", "lineage.jsonl", "llm_usage.jsonl", "best_program.py", "summary.json"):
        assert (run / rel).is_file(), rel
    programs = {p.stem for p in (run / "programs").glob("*.py")}
    assert {"seed_vector_search", "seed_llm_summarizer", "seed_experience_learner"} <= programs
    for e in first:
        if e["event"] == "iteration":
            assert {"parent_id", "title", "attempts", "status", "rotating_score", "llm"} <= set(e)
            if e["status"] == "ok":
                assert e["program_id"] in programs
                assert (run / "cases" / f"{e['program_id']}.static.json").is_file()
                assert any("patch" in a for a in e["attempts"])
    summary = json.loads((run / "summary.json").read_text())
    assert (run / "best_program.py").read_text() == (run / "programs" / f"{summary['best_id']}.py").read_text()
    # secrets stay in the environment: nothing in the run folder carries the key
    for path in run.rglob("*"):
        if path.is_file():
            assert "sk-test-secret" not in path.read_text(errors="replace"), path


def summary_test_cases(run, program_id):
    return [c["score"] for c in json.loads((run / "cases" / f"{program_id}.test.json").read_text())["cases"]]


def test_default_sample_run_beats_the_best_seed(tmp_path):
    """The README's main command with its defaults (20 iterations), as a user runs it."""
    out = tmp_path / "default-run"
    proc = subprocess.run([sys.executable, "evolve.py", "--task", "sample", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for role in ("task", "reflector", "toolkit", "judge"):
        assert f"llm     {role}" in proc.stdout and "offline:" in proc.stdout
    assert "iter  20/20" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["best_static"] > summary["best_seed_static"], summary
    assert summary["test_per_category"], "per-category test scores missing"
    # The gain carries over to the held-out test, and the last lines say so with the evidence.
    gain = summary["test_gain"]
    assert gain["low"] > 0 and gain["n"] == len(summary_test_cases(out, summary["best_id"]))
    seed_cases = summary_test_cases(out, summary["best_seed_id"])
    assert abs(sum(seed_cases) / len(seed_cases) - summary["best_seed_test"]) < 1e-9
    line = next(l for l in unwrapped(proc.stdout).splitlines() if l.startswith("test    "))
    assert f"vs best seed {summary['best_seed_id']}" in line and f"{gain['mean']:+.3f}" in line
    assert "the gain holds" in line
    events = _lineage(out)
    assert sum(e["event"] == "iteration" for e in events) == 20

"""Helpers shared by the run-inspection tests: one small real offline run per test session
(made once, reused read-only), lineage comparison without timings, and a synthetic run folder
with every kind of iteration (for tests that need failures and duplicates the offline reflector
rarely produces)."""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path

from mstar.cli import main
from mstar.config import EvolutionConfig, RunConfig
from mstar.run.store import RunStore

# What the resume test kills and resumes, and what the other tests inspect.
SMALL_ARGS = ["--task", "sample", "--iterations", "4", "--static-size", "8", "--seed", "0"]
# Left out when two runs' lineages are compared: how long a step took, and what it spent -- a
# resumed run re-ingests the knowledge bases an uninterrupted run kept alive (mstar.evaluation),
# so its calls differ while every decision and score is the same.
TIMING_KEYS = {"seconds", "timing", "llm"}
_CACHE: dict[str, Path] = {}


def small_run(tmp_path_factory) -> Path:
    """A finished offline run (SMALL_ARGS), made once per session. Copy it before changing it."""
    if "run" not in _CACHE:
        out = tmp_path_factory.mktemp("small-run") / "run"
        with contextlib.redirect_stdout(io.StringIO()):  # keep the callers' captured output their own
            assert main(["evolve", *SMALL_ARGS, "--out", str(out), "--quiet"]) == 0
        _CACHE["run"] = out
    return _CACHE["run"]


def lock_holders(path: Path) -> list[str]:
    """Every live process with `path` open (pid, parent, command line): what an assertion that a
    run's lock is free names when it is not."""
    target, found = str(path.resolve()), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if not any(os.readlink(f"/proc/{pid}/fd/{fd}") == target for fd in fds):
                continue
            status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                          if ":" in line)
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            found.append(f"pid {pid} (parent {status.get('PPid', '?').strip()}): {cmd[:160]}")
        except OSError:   # gone meanwhile, or not ours to read
            continue
    return found


def copy_run(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".lock", "report.html"))
    return dst


def lineage(run: Path) -> list[dict]:
    events = [json.loads(line) for line in (run / "lineage.jsonl").read_text().splitlines() if line.strip()]
    return [{k: v for k, v in e.items() if k not in TIMING_KEYS} for e in events]


# The schema and instructions of the small programs the tests write (each adds its KnowledgeBase).
PROGRAM_HEAD = '''from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Write down the facts."
INSTRUCTION_QUERY = "Ask for the fact."
INSTRUCTION_RESPONSE = "Answer briefly."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    content: str = field(default="", metadata={"description": "facts"})


@dataclass
class Query:
    query_text: str = field(default="", metadata={"description": "what to look up"})
'''

SEED_A = '''"""Seed A."""
''' + PROGRAM_HEAD + '''

class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.items = []

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        self.items.append(raw_text)

    def read(self, query: Query) -> str:
        return "\\n".join(self.items)[:2000]
'''


def make_synthetic_run(root: Path, *, finished: bool = True) -> Path:
    """A run folder written the way the loop writes one: seed_a, an improving child, a
    regressing grandchild, a failed iteration and a duplicate; usage for two roles."""
    store = RunStore(root)
    store.create()
    cfg = RunConfig(name=root.name, seeds=("seed_a",), evolution=EvolutionConfig(iterations=4, static_size=2))
    store.write_config(cfg.to_dict())
    child = SEED_A.replace('[:2000]', '[-2000:]')
    grandchild = child.replace("Answer briefly.", "Answer in one word.")
    rejected = child.replace("def read(self, query: Query) -> str:", "def read(self, query: Query) -> str\n")
    for pid, src in (("seed_a", SEED_A), ("iter_001", child), ("iter_002", grandchild),
                     ("iter_003_rejected", rejected)):
        store.write_program(pid, src)
    cats = {"single-hop": 0.5, "temporal": 0.0}
    llm = {"calls": 3, "prompt_tokens": 300, "completion_tokens": 30}
    events = [
        {"event": "seed", "program_id": "seed_a", "parent_id": None, "iteration": 0, "title": "seed: a",
         "static_score": 0.25, "per_category": cats, "error": None, "llm": llm, "seconds": 1.0},
        {"event": "iteration", "iteration": 1, "parent_id": "seed_a", "parent_static_score": 0.25,
         "rotating_score": 0.4, "failed_case_ids": ["q1"], "title": "Keep the newest text",
         "body": "- the cut dropped new facts\n- read() keeps the tail", "status": "ok",
         "attempts": [{"attempt": 0, "kind": "reflect", "stage": "ok", "gates": {"ok": True, "stage": "ok"}}],
         "program_id": "iter_001", "static_score": 0.5, "per_category": {"single-hop": 1.0, "temporal": 0.0},
         "delta": 0.25, "eval_error": None, "best_static_score": 0.5, "llm": llm, "seconds": 2.0},
        {"event": "iteration", "iteration": 2, "parent_id": "iter_001", "parent_static_score": 0.5,
         "rotating_score": 0.5, "failed_case_ids": [], "title": "One-word answers", "body": "- shorter",
         "status": "ok", "attempts": [{"attempt": 0, "kind": "reflect", "stage": "ok"}],
         "program_id": "iter_002", "static_score": 0.375, "per_category": {"single-hop": 0.75, "temporal": 0.0},
         "delta": -0.125, "eval_error": None, "best_static_score": 0.5, "llm": llm, "seconds": 2.0},
        {"event": "iteration", "iteration": 3, "parent_id": "iter_001", "parent_static_score": 0.5,
         "rotating_score": 0.5, "failed_case_ids": [], "title": "Broken signature", "body": "- oops",
         "status": "failed", "attempts": [
             {"attempt": 0, "kind": "reflect", "stage": "gates", "error": "gate failed at stage 'compile': "
              "SyntaxError: expected ':' (line 27)"},
             {"attempt": 1, "kind": "compile_fix", "stage": "reply", "error": "reply: no patch"}],
         "program_id": None, "static_score": None, "best_static_score": 0.5, "llm": llm, "seconds": 1.0},
        {"event": "iteration", "iteration": 4, "parent_id": "seed_a", "parent_static_score": 0.25,
         "rotating_score": 0.2, "failed_case_ids": [], "title": "Same as before", "body": "",
         "status": "duplicate", "attempts": [{"attempt": 0, "kind": "reflect", "stage": "duplicate",
                                              "error": "the child is identical to a program already in the pool"}],
         "program_id": None, "static_score": None, "best_static_score": 0.5, "llm": llm, "seconds": 1.0},
    ]
    for ev in events:
        store.append_jsonl("lineage.jsonl", ev)
    case = {"query_id": "q1", "question": "Where does Maya work?", "expected": "the bakery",
            "answer": "bakery", "score": 0.8, "category": "single-hop", "error": None}
    store.write_cases("iter_001", "static", {"mean_score": 0.5, "cases": [case], "per_category": cats})
    for role, n in (("task", 5), ("reflector", 2)):
        for _ in range(n):
            store.append_jsonl("llm_usage.jsonl", {"role": role, "model": f"offline-{role}", "backend": "offline",
                                                   "prompt_tokens": 100, "completion_tokens": 10,
                                                   "latency_s": 0.01, "error": None})
    if finished:
        store.write_json("summary.json", {"best_id": "iter_001", "best_static": 0.5, "test_score": 0.4,
                                          "test_per_category": {"single-hop": 0.4}})
        store.write_cases("iter_001", "test", {"mean_score": 0.4, "cases": [case],
                                               "per_category": {"single-hop": 0.4}})
        store.append_jsonl("lineage.jsonl", {"event": "test", "program_id": "iter_001", "test_score": 0.4,
                                             "per_category": {"single-hop": 0.4}, "llm": llm})
    return root


def unwrapped(text: str) -> str:
    """Console output with each wrapped line joined back to one (mstar/run/console.py lays long
    lines out as a first line and indented continuations), for assertions on a line's words."""
    lines: list[str] = []
    for line in text.splitlines():
        if lines and line.startswith(" ") and line.strip():
            lines[-1] += " " + line.strip()
        else:
            lines.append(line)
    return "\n".join(lines)

"""Helpers of the `mstar ui` tests: run folders with cases, timed usage and hostile text, and a
small HTTP client that returns status, headers and body."""
from __future__ import annotations

import hashlib
import http.client
import json
import time
from pathlib import Path
from urllib.parse import urlsplit

from mstar.run.store import RunStore
from run_helpers import make_synthetic_run

# Markup a program or a model could write: a page that rendered it as HTML would run it.
HOSTILE_TITLE = '<img src=x onerror="window.__pwned=1">Fix <b>read</b>'
HOSTILE_BODY = "<script>window.__pwned=2</script>\n- keeps the tail </pre><svg onload=\"window.__pwned=3\">"
HOSTILE_ANSWER = '<iframe src="javascript:window.__pwned=4"></iframe>the bakery'
HOSTILE_RETRIEVED = "Maya works at <a href=\"javascript:window.__pwned=5\">the bakery</a>\u202eevil"
HOSTILE_SOURCE_LINE = "# </pre><script>window.__pwned=6</script><style>body{display:none}</style>"


def case(qid: str, score: float, **kw) -> dict:
    base = {"query_id": qid, "question": f"question {qid}?", "expected": "the bakery", "answer": "bakery",
            "score": score, "category": "single-hop", "error": None, "llm_error": None, "corrupt": False,
            "query": {"query_text": f"lookup {qid}"}, "retrieved": f"retrieved text for {qid}",
            "conversation": [{"role": "user", "content": "prompt"}, {"role": "assistant", "content": "bakery"}],
            "debug_logs": [f"read {qid}"], "warnings": [], "toolkit_calls": 0, "score_details": {}}
    return {**base, **kw}


WRITES = [{"episode_id": "e1", "raw_text": "Maya: I work at the bakery.", "item": {"content": "Maya works at the bakery"},
           "warnings": [], "debug_logs": ["stored 1"], "error": None, "llm_error": None},
          # written early, past the reflector's examples: its item was never asked for (ingest.py)
          {"episode_id": "e2", "raw_text": "Maya: The mill closed.", "item": {"content": ""}, "warnings": [],
           "debug_logs": [], "error": None, "llm_error": None, "early": True, "extracted": False}]


def make_ui_run(root: Path, *, finished: bool = True, calls_at: float | None = None) -> Path:
    """make_synthetic_run, plus static cases for the seed and the child (q1 changed, q2 the same,
    q3 only the child's), an `attribution` on one case, and usage records with times."""
    make_synthetic_run(root, finished=finished)
    store = RunStore(root)
    store.write_cases("seed_a", "static", {"mean_score": 0.25, "writes": WRITES, "per_category": {"single-hop": 0.25},
                                           "cases": [case("q1", 0.0, answer="the mill"), case("q2", 0.5)]})
    store.write_cases("iter_001", "static", {
        "mean_score": 0.75, "writes": WRITES, "per_category": {"single-hop": 0.75},
        "cases": [case("q1", 1.0), case("q2", 0.5, attribution={
                      "label": "not_retrieved", "recall": 0.0, "precision": 0.0,
                      "evidence": [{"id": "D1:3", "episode": "e1", "stored": True, "retrieved": False, "overlap": 0.2,
                                    "text": "<b onmouseover=alert(1)>the fact was not read</b>"}]}),
                  case("q3", 0.0, llm_error="timeout after 3 retries")]})
    t = time.time() if calls_at is None else calls_at
    usage = (root / "llm_usage.jsonl")
    usage.write_text("")          # replace the synthetic records (they carry no times)
    for k in range(30):
        store.append_jsonl("llm_usage.jsonl", {
            "role": "reflector" if k % 10 == 0 else "task", "model": "m", "backend": "openai", "prompt_tokens": 100,
            "completion_tokens": 10, "cost_usd": 0.001, "error": "boom" if k == 29 else None, "retries": 1 if k == 28 else 0,
            "cache_hit": k == 27, "at": t - 118 + k * 4, "scope": "iter_004", "rate_limited": 2 if k == 26 else 0,
            "held_s": 1.5 if k == 26 else 0.0})
    return root


def make_hostile_run(root: Path) -> Path:
    """A run whose model- and program-written text is markup: a child's title, body, source,
    and a case's answer and retrieved text."""
    make_ui_run(root)
    lines = [json.loads(x) for x in (root / "lineage.jsonl").read_text().splitlines() if x.strip()]
    for ev in lines:
        if ev.get("program_id") == "iter_001" and "body" in ev:
            ev["title"], ev["body"] = HOSTILE_TITLE, HOSTILE_BODY
    (root / "lineage.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    src = RunStore(root).read_program("iter_001")
    RunStore(root).write_program("iter_001", src + HOSTILE_SOURCE_LINE + "\n")
    data = RunStore(root).read_cases("iter_001", "static")
    data["cases"][0].update(answer=HOSTILE_ANSWER, retrieved=HOSTILE_RETRIEVED, question=HOSTILE_TITLE)
    RunStore(root).write_cases("iter_001", "static", data)
    return root


def get(url: str, headers: dict | None = None, timeout: float = 30) -> tuple[int, dict, bytes]:
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    try:
        conn.request("GET", u.path + (f"?{u.query}" if u.query else ""), headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def get_json(url: str, **kw):
    status, _, body = get(url, **kw)
    assert status == 200, (status, body[:300])
    return json.loads(body)


def folder_state(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under a folder with its size, modification time and digest."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}

"""The memory X-ray of one evaluation: each case's attribution, and the program's sums.

`attach(...)` runs after the last case of an evaluation (no LLM call, a few ms per case): for
every scored case whose query carries evidence (mstar.tasks.evidence) it sets
`case.attribution` from mstar.evaluation.attribution.attribute, given

  - what the program kept of each evidence episode: its write() inputs that write() reads --
    the raw text, and the extracted item's fields it names (`write_inputs`, from the source). The
    knowledge base itself lives in the sandbox and is not inspected, so "kept" is an upper bound:
    a write() that reads the raw text but stores a tenth of it counts as keeping all of it, and a
    unit it dropped then shows as "not retrieved" rather than "never stored";
  - what read() returned for the case.

`summary(cases)` is what the lineage event, `mstar show`, the report and `mstar eval --json`
show (rendered by mstar.run.xray_text): label counts, evidence recall and precision of the reads,
the mean score of the cases whose evidence was all retrieved -- overall and per category.
"""
from __future__ import annotations

import ast
import functools
import json
from collections import Counter
from typing import Sequence

from mstar.ast_guard import AST_LOCK
from mstar.evaluation.attribution import LABELS, attribute
from mstar.tasks.evidence import PROBLEM_KEY, TEXT_KEY


@functools.lru_cache(maxsize=256)
def write_inputs(source: str) -> tuple[bool, frozenset[str] | None]:
    """(write() reads its raw text, the item fields it reads -- None: it may read them all).
    Anything unusual (no plain `def write(self, item, raw_text)` in KnowledgeBase, the item passed
    on whole) means "may read": the X-ray then errs towards "kept"."""
    try:
        with AST_LOCK:
            tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True, None
    kb = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "KnowledgeBase"), None)
    writes = [n for n in (kb.body if kb else []) if isinstance(n, ast.FunctionDef) and n.name == "write"]
    if len(writes) != 1:
        return True, None
    args = writes[0].args
    params = [*args.posonlyargs, *args.args]
    if args.vararg or args.kwarg or len(params) != 3:
        return True, None
    item, raw = params[1].arg, params[2].arg
    attr_of = {id(n.value): n.attr for n in ast.walk(writes[0]) if isinstance(n, ast.Attribute)}
    fields: set[str] | None = set()
    raw_used = False
    for n in ast.walk(writes[0]):
        if isinstance(n, ast.Name) and n.id == raw:
            raw_used = True
        elif isinstance(n, ast.Name) and n.id == item:
            if id(n) in attr_of and fields is not None:
                fields.add(attr_of[id(n)])
            else:
                fields = None   # the item itself goes somewhere: any field may be kept
    return raw_used, (frozenset(fields) if fields is not None else None)


def kept_text(item: dict, raw_text: str, reads_raw: bool, fields: frozenset[str] | None) -> str:
    """The text a write could have kept: the raw text if write() reads it, and the item's fields it reads."""
    parts = [raw_text] if reads_raw else []
    for name, value in (item or {}).items():
        if fields is None or name in fields:
            parts.append(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    return "\n".join(parts)


def attach(cases: Sequence, queries: Sequence, writes: Sequence, episodes: Sequence, source: str) -> None:
    """Set `attribution` on every scored case whose query carries evidence (module docstring)."""
    if not any(TEXT_KEY in q.meta or PROBLEM_KEY in q.meta for q in queries):
        return
    reads_raw, fields = write_inputs(source)
    texts = {ep.id: ep.text for ep in episodes}
    kept = {w.episode_id: kept_text(w.item, texts.get(w.episode_id, w.raw_text), reads_raw, fields)
            for w in writes}
    everything: list[str] = []   # built once, when a unit names no episode (any episode may say it)
    for case, q in zip(cases, queries):
        if not case.scored or (TEXT_KEY not in q.meta and PROBLEM_KEY not in q.meta):
            continue
        units = q.meta.get(TEXT_KEY) or []
        if any(u.get("episode") is None for u in units) and not everything:
            everything.append("\n".join(kept.values()))
        stored = [kept.get(u["episode"], "") if u.get("episode") is not None else everything[0] for u in units]
        case.attribution = attribute(units, stored, case.retrieved, case.score, q.meta.get(PROBLEM_KEY),
                                     question=q.question, expected=q.answer)


def _block(cases: Sequence) -> dict:
    labels = Counter(c.attribution["label"] for c in cases)
    done = [c for c in cases if c.attribution["label"] != "unattributed"]
    hit = [c for c in done if all(e["retrieved"] for e in c.attribution["evidence"])]

    def mean(values):
        values = list(values)
        return round(sum(values) / len(values), 4) if values else None
    return {"cases": len(cases), "attributed": len(done), "labels": {k: labels.get(k, 0) for k in LABELS},
            "recall": mean(c.attribution["recall"] for c in done),
            "precision": mean(c.attribution["precision"] for c in done),
            "retrieved": len(hit), "score_when_retrieved": mean(c.score for c in hit)}


def summary(cases: Sequence) -> dict | None:
    """The program's X-ray over its scored, attributed cases; None when no case has evidence."""
    att = [c for c in cases if c.scored and getattr(c, "attribution", None)]
    if not att:
        return None
    out = _block(att)
    cats = sorted({str(c.category) for c in att if c.category is not None})
    if len(cats) > 1:
        out["per_category"] = {cat: _block([c for c in att if str(c.category) == cat]) for cat in cats}
    return out

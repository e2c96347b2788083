"""Exact-match finance tasks in ACE's format (Agentic Context Engineering, finance/data/).

Each JSONL line is {"context": <the full prompt>, "target": <answer>}:
- Formula (XBRL formula questions): a number, scored by numeric_match to 2 decimals (the prompt
  asks for 2 decimal places; ACE compares floats). Category = the formula's name, read from the
  prompt's "Use formula <name> to answer" opening.
- FiNER (XBRL tagging): a comma-separated tag list, scored position by position
  (tag_list_match, ACE's accuracy = matched tags / total tags).

--data is a folder or one file. A folder is searched for `<kind>_train*.jsonl` (episodes),
`<kind>_val*.jsonl` (validation) and `<kind>_test*.jsonl` (test); when there is no training
file (FiNER's is absent from ../shared/data/ace_finance) or only one file is given, a seeded
shuffle holds out 40 % of the rows as episodes (and, for a single file, 20 % as test), so
episodes never share a row with the queries. An episode is a solved case: the prompt followed
by its answer.
"""
from __future__ import annotations

import random
import re
from pathlib import Path

from mstar.tasks.metrics import parse_number
from mstar.tasks.io import fail, iter_jsonl, three_way_split
from mstar.tasks.model import Episode, QueryItem, Task, TaskError

SPLIT_SEED = 42
EPISODE_SHARE = 0.4
_FORMULA_RE = re.compile(r"^\s*Use formula (.+?) to answer", re.S)
KINDS = {"formula": "numeric_match", "finer": "tag_list_match"}


def _rows(path: Path, kind: str) -> list[tuple[str, str, str, str | None]]:
    """(id, context, target, category) per line, validated."""
    out = []
    for n, obj in iter_jsonl(path, f"{kind} JSONL file"):
        context, target = obj.get("context"), obj.get("target")
        if not isinstance(context, str) or not context.strip():
            raise fail(str(path), f"line {n}", "missing 'context' string (the prompt)")
        if isinstance(target, bool) or not isinstance(target, (str, int, float)) or not str(target).strip():
            raise fail(str(path), f"line {n}", f"'target' must be a non-empty string or number, got {target!r:.40}")
        target = str(target).strip()
        if kind == "formula" and parse_number(target) is None:
            raise fail(str(path), f"line {n}", f"Formula 'target' must be a number, got {target!r:.40}")
        m = _FORMULA_RE.match(context) if kind == "formula" else None
        out.append((f"{path.stem}:{n}", context, target, m.group(1).strip() if m else None))
    return out


def _episode(row) -> Episode:
    row_id, context, target, category = row
    return Episode(row_id, f"{context.rstrip()} {target}", {"category": category})


def _query(row) -> QueryItem:
    row_id, context, target, category = row
    return QueryItem(row_id, context, target, category)


def _find(folder: Path, kind: str, part: str) -> Path | None:
    found = sorted(folder.glob(f"{kind}_{part}*.jsonl"))
    if len(found) > 1:
        raise TaskError(f"{folder}: several {kind} {part} files ({', '.join(p.name for p in found)}); "
                        f"keep one or pass the file itself as --data")
    return found[0] if found else None


def _shuffled(rows: list) -> list:
    rows = list(rows)
    random.Random(SPLIT_SEED).shuffle(rows)
    return rows


def load_finance(kind: str, data: str | None) -> Task:
    if kind not in KINDS:
        raise TaskError(f"unknown finance task {kind!r}; known: {', '.join(KINDS)}")
    if not data:
        raise TaskError(f"task {kind!r} needs --data: a folder with {kind}_train/val/test*.jsonl "
                        f"(e.g. ../shared/data/ace_finance) or one {kind} JSONL file")
    path = Path(data)
    if path.is_dir():
        train_file, val_file, test_file = (_find(path, kind, p) for p in ("train", "val", "test"))
        if val_file is None:
            raise TaskError(f"{path}: no {kind}_val*.jsonl file (validation queries are required)")
        val = _rows(val_file, kind)
        test = _rows(test_file, kind) if test_file else []
        if train_file is not None:
            train = _rows(train_file, kind)
            origin = f"{train_file.name} / {val_file.name} / {test_file.name if test_file else 'no test file'}"
        else:
            val = _shuffled(val)
            cut = int(EPISODE_SHARE * len(val)) if len(val) > 1 else 0
            train, val = val[:cut], val[cut:]
            origin = f"{val_file.name} ({cut} rows held out as episodes: no training file)"
    else:
        rows = _shuffled(_rows(path, kind))
        n_ep, n_val, _ = three_way_split(len(rows), EPISODE_SHARE, 0.2)
        train, val, test = rows[:n_ep], rows[n_ep:n_ep + n_val], rows[n_ep + n_val:]
        origin = f"{path.name} (split {len(train)}/{len(val)}/{len(test)})"
    if not train:
        raise TaskError(f"{path}: too few rows to hold any out as episodes")
    ids = [r[0] for r in train + val + test]
    if len(ids) != len(set(ids)):
        raise TaskError(f"{path}: the same file is used for two parts of the task")
    return Task(kind, tuple(_episode(r) for r in train), tuple(_query(r) for r in val),
                tuple(_query(r) for r in test), KINDS[kind],
                f"ACE {kind} from {origin}: {len(train)} solved cases as episodes, "
                f"{len(val)} validation / {len(test)} test queries ({KINDS[kind]}).")


def load_formula(data: str | None) -> Task:
    return load_finance("formula", data)


def load_finer(data: str | None) -> Task:
    return load_finance("finer", data)

"""Users' own data: an episodes JSONL file and a queries JSONL file, optionally described in TOML.

    episodes.jsonl   one episode per line: {"text": str, "id": str?, "meta": {...}?}
    queries.jsonl    one query per line:   {"question": str, "answer": str | number,
                                            "id": str?, "category": str | int | null?,
                                            "split": "validation" | "test"?,   (default validation)
                                            "rubric": [{"criterion": str, "points": number}]?,
                                            "evidence": str | [str | {"text", "episode"?}]?,
                                            "meta": {...}?}
    test.jsonl       optional: more queries, all of them test

Ids default to "e<line>" / "q<line>". With metric "rubric" a query needs "rubric" and may omit
"answer". `--task jsonl --data DIR` reads DIR/episodes.jsonl, DIR/queries.jsonl and, if present,
DIR/test.jsonl (and DIR/task.toml when it exists). A TOML description (`--task my_task.toml`, or
`--task jsonl --data my_task.toml`) names the files, relative to itself, and the metric:

    name = "support-tickets"
    description = "Tickets and their resolutions"
    metric = "token_f1"          # token_f1 exact_match numeric_match tag_list_match llm_judge rubric
    episodes = "episodes.jsonl"
    queries = "queries.jsonl"
    test = "test.jsonl"          # optional
    train_ratio = 5              # optional: training episodes = ratio × static items; 0 = all
"""
from __future__ import annotations

import tomllib
from pathlib import Path

from mstar.tasks import evidence
from mstar.tasks.io import (answer_text, category_text, fail, iter_jsonl, optional_meta, read_text,
                            required_str)
from mstar.tasks.model import Episode, QueryItem, Task, TaskError, gold_problem, metric_names

TOML_KEYS = {"name", "description", "metric", "episodes", "queries", "test", "train_ratio"}


def _new_id(item_id: str, seen: dict[str, str], source: str, where: str) -> str:
    if item_id in seen:
        raise fail(source, where, f"duplicate id {item_id!r} (first at {seen[item_id]})")
    seen[item_id] = f"{source} {where}"
    return item_id


def read_episodes(path: Path) -> list[Episode]:
    out, seen = [], {}
    for n, obj in iter_jsonl(path, "episodes file"):
        where = f"line {n}"
        item_id = required_str(obj, "id", str(path), where) if "id" in obj else f"e{n}"
        _new_id(item_id, seen, str(path), where)
        out.append(Episode(item_id, required_str(obj, "text", str(path), where), optional_meta(obj, str(path), where)))
    return out


def read_queries(path: Path, metric: str, default_split: str = "validation", seen: dict | None = None
                 ) -> tuple[list[QueryItem], list[QueryItem]]:
    """(validation, test) queries of one file; `seen` carries ids across files."""
    parts: dict[str, list[QueryItem]] = {"validation": [], "test": []}
    source = str(path)
    seen = {} if seen is None else seen
    for n, obj in iter_jsonl(path, "queries file"):
        where = f"line {n}"
        item_id = required_str(obj, "id", source, where) if "id" in obj else f"q{n}"
        _new_id(item_id, seen, source, where)
        question = required_str(obj, "question", source, where)
        meta = dict(optional_meta(obj, source, where))
        if "rubric" in obj:
            meta["rubric"] = obj["rubric"]
        if "evidence" in obj:   # what the answer rests on, for the memory X-ray (mstar.tasks.evidence)
            try:
                meta = evidence.with_evidence(meta, *evidence.parse_evidence(obj["evidence"], where))
            except ValueError as exc:
                raise fail(source, where, str(exc).removeprefix(f"{where}: ")) from None
        answer = "" if metric == "rubric" and "answer" not in obj else answer_text(obj, source, where)
        split = obj.get("split", default_split)
        if split not in parts:
            raise fail(source, where, f"'split' must be 'validation' or 'test', got {split!r:.30}")
        item = QueryItem(item_id, question, answer, category_text(obj, source, where), meta)
        problem = gold_problem(metric, item)   # the metric's own check, located by line
        if problem:
            raise fail(source, where, problem)
        parts[split].append(item)
    return parts["validation"], parts["test"]


def build_task(name: str, episodes_path: Path, queries_path: Path, test_path: Path | None, *,
               metric: str = "token_f1", description: str = "", train_ratio: int | None = None) -> Task:
    if metric not in metric_names():
        raise TaskError(f"{queries_path}: unknown metric {metric!r}; known metrics: {', '.join(metric_names())}")
    episodes = read_episodes(episodes_path)
    seen: dict[str, str] = {}
    validation, test = read_queries(queries_path, metric, seen=seen)
    if test_path is not None:
        test += read_queries(test_path, metric, default_split="test", seen=seen)[1]
    known = {ep.id for ep in episodes}
    validation, test = evidence.check_episodes(validation, known), evidence.check_episodes(test, known)
    if not validation:
        raise TaskError(f"{queries_path}: no validation queries (every line has \"split\": \"test\")")
    return Task(name, tuple(episodes), tuple(validation), tuple(test), metric,
                description or f"{len(episodes)} episodes from {episodes_path.name}, {len(validation)} "
                               f"validation / {len(test)} test queries from {queries_path.name}",
                train_ratio)


def load_toml_task(path: str | Path) -> Task:
    path = Path(path)
    try:
        spec = tomllib.loads(read_text(path, "task description (TOML)"))
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(spec) - TOML_KEYS)
    if unknown:
        raise TaskError(f"{path}: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(TOML_KEYS))}")
    for key in ("episodes", "queries"):
        if not isinstance(spec.get(key), str) or not spec[key]:
            raise TaskError(f"{path}: '{key}' must name a JSONL file (relative to {path.name})")
    for key in ("name", "description", "metric", "test"):
        if key in spec and not isinstance(spec[key], str):
            raise TaskError(f"{path}: '{key}' must be a string")
    ratio = spec.get("train_ratio")
    if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, int) or ratio < 0):
        raise TaskError(f"{path}: 'train_ratio' must be a non-negative integer, got {ratio!r}")
    base = path.parent
    return build_task(spec.get("name", path.stem), base / spec["episodes"], base / spec["queries"],
                      base / spec["test"] if spec.get("test") else None, metric=spec.get("metric", "token_f1"),
                      description=spec.get("description", ""), train_ratio=ratio)


def load_jsonl_task(data: str | None) -> Task:
    if not data:
        raise TaskError("task 'jsonl' needs --data: a folder with episodes.jsonl and queries.jsonl, "
                        "or a task description .toml")
    path = Path(data)
    if path.suffix == ".toml":
        return load_toml_task(path)
    if not path.is_dir():
        raise TaskError(f"{path}: expected a folder (with episodes.jsonl and queries.jsonl) or a .toml file")
    if (path / "task.toml").exists():
        return load_toml_task(path / "task.toml")
    test = path / "test.jsonl"
    return build_task(path.name, path / "episodes.jsonl", path / "queries.jsonl", test if test.exists() else None)

"""Rubric tasks: HealthBench and PRBench rows (JSONL) scored by a judge, one call per criterion.

Neither benchmark has a training split, so (as in the paper, Appendix B) each file is shuffled
once with a fixed seed and cut into a held-out episode pool and disjoint validation and test
queries. The shares reproduce the paper's Table 5 sizes: HealthBench 54 % episodes, 21 % test
(at most 100) -> 257/120/100 of the 477 health_data_tasks rows and 260/122/100 of the 482
emergency_referrals rows; PRBench 40 % episodes, 20 % test (at most 50) -> 100/100/50 of 250
legal rows and 120/130/50 of 300 finance rows.

The question the agent answers is the conversation itself, rendered "role: content" per turn;
an episode is a held-out row's conversation followed by its reference reply when the row has
one. Queries carry meta["rubric"] = [{"criterion", "points", ...}] and meta["messages"] (the
judge sees the real turns plus the agent's reply as the last assistant turn). The `answer` of a
rubric query is the rubric as text, which is what the reflector is shown as "expected".

HealthBench row: {"prompt": [{"role", "content"}...], "rubrics": [{"criterion", "points",
"tags"}...], "example_tags": ["theme:emergency_referrals", ...], "prompt_id",
"ideal_completions_data": {"ideal_completion": str} | null}. Category = theme. `theme=` keeps
one theme's rows (e.g. emergency_referrals, health_data_tasks).

PRBench row (the Hugging Face ScaleAI/PRBench schema): {"task", "field", "topic", "turns",
"prompt_0", "response_0", "reference_texts_0", "prompt_1", ..., "rubric": [{"id", "title",
"annotations": {"weight_class": "critically important", "critically_important_weight": 9,
"criteria_description", ...}}...]}. The criterion text is the item's `title` and its points the
field its weight_class names (classes with "detrimental" count negative). Category = field
(finance / legal); `theme=` keeps one field. Hard items (`"is_hard": true`, or `"split"` of
finance_hard / legal_hard) are excluded, as in the paper.
"""
from __future__ import annotations

import random
from pathlib import Path

from mstar.tasks.judging import render_conversation
from mstar.tasks.io import fail, iter_jsonl, three_way_split
from mstar.tasks.model import Episode, QueryItem, Task, TaskError

SPLIT_SEED = 42
ROLES = ("system", "developer", "user", "assistant")


def rubric_as_text(criteria: list[dict]) -> str:
    return "\n".join(f"[{c['points']:+g}] {c['criterion']}" for c in criteria)


class _Row:
    """What both formats reduce to."""

    def __init__(self, row_id: str, messages: list[dict], reference: str, criteria: list[dict],
                 category: str | None, line: int, extra: dict):
        self.id, self.messages, self.reference = row_id, messages, reference
        self.criteria, self.category, self.line, self.extra = criteria, category, line, extra

    def episode(self) -> Episode:
        text = render_conversation(self.messages)
        if self.reference:
            text += f"\n\nReference reply:\n{self.reference.strip()}"
        return Episode(self.id, text, {"category": self.category, "line": self.line, **self.extra})

    def query(self) -> QueryItem:
        return QueryItem(self.id, render_conversation(self.messages), rubric_as_text(self.criteria),
                         self.category, {"rubric": self.criteria, "messages": self.messages,
                                         "line": self.line, **self.extra})


# ------------------------------------------------------------------------------ HealthBench

def _messages(value, source: str, where: str) -> list[dict]:
    if not isinstance(value, list) or not value:
        raise fail(source, where, "'prompt' must be a non-empty list of {role, content} messages")
    out = []
    for i, m in enumerate(value):
        if not (isinstance(m, dict) and m.get("role") in ROLES and isinstance(m.get("content"), str)):
            raise fail(source, where, f"prompt[{i}] must be {{'role': one of {', '.join(ROLES)}, "
                                      f"'content': str}}, got {m!r:.80}")
        out.append({"role": m["role"], "content": m["content"]})
    return out


def _healthbench_row(n: int, obj: dict, source: str) -> _Row:
    where = f"line {n}"
    messages = _messages(obj.get("prompt"), source, where)
    rubrics = obj.get("rubrics")
    if not isinstance(rubrics, list) or not rubrics:
        raise fail(source, where, "'rubrics' must be a non-empty list of {criterion, points}")
    criteria = []
    for i, r in enumerate(rubrics):
        if not (isinstance(r, dict) and isinstance(r.get("criterion"), str) and r["criterion"].strip()):
            raise fail(source, where, f"rubrics[{i}] needs a non-empty 'criterion' string")
        points = r.get("points")
        if isinstance(points, bool) or not isinstance(points, (int, float)):
            raise fail(source, where, f"rubrics[{i}] needs numeric 'points', got {points!r}")
        if points:   # a 0-point criterion cannot change the score: no judge call for it
            criteria.append({"criterion": r["criterion"].strip(), "points": points,
                             "tags": [t for t in r.get("tags") or [] if isinstance(t, str)]})
    tags = obj.get("example_tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise fail(source, where, "'example_tags' must be a list of strings")
    themes = [t.split(":", 1)[1] for t in tags if t.startswith("theme:")]
    ideal = obj.get("ideal_completions_data")
    if ideal is not None and not (isinstance(ideal, dict) and isinstance(ideal.get("ideal_completion", ""), str)):
        raise fail(source, where, "'ideal_completions_data' must be null or {'ideal_completion': str}")
    row_id = obj.get("prompt_id")
    if row_id is not None and (not isinstance(row_id, str) or not row_id):
        raise fail(source, where, "'prompt_id' must be a non-empty string")
    return _Row(row_id or f"line{n}", messages, (ideal or {}).get("ideal_completion", ""), criteria,
                themes[0] if themes else None, n, {"example_tags": tags})


# ------------------------------------------------------------------------------ PRBench

def _weight(item: dict, source: str, where: str) -> float:
    ann = item.get("annotations", item)   # the HF rows nest the weights under "annotations"
    if not isinstance(ann, dict):
        raise fail(source, where, "'annotations' must be an object")
    cls = ann.get("weight_class")
    if not isinstance(cls, str) or not cls.strip():
        raise fail(source, where, "missing 'weight_class' (e.g. 'critically important')")
    key = "_".join(cls.strip().lower().replace("-", " ").split()) + "_weight"
    value = ann.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(source, where, f"weight_class {cls!r} names the field {key!r}, which is "
                                  f"{'missing' if value is None else f'not a number ({value!r:.30})'}")
    # Detrimental classes subtract whatever sign the file stores them with.
    return -abs(value) if "detrimental" in key else value


def _prbench_messages(obj: dict, source: str, where: str) -> tuple[list[dict], str]:
    messages: list[dict] = []
    i = 0
    while f"prompt_{i}" in obj or f"response_{i}" in obj:
        prompt, response = obj.get(f"prompt_{i}"), obj.get(f"response_{i}")
        refs = obj.get(f"reference_texts_{i}") or []
        if not isinstance(refs, list) or not all(isinstance(r, str) for r in refs):
            raise fail(source, where, f"'reference_texts_{i}' must be a list of strings")
        for key, value in ((f"prompt_{i}", prompt), (f"response_{i}", response)):
            if value is not None and not isinstance(value, str):
                raise fail(source, where, f"'{key}' must be a string or null")
        if prompt and prompt.strip():
            body = prompt.strip()
            if any(r.strip() for r in refs):
                docs = "\n\n".join(f"[{k + 1}] {r.strip()}" for k, r in enumerate(refs) if r.strip())
                body = f"Reference texts:\n{docs}\n\n{body}"
            messages.append({"role": "user", "content": body})
        if response and response.strip():
            messages.append({"role": "assistant", "content": response.strip()})
        i += 1
    if not messages or messages[0]["role"] != "user":
        raise fail(source, where, "no 'prompt_0': a PRBench row needs at least one prompt")
    # A reply to the last prompt is the expert's reference, not part of the question.
    reference = messages.pop()["content"] if messages[-1]["role"] == "assistant" else ""
    return messages, reference


def _prbench_row(n: int, obj: dict, source: str) -> _Row | None:
    where = f"line {n}"
    if obj.get("is_hard") is True or str(obj.get("split", "")).endswith("_hard"):
        return None
    messages, reference = _prbench_messages(obj, source, where)
    rubric = obj.get("rubric")
    if not isinstance(rubric, list) or not rubric:
        raise fail(source, where, "'rubric' must be a non-empty list of items")
    criteria = []
    for i, item in enumerate(rubric):
        if not isinstance(item, dict):
            raise fail(source, where, f"rubric[{i}] must be an object")
        title = item.get("title")
        if not isinstance(title, str) or not title.strip():
            raise fail(source, where, f"rubric[{i}] needs a non-empty 'title' (the criterion text)")
        points = _weight(item, source, f"{where}: rubric[{i}]")
        if points:
            criteria.append({"criterion": title.strip(), "points": points, "id": item.get("id")})
    field = obj.get("field")
    if field is not None and not isinstance(field, str):
        raise fail(source, where, "'field' must be a string (Finance / Legal)")
    row_id = obj.get("task", obj.get("id"))
    if row_id is not None and (not isinstance(row_id, str) or not row_id):
        raise fail(source, where, "'task' (the row id) must be a non-empty string")
    return _Row(row_id or f"line{n}", messages, reference, criteria, field.strip().lower() if field else None,
                n, {"topic": obj.get("topic")})


# ------------------------------------------------------------------------------ shared

def _build(name: str, data: str | None, theme: str | None, parse, shares: tuple[float, float, int],
           what: str) -> Task:
    if not data:
        raise TaskError(f"task {name!r} needs --data PATH to a {what} JSONL file")
    source = str(Path(data))
    rows, ids = [], {}
    for n, obj in iter_jsonl(data, f"{what} JSONL file"):
        row = parse(n, obj, source)
        if row is None:
            continue
        if row.id in ids:
            raise fail(source, f"line {n}", f"duplicate id {row.id!r} (first on line {ids[row.id]})")
        if not any(c["points"] > 0 for c in row.criteria):
            raise fail(source, f"line {n}", "no rubric criterion has positive points; nothing can be earned")
        ids[row.id] = n
        rows.append(row)
    if theme:
        present = sorted({r.category for r in rows if r.category})
        rows = [r for r in rows if r.category == theme.strip().lower() or r.category == theme.strip()]
        if not rows:
            raise TaskError(f"{source}: no rows with theme {theme!r}; themes present: {', '.join(present) or 'none'}")
    if len(rows) < 2:
        raise TaskError(f"{source}: {len(rows)} usable rows; a rubric task needs at least 2 "
                        "(episodes and validation queries are disjoint rows)")
    random.Random(SPLIT_SEED).shuffle(rows)
    n_ep, n_val, n_test = three_way_split(len(rows), shares[0], shares[1], shares[2])
    episodes = tuple(r.episode() for r in rows[:n_ep])
    validation = tuple(r.query() for r in rows[n_ep:n_ep + n_val])
    test = tuple(r.query() for r in rows[n_ep + n_val:])
    label = f"{name}-{theme}" if theme else name
    return Task(label, episodes, validation, test, "rubric",
                f"{what} rows from {Path(data).name}{f' (theme {theme})' if theme else ''}: "
                f"{n_ep} held-out rows as episodes, {n_val} validation / {n_test} test queries, "
                f"rubric score by a judge call per criterion.")


def load_healthbench(data: str | None, theme: str | None = None) -> Task:
    return _build("healthbench", data, theme, _healthbench_row, (0.54, 0.21, 100), "HealthBench")


def load_prbench(data: str | None, theme: str | None = None) -> Task:
    return _build("prbench", data, theme, _prbench_row, (0.40, 0.20, 50), "PRBench")

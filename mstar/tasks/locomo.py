"""LoCoMo (`locomo10.json`, Maharana et al. 2024) as a task, with M*'s split reproduced exactly.

Episodes: every `session_<n>` of every conversation (iterating the session lists, not the
`session_<n>_date_time` keys: conv-26 has dates for sessions that have no turns), rendered in
the episode format the offline agent reads:

    [1:56 pm on 8 May, 2023] Session 1 — Caroline and Melanie
    Caroline: Hey Mel! Good to see you! ...
    Melanie: ... [shares a photo of a painting of a sunset over a lake]

A turn that shared an image ends with its BLIP caption in brackets, as LoCoMo's own evaluation
code appends "and shared <caption>": the caption is often the only place the fact is stated.
Turn texts are put on one line (37 turns contain newlines).

Queries: QA categories 1–4 (5 = adversarial/unanswerable, excluded as in the paper), named as in
the paper's Table 12: 1 single-hop, 2 temporal, 3 causal, 4 open-domain (its 100 test questions:
18 / 18 / 9 / 55). LoCoMo's own task_eval/evaluation.py names the numbers differently -- 1
multi-hop, 2 temporal, 3 open-domain, 4 single-hop -- see docs/tasks.md; the upstream number is
kept in each query's meta["category_id"]. Integer answers (2022, 3) become strings. Evidence
ids are normalised leniently ("D8:6; D9:17" -> two ids, "D:11:26" -> "D11:26", a bare "D" is
dropped) because six upstream entries are malformed. Each id is resolved to the text of its turn
(meta["evidence_text"], for the memory X-ray: mstar.tasks.evidence); a question whose evidence
names no turn or is empty (7 of 1,540) is "unattributed" (meta["evidence_problem"]).

Split (M*, load_locomo(seed=42) + split_val_test(test_size=100, seed=42)): the 10 conversations
are shuffled with random.Random(42); all 272 sessions are training episodes in that order; the
1,540 QA pairs are collected in that order, shuffled with a fresh random.Random(42), and the
last 100 are the test set, the first 1,440 validation. `train_ratio=0`: the paper wrote every
session into memory, so facility location is skipped.
"""
from __future__ import annotations

import random
import re
from pathlib import Path

from mstar.tasks import evidence
from mstar.tasks.io import fail, read_json
from mstar.tasks.model import Episode, QueryItem, Task, TaskError

# The paper's names (Table 12). LoCoMo's evaluation code calls 1 multi-hop, 3 open-domain and
# 4 single-hop; UPSTREAM_NAMES keeps that reading for reference.
CATEGORY_NAMES = {1: "single-hop", 2: "temporal", 3: "causal", 4: "open-domain"}
UPSTREAM_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
SPLIT_SEED = 42
TEST_SIZE = 100
_SESSION_RE = re.compile(r"^session_(\d+)$")
_EVIDENCE_RE = re.compile(r"D\s*:?\s*(\d+)\s*:\s*(\d+)")


def turn_line(turn: dict) -> str:
    """One turn as the episode shows it: speaker, text on one line, the image caption in brackets."""
    text = " ".join(str(turn["text"]).split())
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        text = f"{text} [shares {' '.join(caption.split())}]"
    return f"{turn['speaker']}: {text}"


def session_text(number: int, date_time: str, speakers: tuple[str, str], turns: list[dict]) -> str:
    lines = [f"[{date_time.strip()}] Session {number} — {speakers[0]} and {speakers[1]}"]
    lines += [turn_line(turn) for turn in turns]
    return "\n".join(lines)


def normalise_evidence(raw) -> tuple[list[str], list[str]]:
    """(dialogue ids like "D8:6", entries that held none) from an upstream evidence value."""
    entries = raw if isinstance(raw, list) else [raw]
    ids, dropped = [], []
    for entry in entries:
        found = [f"D{a}:{b}" for a, b in _EVIDENCE_RE.findall(str(entry))]
        ids += found
        if not found:
            dropped.append(str(entry))
    return ids, dropped


def _conversation(sample: dict, source: str, where: str) -> tuple[str, list[Episode], dict]:
    sample_id = sample.get("sample_id")
    if not isinstance(sample_id, str) or not sample_id:
        raise fail(source, where, "missing 'sample_id' string")
    conv = sample.get("conversation")
    if not isinstance(conv, dict):
        raise fail(source, f"{where} ({sample_id})", "missing 'conversation' object")
    speakers = (conv.get("speaker_a"), conv.get("speaker_b"))
    if not all(isinstance(s, str) and s for s in speakers):
        raise fail(source, f"{sample_id}.conversation", "needs 'speaker_a' and 'speaker_b' strings")
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION_RE.match(k)))
    if not numbers:
        raise fail(source, f"{sample_id}.conversation", "has no 'session_<n>' lists")
    episodes, turn_at = [], {}
    for n in numbers:
        key = f"session_{n}"
        turns, date_time = conv[key], conv.get(f"{key}_date_time")
        if not isinstance(turns, list) or not turns:
            raise fail(source, f"{sample_id}.{key}", "must be a non-empty list of turns")
        if not isinstance(date_time, str) or not date_time.strip():
            raise fail(source, f"{sample_id}.{key}_date_time", "missing: every session needs its date and time")
        for i, turn in enumerate(turns):
            if not (isinstance(turn, dict) and isinstance(turn.get("speaker"), str)
                    and isinstance(turn.get("text"), str)):
                raise fail(source, f"{sample_id}.{key}[{i}]", "a turn needs 'speaker' and 'text' strings")
        episodes.append(Episode(f"{sample_id}/{key}", session_text(n, date_time, speakers, turns),
                                {"sample_id": sample_id, "session": n, "date_time": date_time.strip(),
                                 "speakers": list(speakers)}))
        # Dialogue ids are D<session>:<turn>, turns counted from 1 (checked on all 5,882 turns).
        turn_at.update({(n, i): (f"{sample_id}/{key}", turn_line(t)) for i, t in enumerate(turns, 1)})
    return sample_id, episodes, turn_at


def _evidence(ids: list[str], dropped: list[str], turn_at: dict) -> tuple[list[dict], list[str]]:
    """The turns the evidence ids name, as units for the memory X-ray (mstar.tasks.evidence);
    an id naming no turn (9 upstream entries do, e.g. "D10:19" in conv-42) is a problem."""
    units, problems = [], [f"evidence entry {d!r} holds no dialogue id" for d in dropped]
    for uid in ids:
        session, turn = (int(x) for x in uid[1:].split(":"))
        if (session, turn) not in turn_at:
            problems.append(f"evidence id {uid} names no turn")
            continue
        episode, text = turn_at[(session, turn)]
        units.append(evidence.unit(uid, text, episode))
    return units, problems


def _queries(sample: dict, sample_id: str, source: str, turn_at: dict) -> list[QueryItem]:
    qa = sample.get("qa")
    if not isinstance(qa, list):
        raise fail(source, sample_id, "missing 'qa' list")
    out = []
    for i, q in enumerate(qa):
        where = f"{sample_id}.qa[{i}]"
        if not isinstance(q, dict):
            raise fail(source, where, f"expected an object, got {type(q).__name__}")
        cat = q.get("category")
        if isinstance(cat, bool) or not isinstance(cat, int):
            raise fail(source, where, f"'category' must be an integer 1-5, got {cat!r}")
        if cat not in CATEGORY_NAMES:
            continue   # 5 (adversarial) is excluded; its rows often have no 'answer' at all
        question, answer = q.get("question"), q.get("answer")
        if not isinstance(question, str) or not question.strip():
            raise fail(source, where, "missing 'question' string")
        if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
            raise fail(source, where, f"'answer' must be a string or number, got {answer!r:.40}")
        ids, dropped = normalise_evidence(q.get("evidence", []))
        meta = {"sample_id": sample_id, "qa_index": i, "category_id": cat, "evidence": ids,
                "evidence_sessions": [f"{sample_id}/session_{n}"
                                      for n in sorted({int(e[1:].split(":")[0]) for e in ids})]}
        if dropped:
            meta["evidence_unparsed"] = dropped
        meta = evidence.with_evidence(meta, *_evidence(ids, dropped, turn_at))
        out.append(QueryItem(f"{sample_id}/qa{i}", question, str(answer), CATEGORY_NAMES[cat], meta))
    return out


def load_locomo(data: str | None) -> Task:
    if not data:
        raise TaskError("task 'locomo' needs --data PATH to locomo10.json "
                        "(e.g. ../shared/data/locomo/locomo10.json)")
    path = Path(data)
    if path.is_dir() and (path / "locomo10.json").is_file():  # the dataset's folder, as shipped
        path = path / "locomo10.json"
    source = str(path)
    samples = read_json(path, "LoCoMo file (locomo10.json)")
    if not isinstance(samples, list) or not samples:
        raise TaskError(f"{source}: top level must be a non-empty list of conversations, "
                        f"got {type(samples).__name__}")
    for i, s in enumerate(samples):
        if not isinstance(s, dict):
            raise fail(source, f"[{i}]", f"expected a conversation object, got {type(s).__name__}")
    # shuffle() permutes by length and RNG state only, so shuffling (index, sample) pairs gives
    # M*'s conversation order while keeping each file position for error messages.
    order = list(enumerate(samples))
    random.Random(SPLIT_SEED).shuffle(order)
    episodes: list[Episode] = []
    queries: list[QueryItem] = []
    seen: set[str] = set()
    for position, sample in order:
        sample_id, eps, turn_at = _conversation(sample, source, f"[{position}]")
        if sample_id in seen:
            raise fail(source, sample_id, "duplicate sample_id")
        seen.add(sample_id)
        episodes += eps
        queries += _queries(sample, sample_id, source, turn_at)
    if len(queries) < 2:
        raise TaskError(f"{source}: only {len(queries)} QA pairs in categories 1-4; a task needs validation queries")
    random.Random(SPLIT_SEED).shuffle(queries)
    n_test = min(TEST_SIZE, len(queries) // 2)
    validation, test = queries[:len(queries) - n_test], queries[len(queries) - n_test:]
    return Task("locomo", tuple(episodes), tuple(validation), tuple(test), "token_f1",
                f"LoCoMo from {path.name}: {len(order)} conversations, {len(episodes)} sessions as "
                f"episodes, {len(validation)} validation / {len(test)} test QA (categories 1-4).",
                train_ratio=0)

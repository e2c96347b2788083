"""Offline task agent: answers the three task-agent prompts of mstar.agent without an LLM.

It reads the `<task>` tag and serves:
- extract_knowledge_item — one JSON object filling the `<schema>` from the `<text>`; each field
  is filled according to what its name (else its description) says it holds, see `field_kind`;
- formulate_query — one JSON object filling the Query schema from the `<question>`;
- answer — an extractive answer from `<retrieved_memory>` (see `answer`).
- act — one command of an interactive game (mstar.interactive), see mstar/offline/act_policy.py.

The answerer (measured in /work/shared/notes/offline-agent.md) picks the memory sentence sharing
most of the question's content words (rarer words break ties); a when-question gets a date (one
written there, "in 2019", else its session date: the year or "Month YYYY" when asked for), any
other question a span chosen by its answer type (mstar.offline.answer_span). Empty memory or
"No information stored." gets "unknown". Deterministic: same prompt, same reply.

Directives. So that edits to INSTRUCTION_RESPONSE / ALWAYS_ON_KNOWLEDGE change offline scores,
the answerer obeys a small set of recognisable directives, read one sentence at a time from the
`<instruction>` and from the retrieved memory (where ALWAYS_ON_KNOWLEDGE is put); the
instruction is read last, so it wins a conflict. A sentence whose directive phrase comes after a
negation ("do not", "don't", "never", "avoid", "without") switches the behaviour off instead.
  - word cap: "at most / no more than / up to / under / fewer than / maximum (of) N words",
    "in N words", "N words or fewer/less", "one/a single word" -> cap the answer at N words
    (1..200): a short answer is then the best span of at most N words (not a cut longer one).
    Default cap: 8 words for short answers, 80 for long-form ones. Dates are never cut.
  - session-date rule, ON by default: a sentence naming session / conversation / marker dates
    or timestamps under a negation ("do not answer with the session date") turns it OFF (then a
    when-question gets a span, a time phrase like "last week" if the sentence has one);
    without a negation it turns it ON.
  - relative dates, OFF by default: "relative date(s)/time(s)/time expressions", or "convert /
    resolve / compute ... yesterday / last week / ago" -> turn "yesterday", "last week",
    "last Friday", "last year", "N days ago", ... into dates counted from the session date.
  - abstain, OFF by default: "say / answer / reply / return ... unknown" (or "I don't know",
    "not mentioned") -> answer "unknown" when no memory sentence shares a word with the
    question.
  - full sentence, OFF by default: "full / complete / whole sentence(s)" -> return the best
    sentence itself (question words kept), capped at 30 words unless a word cap says otherwise.
  - long form, OFF by default, also ON for long questions (> 30 words, e.g. rubric tasks):
    "detailed / thorough / comprehensive / in depth / step by step" -> join the (up to) three
    best matching sentences, capped at 80 words unless a word cap says otherwise.
  - list, OFF: "list every (matching) item" -> several spans for "what activities ..." questions.
A memory sentence that states a cap, relative-date, abstain, date-rule or list directive is never
offered as an answer (`is_directive`), so ALWAYS_ON_KNOWLEDGE text is not quoted back.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

from mstar.program import field_types
from mstar.offline.answer_list import LIST_DIRECTIVE_RE, asks_for_several, list_answer
from mstar.offline.cases import WHEN_RE as _WHEN_RE
from mstar.offline.answer_span import short_answer, unit_scores
from mstar.offline.text import (EXPLICIT_DATE_RE, MONTHS, NUMBER_WORDS, QUESTION_WORDS, Unit,
                                capitalised_names, extract_tag, is_content, marker_date,
                                parse_date, ranked_terms, resolve_relative, salient_sentences,
                                split_sentences, split_speaker, split_units, tokens)

SHORT_CAP = 8          # words in a default answer; 6-12 score alike on LoCoMo val, 4 loses 0.007
LONG_CAP = 80          # words in a long-form answer
SENTENCE_CAP = 30      # words in a "full sentence" answer
LONG_QUESTION_WORDS = 30
EMPTY_MEMORY_RE = re.compile(r"^\W*(?:no (?:relevant )?(?:information|memory|memories)"
                             r"(?: (?:stored|found|available))?)?\W*$", re.I)

_NUM = r"(\d{1,3}|%s)" % "|".join(NUMBER_WORDS)
_CAP_PATTERNS = [
    (re.compile(rf"\b(?:at most|no more than|not more than|up to|maximum(?: of)?|max(?:imum)?|"
                rf"under|within|in|fewer than|less than)\s+{_NUM}\s+words?\b", re.I), True),
    (re.compile(rf"\b{_NUM}\s+words?\s+(?:or|and)\s+(?:fewer|less|under)\b", re.I), False),
    (re.compile(r"\b(?:a single|one|single)[- ]word\b", re.I), False),
]
_NEGATION_RE = re.compile(r"\b(?:not|never|avoid|without)\b|n't\b", re.I)
_DATE_RULE_RE = re.compile(r"\b(?:session|conversation|marker|header)[- ]?(?:dates?|timestamps?)\b"
                          r"|\bdate markers?\b|\btimestamps?\b", re.I)
_RELATIVE_RE = re.compile(r"\brelative\s+(?:dates?|times?|time expressions?|temporal|days?)\b"
                          r"|\b(?:convert|resolve|translate|compute|calculate|turn)\b[^.]{0,80}"
                          r"\b(?:yesterday|last week|last year|ago)\b", re.I)
_ABSTAIN_RE = re.compile(r"\b(?:say|answer|reply|respond|return|output|write)\b[^.]{0,40}"
                         r"(?:\bunknown\b|\bi don'?t know\b|\bnot mentioned\b)", re.I)
_FULL_RE = re.compile(r"\b(?:full|complete|whole)\s+sentences?\b", re.I)
_LONG_RE = re.compile(r"\b(?:detailed|thorough|comprehensive|in[- ]depth|elaborate|"
                      r"step[- ]by[- ]step)\b", re.I)


@dataclass(frozen=True)
class Directives:
    max_words: int | None = None
    date_rule: bool = True
    relative_dates: bool = False
    abstain: bool = False
    full_sentence: bool = False
    long_form: bool = False
    list_all: bool = False


def _switch(sentence: str, pattern: re.Pattern) -> bool | None:
    """True/False when the sentence states/negates the directive, None when it is silent."""
    m = pattern.search(sentence)
    if not m:
        return None
    # Only the clause in front of the phrase can negate it: in "if nothing is found, do not
    # guess; say unknown" the "not" belongs to "guess", not to "say unknown".
    clause = re.split(r"[,;:]", sentence[: m.start()])[-1]
    return not _NEGATION_RE.search(clause)


def _cap(sentence: str) -> int | None:
    for pattern, strict_fewer in _CAP_PATTERNS:
        m = pattern.search(sentence)
        if not m:
            continue
        if not m.groups():
            return 1
        raw = m.group(1).lower()
        n = int(raw) if raw.isdigit() else NUMBER_WORDS[raw]
        if strict_fewer and re.search(r"fewer than|less than", m.group(0), re.I):
            n -= 1
        return max(1, min(200, n))
    return None


# Every directive phrase contains one of these words; lines without any are skipped cheaply.
# Matched against lower-cased text: a case-insensitive alternation is ~10x slower in `re`.
_ANY_DIRECTIVE_RE = re.compile(r"word|relative|convert|resolve|translate|compute|calculate|"
                               r"unknown|know|mention|sentence|detail|thorough|comprehensive|"
                               r"depth|elaborate|step|date|timestamp|list")


def read_directives(*texts: str) -> Directives:
    """Directives stated in the texts, later sentences overriding earlier ones."""
    found: dict = {}
    for text in texts:
        for line in text.splitlines():
            if not _ANY_DIRECTIVE_RE.search(line.lower()):
                continue
            for sentence in split_sentences(line):
                cap = _cap(sentence)
                if cap is not None:
                    found["max_words"] = cap
                for key, pattern in (("date_rule", _DATE_RULE_RE),
                                     ("relative_dates", _RELATIVE_RE), ("abstain", _ABSTAIN_RE),
                                     ("full_sentence", _FULL_RE), ("long_form", _LONG_RE),
                                     ("list_all", LIST_DIRECTIVE_RE)):
                    on = _switch(sentence, pattern)
                    if on is not None:
                        found[key] = on
    return Directives(**found)


def is_directive(sentence: str) -> bool:
    """True for an instruction-like sentence that must not be offered as an answer."""
    if not _ANY_DIRECTIVE_RE.search(sentence.lower()):
        return False
    return _cap(sentence) is not None or any(
        p.search(sentence) for p in (_RELATIVE_RE, _ABSTAIN_RE, _DATE_RULE_RE, LIST_DIRECTIVE_RE))


# ---------------------------------------------------------------- dates

def when_answer(question: str, unit: Unit, d: Directives) -> str | None:
    """The date answer for a when-type question from its best unit, or None to fall back."""
    explicit = EXPLICIT_DATE_RE.search(unit.text)
    if explicit:
        return explicit.group(1) or explicit.group(0)
    if not d.date_rule or not unit.date:
        return None
    if d.relative_dates:
        resolved = resolve_relative(unit.text, unit.date)
        if resolved:
            return resolved
    q = question.lower()
    day = parse_date(unit.date)
    if re.search(r"\b(?:what|which) year\b", q):
        year = re.search(r"\b(?:19|20)\d\d\b", unit.date)
        return year.group(0) if year else unit.date
    if re.search(r"\b(?:what|which) month\b", q) and day is not None:
        return f"{MONTHS[day.month - 1].capitalize()} {day.year}"
    return unit.date


# ---------------------------------------------------------------- answering

def _best_units(units: list[Unit], scores: list[float], k: int) -> list[tuple[float, int, Unit]]:
    """The k best-scoring units, best first; the earlier unit wins a tie."""
    return sorted(((s, i, u) for i, (s, u) in enumerate(zip(scores, units))),
                  key=lambda s: (-s[0], s[1]))[:k]


def _cut(text: str, cap: int) -> str:
    return " ".join(text.split()[:cap])


def answer(memory: str, question: str, instruction: str) -> str:
    """An extractive answer to `question` from `memory` following the directives."""
    d = read_directives(memory, instruction)
    if EMPTY_MEMORY_RE.match(memory):
        return "unknown"
    units = [u for u in split_units(memory) if not is_directive(u.text)]
    if not units:
        return "unknown"
    long_form = d.long_form or len(tokens(question)) > LONG_QUESTION_WORDS
    scores = unit_scores(units, question)
    best = _best_units(units, scores, 3 if long_form else 1)
    if d.abstain and best[0][0] == 0:
        return "unknown"
    if long_form:  # the matching sentences, best first (the best one even if nothing matches)
        texts = [u.text for score, _, u in best if score > 0] or [best[0][2].text]
        return _cut(" ".join(texts), d.max_words or LONG_CAP)
    unit = best[0][2]
    if _WHEN_RE.search(question):
        dated = when_answer(question, unit, d)
        if dated:  # never cut by the word cap: half a date is no answer
            return dated
    if d.full_sentence:
        return _cut(unit.text, d.max_words or SENTENCE_CAP)
    cap = d.max_words or SHORT_CAP
    one = short_answer(units, scores, question, memory, cap) or _cut(unit.text, cap)
    listed = d.list_all and asks_for_several(question) and list_answer(units, scores, question, memory, cap, one)
    return listed or one


# ---------------------------------------------------------------- structured outputs

_KINDS = (  # checked in this order; first match wins (a "session_date" is a date, not a session)
    ("date", {"date", "dates", "time", "when", "timestamp", "day", "year", "month", "datetime"}),
    ("people", {"name", "names", "people", "person", "persons", "speaker", "speakers", "who",
                "participant", "participants", "entity", "entities", "character", "characters"}),
    ("keywords", {"keyword", "keywords", "tag", "tags", "term", "terms", "concept", "concepts",
                  "topics"}),
    ("topic", {"topic", "title", "subject", "theme", "headline", "gist"}),
    ("summary", {"summary", "overview", "synopsis"}),
    ("content", {"fact", "facts", "content", "lesson", "lessons", "note", "notes", "detail",
                 "details", "event", "events", "memory", "memories", "information", "insight",
                 "insights", "text", "statement", "statements", "observation", "experience",
                 "query", "question", "search"}),
)


def field_kind(spec: dict) -> str:
    """What a schema field holds, judged by its name first and its description second."""
    name_words = set(re.sub(r"([a-z])([A-Z])", r"\1 \2", spec.get("name", "")).lower()
                     .replace("_", " ").split())
    for words in (name_words, set(tokens(spec.get("description", "")))):
        for kind, hints in _KINDS:
            if words & hints:
                return kind
    return "content"


def _session_number(text: str) -> int | None:
    m = re.search(r"\bsession\s+(\d+)\b", text, re.I)
    return int(m.group(1)) if m else None


def _first_date(text: str) -> str | None:
    for line in text.splitlines():
        found = marker_date(line)
        if found:
            return found
    return None


def _scalar_default(spec: dict, kind: str, text: str, date: str | None):
    """A value for a field that is not text or a list of texts: numbers the text shows (a session
    number, a year), else the declared default, else the zero of the type."""
    ft, default = field_types.parse(spec.get("type", "str")), spec.get("default")
    if ft.kind == "bool":
        return default if isinstance(default, bool) else ft.zero()
    if ft.kind in ("int", "float"):
        name = spec.get("name", "").lower()
        value = None
        if "session" in name:
            value = _session_number(text)
        elif "year" in name and date:
            year = re.search(r"\b(?:19|20)\d\d\b", date)
            value = int(year.group(0)) if year else None
        if value is None:
            value = default if isinstance(default, (int, float)) and not isinstance(default, bool) else None
        if value is None:
            return ft.zero()
        return float(value) if ft.kind == "float" else int(value)
    return json.loads(json.dumps(default)) if default is not None else ft.zero()


def _text_shape(spec: dict) -> str | None:
    """"str", "Optional[str]" or "list[str]" (also for an Optional list of str) for the fields
    filled with text; None for every other type (numbers, flags, Any, dicts)."""
    ft = field_types.parse(spec.get("type", "str"))
    if ft.kind == "str":
        return "Optional[str]" if ft.optional else "str"
    if ft.kind == "list" and ft.item.kind == "str":
        return "list[str]"
    return None


def fill_from_text(schema: list[dict], text: str) -> dict:
    """A knowledge item for `text`: every schema field filled by its kind."""
    date = _first_date(text)
    names = capitalised_names(text)
    out = {}
    for spec in schema:
        kind, ftype = field_kind(spec), _text_shape(spec)
        if ftype is None:
            out[spec["name"]] = _scalar_default(spec, kind, text, date)
            continue
        if ftype == "list[str]":
            if kind == "people":
                value = names[:8]
            elif kind == "date":
                value = [date] if date else []
            elif kind in ("content", "summary"):
                value = salient_sentences(text, 5, 800)
            else:
                value = ranked_terms(text, 8)
        elif kind == "date":
            value = date or ""
        elif kind == "people":
            value = ", ".join(names[:4])
        elif kind == "keywords":
            value = ", ".join(ranked_terms(text, 8))
        elif kind == "topic":
            top = salient_sentences(text, 1, 400)
            line = re.sub(r"\[[^\]]*\]?", "", top[0]) if top else ""  # drop photo captions
            value = _cut(split_speaker(line)[1], 12)
        elif kind == "summary":
            value = " ".join(salient_sentences(text, 2, 300))
        else:
            value = " ".join(salient_sentences(text, 3, 400))
        if ftype == "Optional[str]" and value == "":
            value = None
        out[spec["name"]] = value
    return out


def fill_from_question(schema: list[dict], question: str) -> dict:
    """A query for `question`: text fields get the question, list fields its words or names."""
    names = [n for n in capitalised_names(question) if n.lower() not in QUESTION_WORDS]
    words = list(dict.fromkeys(w for w in tokens(question)
                               if is_content(w) and w not in QUESTION_WORDS))
    explicit = EXPLICIT_DATE_RE.search(question)
    out = {}
    for spec in schema:
        kind, ftype = field_kind(spec), _text_shape(spec)
        if ftype == "list[str]":
            out[spec["name"]] = names if kind == "people" else words
        elif ftype in ("str", "Optional[str]"):
            if kind == "people":
                value = names[0] if names else ""
            elif kind == "date":
                value = explicit.group(0) if explicit else ""
            elif kind == "keywords":
                value = " ".join(words)
            else:
                value = question
            out[spec["name"]] = None if (value == "" and ftype == "Optional[str]") else value
        else:
            out[spec["name"]] = _scalar_default(spec, kind, "", None)
    return out


def _schema(prompt: str) -> list[dict]:
    raw = extract_tag(prompt, "schema")
    if raw is None:
        raise ValueError("offline task model: prompt has no <schema> section")
    try:
        schema = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"offline task model: <schema> is not JSON ({exc})") from None
    if not isinstance(schema, list) or not all(isinstance(f, dict) and "name" in f
                                               for f in schema):
        raise ValueError("offline task model: <schema> must be a JSON list of field dicts")
    return schema


class OfflineTaskModel:
    """Deterministic stand-in for the task-agent LLM (see module docstring)."""

    def complete(self, messages: list[dict]) -> str:
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        task = extract_tag(prompt, "task")
        if task is None:  # the paper's wording (mstar.prompts): read as the tagged form
            from mstar.offline.paper_forms import tagged_task_prompt
            if (tagged := tagged_task_prompt(messages)) is not None:
                return self.complete(tagged)
        if task == "extract_knowledge_item":
            item = fill_from_text(_schema(prompt), extract_tag(prompt, "text") or "")
            return json.dumps(item, ensure_ascii=False)
        if task == "formulate_query":
            query = fill_from_question(_schema(prompt), extract_tag(prompt, "question") or "")
            return json.dumps(query, ensure_ascii=False)
        if task == "answer":
            return answer(extract_tag(prompt, "retrieved_memory") or "",
                          extract_tag(prompt, "question") or "",
                          extract_tag(prompt, "instruction") or "")
        if task == "act":   # one step of an interactive game (mstar.interactive)
            from mstar.offline.act_policy import act
            return act(prompt)
        raise ValueError(f"offline task model: unknown or missing <task> tag: {task!r} "
                         "(expected extract_knowledge_item, formulate_query, answer or act)")

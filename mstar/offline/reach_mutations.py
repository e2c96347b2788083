"""Edits that let the offline reflector reach past retrieval knobs and dates (issue 18).

The failure categories programs score near zero on offline -- multi-hop, "what holds now"
(updated facts), questions about one person among many -- need the memory organised
differently, not a larger top-k. Each edit here is a small, readable change of any program with
the usual KnowledgeBase shape (the seeds and the children the other mutations make):

  speaker_index    write() also files every dated turn under its speaker's name; read() puts the
                   named person's best-matching turns in front of its result.
  bridge_person    "... the person who ran the half marathon?": read() first finds who that is
                   (the speaker of the turn matching the clause), then answers from that
                   person's other turns. Adds the speaker index when it is missing.
  newest_first     the overlap ranking breaks ties toward the newest dated entry, so "where
                   does she live now" gets the latest move, not the first.
  spread_sessions  after ranking, at most two entries per session come first: evidence from
                   several sessions for questions that gather facts.
  entity_queries   chroma programs: one query per name in the question, results interleaved.
  evidence_only    with a speaker index: when the question names indexed people, read() returns
                   their turns alone, without the rest of what it found (fewer distractors).
  drop_captions    write() removes "[shares a photo of ...]" captions from the raw text: they
                   share words with many questions ("shares", "photo", the object) and the
                   answerer quotes them instead of what the person said.

Like the other catalogues, each edit returns None when it does not apply, recognises its own
earlier edit, and leaves a comment a reader of the evolved program understands. The read()
wrappers (speaker_index, bridge_person) wrap every `return EXPR` of read() in a helper call;
the bridge stays outermost, because when it resolves a person it replaces the result.
"""
from __future__ import annotations

import ast
import random
import re
from typing import Callable

from mstar.offline import source_edits as se
from mstar.offline.mutation_types import Edit

OUTERMOST = ("bridge_evidence",)     # wrappers later wrappers go inside of
RANK_HELPERS = ("rank_by_overlap", "rank_newest_first")
EVIDENCE_HELPERS = ("with_entity_evidence", "bridge_evidence")


# ---------------------------------------------------------------- locating and wrapping

def _self_call(node: ast.AST, names: tuple[str, ...]) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"
            and node.func.attr in names)


def _returns(source: str, method: str = "read") -> list[ast.Return]:
    node = se.method_node(source, method)
    if node is None:
        return []
    out, todo = [], list(node.body)
    while todo:
        n = todo.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        # `return "No information stored."` stays as it is: there is nothing to add to.
        if isinstance(n, ast.Return) and n.value is not None and not isinstance(n.value, ast.Constant):
            out.append(n)
        todo.extend(ast.iter_child_nodes(n))
    return out


def _offset(lines: list[str], lineno: int, col: int) -> int:
    # AST columns count UTF-8 bytes; the seeds are ASCII in their code, but be exact anyway.
    line = lines[lineno - 1]
    return sum(len(l) + 1 for l in lines[:lineno - 1]) + len(line.encode()[:col].decode(errors="ignore"))


def wrap_read_returns(source: str, helper: str, query: str) -> str | None:
    """Every `return EXPR` of read() -> `return self.helper(query, EXPR)`; a return already
    wrapped by an OUTERMOST helper gets the new wrapper inside it. None when nothing to wrap."""
    lines = source.split("\n")
    spans = []
    for ret in _returns(source):
        value = ret.value
        while _self_call(value, OUTERMOST) and len(value.args) >= 2 and value.func.attr != helper:
            value = value.args[1]
        if _self_call(value, (helper,)):
            return None        # already there
        spans.append((_offset(lines, value.lineno, value.col_offset),
                      _offset(lines, value.end_lineno, value.end_col_offset)))
    if not spans:
        return None
    for start, end in sorted(spans, reverse=True):
        source = source[:start] + f"self.{helper}({query}, " + source[start:end] + ")" + source[end:]
    return source


def _append_to(source: str, method: str, code: list[str], before_return: bool = True) -> str | None:
    """Add lines (given without indent) at the end of a method's body (before a final return)."""
    node = se.method_node(source, method)
    if node is None or not node.body:
        return None
    lines = source.split("\n")
    last = node.body[-1]
    at = last.lineno - 1 if before_return and isinstance(last, ast.Return) else last.end_lineno
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Constant) and len(node.body) == 1:
        at = last.end_lineno   # a body that is only a docstring
    ind = se.indent_of(lines[node.body[0].lineno - 1])
    lines[at:at] = [ind + c if c else "" for c in code]
    return "\n".join(lines)


def _with_helpers(source: str, *names: str) -> str:
    for name in names:
        source = se.ensure_helper(source, name)
    return source


# ---------------------------------------------------------------- the speaker index

def _has_shape(source: str) -> bool:
    return all(se.method_node(source, m) is not None for m in ("__init__", "write", "read")) \
        and se.query_text_expr(source) is not None and se.arg_name(source, "write", 2) is not None


def _add_index(source: str) -> str | None:
    """__init__ gets `self.by_speaker = {}`, write() files the raw text's turns by speaker."""
    if "self.by_speaker" in source:
        return source
    raw = se.arg_name(source, "write", 2)
    new = _append_to(source, "__init__", ["self.by_speaker = {}"])
    new = new and _append_to(new, "write", [
        "# Speaker index: every dated turn is also filed under its speaker's name.",
        f"self.index_turns({raw})"])
    return new and _with_helpers(new, "index_turns")


def speaker_index(source: str, rng: random.Random) -> Edit | None:
    if not _has_shape(source) or "with_entity_evidence" in source:
        return None
    new = _add_index(source)
    new = new and wrap_read_returns(new, "with_entity_evidence", se.query_text_expr(source))
    if new is None:
        return None
    new = _with_helpers(new, "with_entity_evidence")
    return Edit(new, "Index turns by speaker: questions name the person they are about",
                "Questions ask about one named person, yet retrieval ranks everyone's turns "
                "together, so turns that merely mention the name (or other people's similar "
                "stories) crowd out the person's own words.",
                "write() also files every date-stamped turn under its speaker (self.by_speaker); "
                "read() puts the named speakers' best-matching turns in front of its result (new "
                "helpers index_turns, with_entity_evidence).")


def bridge_person(source: str, rng: random.Random) -> Edit | None:
    if not _has_shape(source) or "bridge_evidence" in source:
        return None
    new = _add_index(source)
    new = new and wrap_read_returns(new, "bridge_evidence", se.query_text_expr(source))
    if new is None:
        return None
    new = _with_helpers(new, "bridge_evidence")
    return Edit(new, "Resolve 'the person who ...' before retrieving: two-hop questions",
                "Questions like 'the brother of the person who ran the marathon' match the "
                "marathon turn best, so the answer is taken from the first fact instead of the "
                "second one about that person.",
                "read() first finds the speaker of the turn that best matches the relative clause, "
                "then returns that speaker's other turns ranked against the question (new helper "
                "bridge_evidence; adds the speaker index if missing).")


EVIDENCE_JOIN = 'return (shown + "\\n\\n" + text)[:3000] if shown else text'
EVIDENCE_ALONE = 'return shown[:3000] if shown else text'


def evidence_only(source: str, rng: random.Random) -> Edit | None:
    """The speaker index's evidence replaces read()'s other findings instead of preceding them."""
    node = se.method_node(source, "with_entity_evidence")
    if node is None:
        return None
    lines = source.split("\n")
    at = next((i for i in range(node.lineno - 1, node.end_lineno) if lines[i].strip() == EVIDENCE_JOIN), None)
    if at is None:
        return None
    ind = se.indent_of(lines[at])
    lines[at:at + 1] = [f"{ind}# Evidence only: the named people's own turns answer alone; what the rest of",
                        f"{ind}# read() found adds other people's stories that the answerer quotes instead.",
                        ind + EVIDENCE_ALONE]
    return Edit("\n".join(lines), "Answer from the named people's turns alone: other retrieved text distracts",
                "When the question names a person, their own best-matching turns are already in front; "
                "the rest of the retrieved text brings other people's similar stories, and the answer "
                "is taken from one of those.",
                "with_entity_evidence returns the named speakers' turns alone when there are any, and "
                "read()'s own result otherwise.")


# ---------------------------------------------------------------- ranking order

def _methods_for_ranking(source: str) -> list[str]:
    return ["read"] + [m for m in EVIDENCE_HELPERS if se.method_node(source, m) is not None]


def _rank_calls(source: str, names: tuple[str, ...]) -> list[ast.Call]:
    out = []
    for method in _methods_for_ranking(source):
        node = se.method_node(source, method)
        if node is not None:
            out += [n for n in ast.walk(node) if _self_call(n, names) and len(n.args) == 2
                    and not n.keywords]
    return out


def _ranked(source: str, prepare: tuple[Callable, ...]) -> tuple[str, str]:
    """`source` with an overlap ranking in read(): as it is, or after the first of `prepare` (the
    catalogue's keyword_rerank, rank_stored_lists) that adds one. ("", "") when none can."""
    if _rank_calls(source, RANK_HELPERS):
        return source, ""
    for fn in prepare:
        edit = fn(source, random.Random(0))
        if edit is not None and _rank_calls(edit.source, RANK_HELPERS):
            return edit.source, f" ({edit.title.split(':')[0].lower()} first)"
    return "", ""


def newest_first(source: str, rng: random.Random, prepare: tuple[Callable, ...] = ()) -> Edit | None:
    source, first = _ranked(source, prepare)
    calls = _rank_calls(source, ("rank_by_overlap",))
    if not calls:
        return None
    lines = source.split("\n")
    for call in sorted(calls, key=lambda c: (c.func.end_lineno, c.func.end_col_offset), reverse=True):
        end = _offset(lines, call.func.end_lineno, call.func.end_col_offset)
        start = end - len("rank_by_overlap")
        source = source[:start] + "rank_newest_first" + source[end:]
        lines = source.split("\n")
    new = _with_helpers(source, "rank_newest_first")
    return Edit(new, "Break ranking ties toward the newest entry: facts change over time" + first,
                "Entries that match a question equally well are kept in storage order, so the "
                "first statement of a fact wins over the latest ('I live in Riga' over 'we moved "
                "to Bilbao').",
                "read() ranks with rank_newest_first: the same word-overlap score, ties broken by "
                "the entry's session date, newest first (new helpers rank_newest_first, date_key).")


def spread_sessions(source: str, rng: random.Random, prepare: tuple[Callable, ...] = ()) -> Edit | None:
    if "spread_sessions" in source:
        return None
    source, first = _ranked(source, prepare)
    calls = _rank_calls(source, RANK_HELPERS) if source else []
    if not calls:
        return None
    lines = source.split("\n")
    spans = [(_offset(lines, c.lineno, c.col_offset), _offset(lines, c.end_lineno, c.end_col_offset))
             for c in calls]
    for start, end in sorted(spans, reverse=True):
        source = source[:start] + "self.spread_sessions(" + source[start:end] + ")" + source[end:]
    new = _with_helpers(source, "spread_sessions")
    return Edit(new, "Spread retrieved evidence over sessions: facts gathered across conversations" + first,
                "The best-matching entries often all come from one session, so questions that "
                "collect facts told in several sessions see only one of them.",
                "read() re-orders the ranked entries so that at most two of one session come first "
                "and the rest follow (new helper spread_sessions).")


# ---------------------------------------------------------------- one query per entity

CHROMA_QUERY = (r"^(?P<ind>\s*)(?P<var>\w+) = self\.collection\.query\(query_texts=\[(?P<q>[^\]]+)\], "
                r"n_results=(?P<n>.*)\)\s*$")


def entity_queries(source: str, rng: random.Random) -> Edit | None:
    """After the last line of read() that sets the retrieved list, one more chroma call asks one
    query per name in the question and interleaves its hits with the list. The original query
    line stays as it is, so keyword re-ranking and the top-k knobs still find it."""
    span = se.method_lines(source, "read")
    if span is None or "entity_queries" in source:
        return None
    lines = source.split("\n")
    q_at = se.find_line(lines, CHROMA_QUERY, *span)
    if q_at is None:
        return None
    m = re.match(CHROMA_QUERY, lines[q_at])
    docs_re = rf'^(?P<ind>\s*)(?P<docs>\w+) = {m.group("var")}\["documents"\]\[0\]'
    d_at = se.find_line(lines, docs_re, q_at + 1, span[1])
    if d_at is None:
        return None
    ind, docs = re.match(docs_re, lines[d_at]).group("ind"), re.match(docs_re, lines[d_at]).group("docs")
    last = max(i for i in range(d_at, span[1]) if re.match(rf"^{ind}{docs} = ", lines[i]))
    lines[last + 1:last + 1] = [
        f"{ind}# One query per entity: each name in the question, with the question's other words,",
        f"{ind}# gets its own hits, interleaved with the list above, so every person and place asked",
        f"{ind}# about is represented.",
        f"{ind}named = self.entity_queries({m.group('q')})",
        f"{ind}if named:",
        f"{ind}    more = self.collection.query(query_texts=named, n_results={m.group('n')})",
        f"{ind}    {docs} = self.merge_results([{docs}] + more[\"documents\"])",
    ]
    new = _with_helpers("\n".join(lines), "entity_queries", "merge_results")
    return Edit(new, "One query per named entity: every person and place asked about gets hits",
                "A single embedding query for a question naming two people or a person and a "
                "place returns hits for whichever dominates the text.",
                "read() asks chroma once more with one query per capitalised name (name + the "
                "question's other words) and interleaves those hits with its list (new helpers "
                "entity_queries, merge_results).")


# ---------------------------------------------------------------- image captions

def _prepend_to(source: str, method: str, code: list[str]) -> str | None:
    """Add lines (given without indent) at the start of a method's body, after its docstring."""
    node = se.method_node(source, method)
    if node is None or not node.body:
        return None
    lines = source.split("\n")
    first = node.body[0]
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
        and isinstance(first.value.value, str)
    if docstring and len(node.body) == 1:
        return None
    at = first.end_lineno if docstring else first.lineno - 1
    ind = se.indent_of(lines[node.body[1 if docstring else 0].lineno - 1])
    lines[at:at] = [ind + c if c else "" for c in code]
    return "\n".join(lines)


def drop_captions(source: str, rng: random.Random) -> Edit | None:
    raw = se.arg_name(source, "write", 2)
    node = se.method_node(source, "write")
    if raw is None or node is None or "drop_captions" in source:
        return None
    # A program that stores only the extracted item never sees a caption: the edit would change
    # nothing (a no-change child).
    if not any(isinstance(n, ast.Name) and n.id == raw for n in ast.walk(node)):
        return None
    new = _prepend_to(source, "write", [
        "# Image captions (\"[shares a photo of ...]\") are not what anyone said; they share words",
        "# with many questions and get quoted as answers, so they are not stored.",
        f"{raw} = self.drop_captions({raw})"])
    if new is None:
        return None
    new = _with_helpers(new, "drop_captions")
    return Edit(new, "Drop image captions from stored text: answers were quoted from photo descriptions",
                "Answers are taken from bracketed photo descriptions ('[shares a photo of a pie]'), "
                "which match the question's words but are not what the person said.",
                "write() removes bracketed captions of shared photos from the raw text before "
                "anything is stored (new helper drop_captions).")


def reach_edits(prepare: tuple[Callable, ...]) -> tuple[tuple[str, str, Callable], ...]:
    """(name, key, fn) of every reach edit; `prepare` are the catalogue's edits that add an
    overlap ranking to a program without one (newest_first and spread_sessions need one)."""
    return (
        ("speaker_index", "Index turns by speaker", speaker_index),
        ("bridge_person", "Resolve 'the person who ...' before retrieving", bridge_person),
        ("newest_first", "Break ranking ties toward the newest entry",
         lambda source, rng: newest_first(source, rng, prepare)),
        ("spread_sessions", "Spread retrieved evidence over sessions",
         lambda source, rng: spread_sessions(source, rng, prepare)),
        ("entity_queries", "One query per named entity", entity_queries),
        ("evidence_only", "Answer from the named people's turns alone", evidence_only),
        ("drop_captions", "Drop image captions from stored text", drop_captions),
    )

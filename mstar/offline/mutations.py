"""The offline reflector's mutation catalogue: small, readable edits of memory programs.

Each `Mutation` has a `name`, a `key` (the stem of the titles it writes, "Raise top-k", used
to recognise it in lineage lines), `applies(source) -> bool` and
`apply(source, rng) -> Edit | None`. Mutations are pure functions of the source text, located
by regex and the AST, and they recognise their own earlier edits, so they compose over
generations: a seed stamped with dates can still get re-ranking, larger caps, shorter answers...

How likely each one is chosen is data, not code: `TUNING` maps a mutation's name to a base
weight and to boosts for the failure signals the reflector reads off the underperforming
cases (`SIGNALS`, mstar/offline/signals.py). `KNOBS` (mstar/offline/knob_mutations.py) holds
the numeric knobs with their value ladders.
"""
from __future__ import annotations

import ast
import random
import re
from typing import Callable

from mstar.offline import source_edits as se
from mstar.offline.instruction_mutations import INSTRUCTION_MUTATIONS
from mstar.offline.knob_mutations import KNOBS, knob_mutations  # noqa: F401 (KNOBS re-exported)
from mstar.offline.mutation_types import Edit, Mutation
from mstar.offline.reach_mutations import reach_edits
from mstar.offline.signals import SALIENCE, SIGNALS  # noqa: F401 (re-exported)

# Failure signals and their salience: mstar/offline/signals.py (re-exported here).

# name -> (base weight, {signal: multiplier}). Tune here; nothing else needs to change.
TUNING: dict[str, tuple[float, dict[str, float]]] = {
    # Base weights follow offline measurements on the bundled sample task (score change of one
    # edit on a seed): date stamps +0.08, turns +0.08 on chunks but -0.10 on whole texts,
    # keyword re-ranking +0.04 (+0.12 with date stamps), raw turns on the Experience Learner
    # +0.34, relevance order +0.01..0.05, a smaller summariser context -0.13; top-k, caps,
    # rank weight and instruction rewrites within +-0.015. Rewrites of the query / item
    # instructions change nothing offline (the offline task model ignores them).
    "date_stamp": (3.0, {"when_no_date": 3.0}),
    "split_turns": (1.5, {"when_no_date": 2.0, "not_retrieved": 1.5}),
    "store_turns_in_list": (0.3, {"when_no_date": 1.5}),
    "add_date_field": (2.0, {"when_no_date": 3.0}),
    "store_raw_turns": (3.0, {"not_retrieved": 2.0, "no_answer": 2.0, "when_no_date": 1.5}),
    "keyword_rerank": (2.5, {"not_retrieved": 2.0, "no_answer": 1.5}),
    "rank_stored_lists": (2.5, {"not_retrieved": 2.0, "long_retrieved": 2.0}),
    "top_k_up": (0.8, {"not_retrieved": 2.0, "no_answer": 2.0}),
    "top_k_down": (0.3, {"long_retrieved": 1.5}),
    "overfetch_up": (0.4, {"not_retrieved": 1.5}),
    "overfetch_down": (0.2, {}),
    "chunk_size_up": (0.6, {"not_retrieved": 1.5}),
    "chunk_size_down": (0.2, {}),
    "list_cap_up": (0.6, {"long_retrieved": 2.0, "not_retrieved": 1.5}),
    "list_cap_down": (0.2, {}),
    "context_cap_up": (0.6, {"not_retrieved": 1.5}),
    "context_cap_down": (0.15, {}),
    "rank_weight_up": (0.15, {}),
    "rank_weight_down": (0.15, {}),
    "answer_cap_down": (0.5, {"verbose": 3.0}),
    # Offline, a short answer is a span of at most 8 words (mstar/offline/answer_span.py), so a
    # cap raised past 8 changes nothing: 4 of 5 such children in the LoCoMo study answered as
    # their parent did. No boost from "terse" (it would make the two-step draw reach for it).
    "answer_cap_up": (0.15, {}),
    # Offline, the answerer then joins the matching spans of several sentences for questions
    # asking for several things (mstar/offline/answer_list.py); off, it gives one span. Worth val
    # +0.001 on LoCoMo, and 17 of 19 study children answered every static item as their parent
    # did: a small weight, still the likeliest answer to a list failure alone.
    "list_items": (0.15, {"list_answer": 3.0}),
    # LoCoMo val (paired, 1,440 items) on the summariser + speaker index: +0.023 [+0.017, +0.028]
    # ("last year" -> 2022 instead of the session date). Boosted where a case shows it.
    "relative_dates_on": (0.3, {"when_no_date": 1.5, "relative_when": 6.0}),
    "relative_dates_off": (0.2, {"relative_when": 0.1}),   # < 1: the cases argue against it
    "always_on_rewrite": (0.3, {"when_no_date": 1.5}),
    "query_instruction_rewrite": (0.1, {}),
    "item_instruction_rewrite": (0.1, {}),
    # Reach edits (mstar/offline/reach_mutations.py). Measured (test F1, one edit on a seed or a
    # typical child): the speaker index lifts every seed on LoCoMo to ~0.21 (vector search 0.12,
    # summariser 0.04, experience learner 0.00) and on the sample task (+0.28..+0.67), but not
    # programs that already rank all turns (LoCoMo val -0.006); "the person who" resolution
    # lifts sample multi-hop ~+0.3 and is a no-op on LoCoMo (2 of 1,540 questions have such a
    # clause); newest-first ties lift sample "updated" 0.64 -> 1.00 and are near no-ops on
    # LoCoMo; session spreading and per-entity chroma queries stay within +-0.01 on both.
    "speaker_index": (2.5, {"names_person": 2.0, "not_retrieved": 1.2}),
    "bridge_person": (0.15, {"bridge": 20.0}),
    "newest_first": (0.3, {"now_question": 6.0}),
    "spread_sessions": (0.15, {"list_answer": 2.0}),
    "entity_queries": (0.3, {"names_person": 1.5}),
    # LoCoMo val +0.001 [-0.001, +0.004] (2000 -> 2400); 4 of 4 study children changed no static
    # answer: not an answer to "names a person" (the index itself is).
    "evidence_budget_up": (0.15, {}),
    "evidence_budget_down": (0.1, {}),
    # Measured on LoCoMo (one edit on a speaker-indexed child): val +0.007 [+0.001, +0.012] on
    # 1,440 items, test +0.010; a no-op where texts carry no captions (the sample task). Clutter
    # (several captions in what was retrieved) is in ~all LoCoMo cases, so it has low SALIENCE.
    "drop_captions": (0.1, {"caption_answer": 20.0, "caption_clutter": 4.0}),
    # Same setting: val +0.001 [-0.001, +0.004] (no real change), test +0.012. Kept because it
    # removes other people's stories from what the answerer sees.
    "evidence_only": (0.5, {"names_person": 2.0, "not_retrieved": 1.2}),
}


# ---------------------------------------------------------------- structural edits

CHUNK_CALL = r"self\.chunk\((?P<raw>\w+), max_chars=\d+\)"


def _write_span(source: str) -> tuple[int, int] | None:
    return se.method_lines(source, "write")


def _unstamped_chunk_line(source: str) -> tuple[int, re.Match] | None:
    span = _write_span(source)
    if span is None:
        return None
    lines = source.split("\n")
    for i in range(*span):
        m = re.search(CHUNK_CALL, lines[i])
        if m and "self.date_stamp(" not in lines[i]:
            return i, m
    return None


def date_stamp(source: str, rng: random.Random) -> Edit | None:
    found = _unstamped_chunk_line(source)
    if found is None:
        return None
    i, m = found
    lines = source.split("\n")
    lines[i] = lines[i][:m.start()] + f"self.date_stamp({m.group('raw')}, {m.group(0)})" + lines[i][m.end():]
    se.set_comment_above(lines, i, "Date stamp", "each chunk carries its session's date, so a when-question "
                         "can be answered from any chunk, not only the first")
    new = se.ensure_helper("\n".join(lines), "date_stamp")
    return Edit(new, "Stamp stored chunks with their session date: when-questions need it",
                "Only the first chunk of a session holds its date line, so most retrieved chunks give "
                "the answerer no way to say when something happened.",
                "write() prefixes every chunk with the episode's opening [date] marker (new helper "
                "date_stamp).")


def _top_k_at_least(source: str, k: int) -> str:
    for pattern in (r"(\btop_k = )(\d+)\b", r"(n_results=min\()(\d+),"):
        m = re.search(pattern, source)
        if m:
            if int(m.group(2)) >= k:
                return source
            return source[:m.start(2)] + str(k) + source[m.end(2):]
    return source


def split_turns(source: str, rng: random.Random) -> Edit | None:
    """Chunks -> one date-stamped unit per dialogue turn (chroma programs)."""
    span = _write_span(source)
    if span is None:
        return None
    lines = source.split("\n")
    at = next((i for i in range(*span) if re.search(CHUNK_CALL, lines[i])), None)
    if at is None:
        return None
    m = re.search(CHUNK_CALL, lines[at])
    raw = m.group("raw")
    call = f"self.split_turns({raw})"
    if f"self.date_stamp({raw}, " not in lines[at]:
        call = f"self.date_stamp({raw}, {call})"
    lines[at] = lines[at][:m.start()] + call + lines[at][m.end():]
    stale = se.comment_block_above(lines, at, "Date stamp")  # the Turns comment covers dates
    if stale is not None:
        del lines[stale:at]
        at = stale
    se.set_comment_above(lines, at, "Turns", "one stored unit per dialogue turn, stamped with its "
                         "session date; small units let retrieval return exactly the turn that "
                         "answers (top-k at least 10 to keep enough context)")
    new = _top_k_at_least("\n".join(lines), 10)
    for helper in ("split_turns", "date_stamp"):
        new = se.ensure_helper(new, helper)
    return Edit(new, "Store dialogue turns instead of long chunks: finer units, each with its date",
                "Stored chunks are long, so the answer sits among unrelated lines and far from its "
                "session date.",
                "write() stores one date-stamped unit per non-empty line instead of ~500-character "
                "chunks (new helpers split_turns, date_stamp); top-k is at least 10.")


def store_turns_in_list(source: str, rng: random.Random) -> Edit | None:
    """`self.texts.append(raw_text)` -> one date-stamped entry per dialogue turn (list programs)."""
    span, raw = _write_span(source), se.arg_name(source, "write", 2)
    if span is None or raw is None:
        return None
    lines = source.split("\n")
    for i in range(*span):
        m = re.search(rf"self\.(?P<attr>\w+)\.append\({raw}\)", lines[i])
        if m:
            break
    else:
        return None
    lines[i] = (lines[i][:m.start()] + f"self.{m.group('attr')}.extend(self.date_stamp({raw}, "
                f"self.split_turns({raw})))" + lines[i][m.end():])
    se.set_comment_above(lines, i, "Turns", "store each dialogue turn on its own, stamped with its "
                         "session date, so the relevant turns can be picked out and dated")
    new = "\n".join(lines)
    for helper in ("split_turns", "date_stamp"):
        new = se.ensure_helper(new, helper)
    return Edit(new, "Store dialogue turns instead of whole texts: finer units, each with its date",
                "Whole texts are stored as one entry, so a cut or a ranking can only keep or drop a "
                "whole session.",
                "write() stores one date-stamped entry per non-empty line of the raw text (new helpers "
                "split_turns, date_stamp).")


QUERY_LINE = (r"^(?P<ind>\s*)(?P<var>\w+) = self\.collection\.query\(query_texts=\[(?P<q>[^\]]+)\], "
              r"n_results=min\((?P<k>\d+), (?P<count>[^)]+)\)\)\s*$")


def keyword_rerank(source: str, rng: random.Random) -> Edit | None:
    span = se.method_lines(source, "read")
    if span is None or "rank_by_overlap" in se.method_text(source, "read"):
        return None
    lines = source.split("\n")
    q_at = se.find_line(lines, QUERY_LINE, *span)
    if q_at is None:
        return None
    m = re.match(QUERY_LINE, lines[q_at])
    docs_at = se.find_line(lines, rf"^\s*\w+ = {m.group('var')}\[\"documents\"\]", q_at + 1, span[1])
    if docs_at is None:
        return None
    docs_var = re.match(r"\s*(\w+) = ", lines[docs_at]).group(1)
    ind = m.group("ind")
    new_query = (f"{ind}{m.group('var')} = self.collection.query(query_texts=[{m.group('q')}], "
                 f"n_results=min(top_k * 3, {m.group('count')}))")
    rerank = f"{ind}{docs_var} = self.rank_by_overlap({m.group('q')}, {docs_var})[:top_k]"
    # An earlier "# top-k:" comment on the query line is replaced by the new top_k line.
    start = se.comment_block_above(lines, q_at, "top-k")
    start = q_at if start is None else start
    lines[docs_at + 1:docs_at + 1] = [rerank]
    lines[start:q_at + 1] = [
        f"{ind}# Keyword re-ranking: over-fetch from chroma, then put first the chunks sharing the most",
        f"{ind}# (and rarest) words with the query, so exact names and dates beat loose semantic matches.",
        f"{ind}top_k = {m.group('k')}",
        new_query,
    ]
    new = se.ensure_helper("\n".join(lines), "rank_by_overlap")
    return Edit(new, "Re-rank retrieved chunks by query-word overlap: embedding misses exact names",
                "The embedding ranks loosely related chunks above the one holding the question's exact "
                "names and words.",
                "read() fetches 3x top-k candidates from chroma and re-orders them by overlap with the "
                "query's words before cutting to top-k (new helpers rank_by_overlap, query_words).")


JOIN = r"(?P<sep>\"(?:[^\"\\]|\\.)*\")\.join\(self\.(?P<attr>[A-Za-z]\w*)\)"


def rank_stored_lists(source: str, rng: random.Random) -> Edit | None:
    span = se.method_lines(source, "read")
    q = se.query_text_expr(source)
    if span is None or q is None:
        return None
    lines = source.split("\n")
    changed = []
    for i in range(*span):
        if re.search(JOIN, lines[i]):
            lines[i] = re.sub(JOIN, lambda m: f"{m.group('sep')}.join(self.rank_by_overlap({q}, "
                              f"self.{m.group('attr')}))", lines[i])
            changed.append(i)
    if not changed:
        return None
    se.set_comment_above(lines, changed[0], "Relevance order", "entries sharing the most query words come "
                         "first, so the character cut drops the least useful ones instead of the newest")
    new = se.ensure_helper("\n".join(lines), "rank_by_overlap")
    return Edit(new, "Rank stored entries by query-word overlap before the cut",
                "read() returns stored entries in insertion order and cuts them at a character cap, so "
                "the entries that answer the question are often cut away.",
                "read() orders each stored list by overlap with the query's words before joining and "
                "cutting it (new helpers rank_by_overlap, query_words).")


FINAL_RETURN = r"^(?P<ind>\s*)return (?P<expr>.+)\[:(?P<cap>\d+)\]\s*$"


def _store_raw_applies(source: str) -> bool:
    raw = se.arg_name(source, "write", 2)
    write, read = se.method_text(source, "write"), se.method_text(source, "read")
    if not raw or "self.raw_turns" in source or se.query_text_expr(source) is None:
        return False
    body = write.split("\n", 1)[1] if "\n" in write else ""
    return (not re.search(rf"\b{raw}\b", body) and re.search(r"self\.\w+\.append\(", body) is not None
            and se.method_node(source, "__init__") is not None
            and any(re.match(FINAL_RETURN, l) for l in read.split("\n")))


def store_raw_turns(source: str, rng: random.Random) -> Edit | None:
    if not _store_raw_applies(source):
        return None
    raw, q = se.arg_name(source, "write", 2), se.query_text_expr(source)
    lines = source.split("\n")
    read_span, write_span = se.method_lines(source, "read"), se.method_lines(source, "write")
    init_end = se.method_node(source, "__init__").end_lineno
    ret_at = max(i for i in range(*read_span) if re.match(FINAL_RETURN, lines[i]))
    m = re.match(FINAL_RETURN, lines[ret_at])
    ind = m.group("ind")
    lines[ret_at:ret_at + 1] = [
        f"{ind}# Raw turns ranked by the query: details the extraction dropped are still found here.",
        f'{ind}turns_text = "\\n".join(self.rank_by_overlap({q}, self.raw_turns))[:1200]',
        f'{ind}return (f"Excerpts:\\n{{turns_text}}\\n\\n" + {m.group("expr")})[:{m.group("cap")}]',
    ]
    w_ind = se.indent_of(lines[write_span[1] - 1])
    lines[write_span[1]:write_span[1]] = [
        f"{w_ind}# Keep the raw dialogue too, one date-stamped turn per entry: extraction keeps only a",
        f"{w_ind}# few sentences per text, and questions often ask about the rest.",
        f"{w_ind}self.raw_turns.extend(self.date_stamp({raw}, self.split_turns({raw})))",
    ]
    i_ind = se.indent_of(lines[init_end - 1])
    lines[init_end:init_end] = [f"{i_ind}self.raw_turns = []"]
    new = "\n".join(lines)
    for helper in ("split_turns", "date_stamp", "rank_by_overlap"):
        new = se.ensure_helper(new, helper)
    return Edit(new, "Keep raw dialogue turns next to the extracted entries",
                "Only the extracted lesson and fact of each text are stored, so details the extraction "
                "left out can never be retrieved.",
                "write() also stores every turn of the raw text with its session date; read() returns "
                "the turns that best match the query ahead of the extracted lists.")


_ITEM_APPEND = r"self\.(?P<attr>\w+)\.append\((?P<item>\w+)\.(?P<field>\w+)\)"


def add_date_field(source: str, rng: random.Random) -> Edit | None:
    cls = se.class_node(source, "KnowledgeItem")
    item = se.arg_name(source, "write", 1)
    span = _write_span(source)
    if cls is None or item is None or span is None:
        return None
    fields = [n for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
    if not fields or any("date" in f.target.id.lower() for f in fields):
        return None
    lines = source.split("\n")
    appends = [i for i in range(*span) if (m := re.search(_ITEM_APPEND, lines[i])) and m.group("item") == item]
    if not appends:
        return None
    for i in appends:
        lines[i] = re.sub(_ITEM_APPEND, lambda m: (
            f'self.{m.group("attr")}.append(f"[{{{item}.session_date}}] {{{item}.{m.group("field")}}}" '
            f'if {item}.session_date else {item}.{m.group("field")})'), lines[i])
    se.set_comment_above(lines, appends[0], "Dates", "each entry starts with its session date so the "
                         "answerer can tell when it happened")
    last = fields[-1].end_lineno
    ind = se.indent_of(lines[last - 1])
    uses_field = "field(" in "\n".join(lines[cls.lineno - 1:last])
    value = ('field(default="", metadata={"description": "The date the text was written, as given at its '
             'start; empty if none"})') if uses_field else '""'
    lines[last:last] = [f"{ind}session_date: str = {value}"]
    return Edit("\n".join(lines), "Add a session_date field and stamp each stored entry with it",
                "Extracted entries carry no date, so when-questions cannot be answered from them.",
                "KnowledgeItem gets a session_date field; write() prefixes each stored entry with it.")


STRUCTURAL: tuple[tuple[str, str, Callable], ...] = (
    ("date_stamp", "Stamp stored chunks with their session date", date_stamp),
    ("split_turns", "Store dialogue turns instead of long chunks", split_turns),
    ("store_turns_in_list", "Store dialogue turns instead of whole texts", store_turns_in_list),
    ("keyword_rerank", "Re-rank retrieved chunks by query-word overlap", keyword_rerank),
    ("rank_stored_lists", "Rank stored entries by query-word overlap before the cut", rank_stored_lists),
    ("store_raw_turns", "Keep raw dialogue turns next to the extracted entries", store_raw_turns),
    ("add_date_field", "Add a session_date field and stamp each stored entry with it", add_date_field),
) + reach_edits(prepare=(keyword_rerank, rank_stored_lists))


def _applies_by_trying(fn: Callable) -> Callable[[str], bool]:
    # Structural edits are cheap; "applies" is simply "would produce a parsing, different program".
    def applies(source: str) -> bool:
        edit = fn(source, random.Random(0))
        return edit is not None and edit.source != source and se.parses(edit.source)
    return applies


def build_catalogue() -> list[Mutation]:
    out = [Mutation(name, key, _applies_by_trying(fn), fn) for name, key, fn in STRUCTURAL]
    out += knob_mutations()
    out += INSTRUCTION_MUTATIONS
    missing = [m.name for m in out if m.name not in TUNING]
    if missing:
        raise ValueError(f"mutations without a TUNING entry: {missing}")
    return out


CATALOGUE: list[Mutation] = build_catalogue()

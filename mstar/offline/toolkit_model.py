"""Offline toolkit model: answers `toolkit.llm_completion` calls of memory programs, LLM-free.

Programs send free-form messages, typically "summarise what is relevant to this query" with a
`Query:` line and the stored texts. The offline stand-in returns a query-focused extract: the
turns (or sentences of long paragraphs) that share most words with the query, in their original
order, each session's date-marker line kept in front of its turns so the answerer can still date
them. Deterministic and bounded (MAX_CHARS).

How the query and the text are found (all message contents are read as one text):
  - query: the first line starting "Query:", "Question:" or "Search query:" (the rest of that
    line); otherwise the first non-empty line;
  - text: everything after a header line "Texts:", "Text:", "Context:", "Documents:",
    "Memory:", "Memories:", "Passages:", "Notes:" (header text on the same line included);
    otherwise everything after the query line.
When no query words can be found, or no turn shares a word with the query, the reply is the
first FALLBACK_CHARS characters of the text.
"""
from __future__ import annotations

import math
import re

from mstar.offline.text import (idf_weights, marker_date, query_terms, split_sentences,
                                split_speaker, stem, strip_marker, content_set)

MAX_CHARS = 1500
FALLBACK_CHARS = 1000
LONG_LINE = 300  # lines longer than this are cut into sentences before scoring

_QUERY_RE = re.compile(r"^\s*(?:search\s+)?(?:query|question)\s*:\s*(.*)$", re.I)
_TEXT_HEADER_RE = re.compile(r"^\s*(?:texts?|context|documents?|memory|memories|passages?|"
                             r"notes?)\s*:\s*(.*)$", re.I)


def find_query_and_text(prompt: str) -> tuple[str, str]:
    """(query, text) of a free-form toolkit prompt; see the module docstring."""
    lines = prompt.splitlines()
    query_at = next((i for i, line in enumerate(lines) if _QUERY_RE.match(line)), None)
    if query_at is not None:
        query = _QUERY_RE.match(lines[query_at]).group(1)
    else:
        query_at = next((i for i, line in enumerate(lines) if line.strip()), 0)
        query = lines[query_at] if lines else ""
    header_at = next((i for i, line in enumerate(lines) if _TEXT_HEADER_RE.match(line)), None)
    if header_at is not None:
        first = _TEXT_HEADER_RE.match(lines[header_at]).group(1)
        text_lines = ([first] if first.strip() else []) + lines[header_at + 1:]
    else:
        text_lines = lines[query_at + 1:]
    return query.strip(), "\n".join(text_lines).strip()


def _pieces(text: str) -> list[tuple[int, str, int | None]]:
    """(line index, piece, index of its date-marker line) for every turn or sentence."""
    out = []
    marker_at = None
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        if marker_date(line) is not None:
            if not strip_marker(line).strip():
                marker_at = i  # a pure marker line; it dates what follows
                continue
            out.append((i, line.strip(), None))  # a self-dated turn: "[date] Maya: ..."
            continue
        if len(line) <= LONG_LINE:
            out.append((i, line.strip(), marker_at))
            continue
        speaker, body = split_speaker(line)
        for sentence in split_sentences(body):
            out.append((i, f"{speaker}: {sentence}" if speaker else sentence, marker_at))
    return out


def query_focused_extract(query: str, text: str, max_chars: int = MAX_CHARS) -> str:
    """The pieces of `text` that best match `query`, in text order, with their date markers."""
    terms = query_terms(query)
    pieces = _pieces(text)
    if not terms or not pieces:
        return text[:FALLBACK_CHARS]
    bags = []
    for _, piece, _ in pieces:
        speaker, body = split_speaker(strip_marker(piece))
        bags.append(content_set(body) | ({stem(speaker.lower())} if speaker else set()))
    idf = idf_weights(bags)
    # fsum: exact, so ties do not depend on the set's (hash-seeded) iteration order.
    scores = [len(terms & bag) + 0.01 * math.fsum(idf[t] for t in terms & bag) for bag in bags]
    ranked = sorted((k for k in range(len(pieces)) if scores[k] > 0),
                    key=lambda k: (-scores[k], k))
    if not ranked:
        return text[:FALLBACK_CHARS]
    lines = text.splitlines()
    chosen: set[int] = set()
    markers: set[int] = set()
    used = 0
    for k in ranked:
        marker = pieces[k][2]
        cost = len(pieces[k][1]) + 1
        if marker is not None and marker not in markers:
            cost += len(lines[marker].strip()) + 1
        if used + cost > max_chars:
            continue  # a shorter, lower-ranked piece may still fit
        chosen.add(k)
        used += cost
        if marker is not None:
            markers.add(marker)
    out, shown_markers = [], set()
    for k in sorted(chosen):
        marker = pieces[k][2]
        if marker is not None and marker not in shown_markers:
            out.append(lines[marker].strip())
            shown_markers.add(marker)
        out.append(pieces[k][1])
    return "\n".join(out) if out else text[:FALLBACK_CHARS]


class OfflineToolkitModel:
    """Deterministic stand-in for the LLM behind `toolkit.llm_completion`."""

    def complete(self, messages: list[dict]) -> str:
        prompt = "\n".join(str(m.get("content", "")) for m in messages)
        query, text = find_query_and_text(prompt)
        return query_focused_extract(query, text)

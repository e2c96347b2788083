"""Numeric-knob mutations: top-k, over-fetch, chunk size, character caps, ranking weight.

A knob is a regex that finds a number in the program plus a ladder of allowed values. Moving
it one or two rungs up or down is a mutation ("Raise top-k: 5 -> 8"). The edit leaves a
`# <label>: old -> new; why` comment above the line and replaces that comment on the next
move, so a knob moved five times keeps one comment. Ladders are the bounds: the final
`return ...[:3000]` of read() is never a knob, and list caps stop at 3000.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Callable

from mstar.offline import source_edits as se
from mstar.offline.mutation_types import Edit, Mutation


@dataclass(frozen=True)
class Knob:
    name: str
    label: str                      # used in titles and in the "# label: old -> new" comment
    patterns: tuple[str, ...]       # regexes with a group "n"; the first one that matches is used
    ladder: tuple[float, ...]       # allowed values, ascending; a move is 1-2 rungs
    why_up: str
    why_down: str
    value_range: tuple[float, float] = (0, float("inf"))  # which current values are this knob's
    together: bool = False          # change every match (a def default and its call site)
    skip_return: bool = False       # never touch a `return ...[:N]` (the final read() cut)
    requires: str | None = None     # a regex the whole source must match


KNOBS: tuple[Knob, ...] = (
    Knob("top_k", "top-k", (r"\btop_k = (?P<n>\d+)\b", r"n_results=min\((?P<n>\d+),"),
         (1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30),
         "answers were missing from the few units retrieved per query",
         "too many weakly related units crowd the answer out of the retrieved text"),
    Knob("overfetch", "over-fetch factor", (r"n_results=min\(top_k \* (?P<n>\d+),",),
         (2, 3, 4, 5, 6, 8),
         "the re-ranker only sees the embedding's top few candidates",
         "over-fetching drags loosely related chunks into the re-ranking"),
    Knob("chunk_size", "chunk size", (r"max_chars=(?P<n>\d+)",),
         (150, 200, 250, 300, 400, 500, 600, 800, 1000, 1200, 1500, 2000),
         "facts are split across chunk boundaries, so one chunk rarely holds the whole answer",
         "large chunks dilute the embedding, so the chunk holding the answer ranks low",
         together=True, requires=r"self\.chunk\(\w+, max_chars="),
    Knob("list_cap", "character cap", (r"\)\[:(?P<n>\d+)\]",),
         (200, 300, 400, 500, 600, 800, 1000, 1200, 1500, 2000, 2500, 3000),
         "the stored text is cut off before the entries that answer the question",
         "one long section crowds the others out of the 3000-character result",
         value_range=(50, 3000), skip_return=True),
    Knob("context_cap", "context cap", (r"\)\[:(?P<n>\d+)\]",),
         (5000, 10000, 15000, 20000, 30000, 40000, 60000, 80000, 120000),
         "the texts given to the summariser are cut before the relevant ones",
         "the summariser gets so much text that the relevant part is lost in it",
         value_range=(3001, 10**7), skip_return=True),
    Knob("evidence_budget", "speaker evidence budget",
         (r"def with_entity_evidence\(self, query_text, text, budget=(?P<n>\d+)\)",),
         (400, 600, 800, 1200, 1600, 2000, 2400, 2800),
         "the named person's turns are cut before the one that answers",
         "the named person's turns crowd out what the rest of read() found"),
    Knob("rank_weight", "rank weight", (r"rank_weight=(?P<n>\d+(?:\.\d+)?)",),
         (0.0, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0),
         "word overlap alone promotes chunks that repeat common words; the embedding order "
         "should count more",
         "the embedding order overrides clear word matches with the question"),
)


def _knob_matches(knob: Knob, source: str) -> list[tuple[int, re.Match]]:
    if knob.requires and not re.search(knob.requires, source):
        return []
    lines = source.split("\n")
    for pattern in knob.patterns:
        found = []
        for i, line in enumerate(lines):
            if line.lstrip().startswith("#") or (knob.skip_return and line.lstrip().startswith("return ")):
                continue
            for m in re.finditer(pattern, line):
                if knob.value_range[0] <= float(m.group("n")) <= knob.value_range[1]:
                    found.append((i, m))
        if found:
            return found
    return []


def _step(ladder: tuple[float, ...], value: float, up: bool, rungs: int) -> float | None:
    """The ladder value `rungs` rungs above/below `value` (clamped), or None at the end."""
    if up:
        above = [i for i, v in enumerate(ladder) if v > value]
        return ladder[min(above[0] + rungs - 1, len(ladder) - 1)] if above else None
    below = [i for i, v in enumerate(ladder) if v < value]
    return ladder[max(below[-1] - rungs + 1, 0)] if below else None


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _knob_applies(knob: Knob, up: bool) -> Callable[[str], bool]:
    def applies(source: str) -> bool:
        return any(_step(knob.ladder, float(m.group("n")), up, 1) is not None
                   for _, m in _knob_matches(knob, source))
    return applies


def _knob_apply(knob: Knob, up: bool) -> Callable[[str, random.Random], Edit | None]:
    def apply(source: str, rng: random.Random) -> Edit | None:
        matches = [(i, m) for i, m in _knob_matches(knob, source)
                   if _step(knob.ladder, float(m.group("n")), up, 1) is not None]
        if not matches:
            return None
        lines = source.split("\n")
        if knob.together:
            targets = matches
            # The value that matters is the one at the call site, not a def default.
            shown = next(((i, m) for i, m in matches if not lines[i].lstrip().startswith("def ")), matches[0])
        else:
            shown = rng.choice(matches)
            targets = [shown]
        old = float(shown[1].group("n"))
        new = _step(knob.ladder, old, up, rng.choice((1, 1, 2)))
        by_line: dict[int, list[re.Match]] = {}
        for i, m in targets:
            by_line.setdefault(i, []).append(m)
        for i, ms in by_line.items():
            for m in sorted(ms, key=lambda m: m.start("n"), reverse=True):
                lines[i] = lines[i][:m.start("n")] + _fmt(new) + lines[i][m.end("n"):]
        why = knob.why_up if up else knob.why_down
        where = _target_name(lines[shown[0]])
        se.set_comment_above(lines, shown[0], knob.label, f"{_fmt(old)} -> {_fmt(new)}; {why}")
        verb = "Raise" if up else "Lower"
        return Edit("\n".join(lines), f"{verb} {knob.label}: {_fmt(old)} -> {_fmt(new)}{where}",
                    f"Possibly {why}.", f"Moved the {knob.label} from {_fmt(old)} to {_fmt(new)}{where}.")
    return apply


def _target_name(line: str) -> str:
    m = re.match(r"\s*(\w+) = ", line)
    return f" ({m.group(1)})" if m and m.group(1) not in ("top_k", "results", "chunks") else ""


def knob_mutations() -> list[Mutation]:
    out = []
    for knob in KNOBS:
        for up in (True, False):
            name = f"{knob.name}_{'up' if up else 'down'}"
            out.append(Mutation(name, f"{'Raise' if up else 'Lower'} {knob.label}",
                                _knob_applies(knob, up), _knob_apply(knob, up)))
    return out

"""Find where a V4A hunk goes in the file (docs/patch-format.md §4).

Matching is pass-major: every position is tried exactly (P0), then with
trailing whitespace ignored (P1), then all outer whitespace (P2), then with
typographic punctuation mapped to ASCII (P3); anchors also get a prefix pass
(P4). The first hit wins, so a loose pass never beats an exact match further
down. The search only moves forward from a cursor, which keeps trim-based
matching from jumping to a look-alike line above the previous hunk.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from mstar.patch.parse import Hunk, HunkLine, PatchError

_PUNCT = str.maketrans(
    {**{chr(c): "-" for c in [*range(0x2010, 0x2016), 0x2212]},
     **{chr(c): "'" for c in range(0x2018, 0x201C)},
     **{chr(c): '"' for c in range(0x201C, 0x2020)},
     **{chr(c): " " for c in [0x00A0, *range(0x2002, 0x200B), 0x202F, 0x205F, 0x3000]}})


def _p3(s: str) -> str:
    return s.translate(_PUNCT).strip()


NORMS = (lambda s: s, str.rstrip, str.strip, _p3)
PASS_NAMES = ("P0", "P1", "P2", "P3", "P4")


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def split_file(text: str) -> tuple[list[str], bool, str]:
    """Spec 4.1: (lines without line ends, final_nl, eol) of a file's text."""
    eol = "\r\n" if "\r\n" in text else "\n"
    text = text.replace("\r\n", "\n")
    if text == "":
        return [], True, eol
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
        return lines, True, eol
    return lines, False, eol


def join_file(lines: list[str], final_nl: bool, eol: str) -> str:
    """Spec 4.5: the inverse of split_file."""
    text = "\n".join(lines) + ("\n" if final_nl and lines else "")
    return text.replace("\n", eol) if eol != "\n" else text


class FileView:
    """The file lines of one section, with every pass's normalisation precomputed."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.norm = [[f(ln) for ln in lines] for f in NORMS]

    def __len__(self) -> int:
        return len(self.lines)

    def find_block(self, old: list[str], start: int, stop: int | None = None) -> tuple[int, int] | None:
        """First (position, pass) with start <= position < stop where `old` matches."""
        m, n = len(old), len(self.lines)
        last = n - m if stop is None else min(n - m, stop - 1)
        for k, f in enumerate(NORMS):
            pat = [f(x) for x in old]
            fl = self.norm[k]
            for i in range(max(start, 0), last + 1):
                if fl[i] == pat[0] and fl[i:i + m] == pat:
                    return i, k
        return None

    def find_anchor(self, anchor: str, start: int, stop: int) -> tuple[int, int] | None:
        """First (index, pass) of the anchor line in [start, stop), passes P0-P4."""
        stop = min(stop, len(self.lines))
        for k, f in enumerate(NORMS):
            a, fl = f(anchor), self.norm[k]
            for i in range(max(start, 0), stop):
                if fl[i] == a:
                    return i, k
        a, fl = _p3(anchor), self.norm[3]
        if a:  # P4: `@@ class Dog` matches `class Dog(Animal):`, not `class Doggo:`
            for i in range(max(start, 0), stop):
                if fl[i].startswith(a) and (len(fl[i]) == len(a) or not _word_char(fl[i][len(a)])):
                    return i, 4
        return None


@dataclass
class Placement:
    """Where one hunk landed and what it does, in the coordinates of its section's file."""
    start: int                  # replaced region [start, end) (leading/trailing context trimmed)
    end: int
    new_lines: list[str]
    cursor: int                 # where the next hunk's search starts
    match_pass: str             # P0-P3 for blocks; "eof" / "anchor" / "empty-file" for pure insertions
    position: int               # block match position, or insertion index
    anchor_positions: list[int] = field(default_factory=list)
    anchor_passes: list[str] = field(default_factory=list)
    retried_without_blank: bool = False
    eof_position: bool = False  # matched at the end of the file because of *** End of File


def _where(hunk: Hunk) -> str:
    return f"hunk {hunk.number} (patch line {hunk.patch_line})"


def _fail(hunk: Hunk, rule: str, text: str) -> PatchError:
    return PatchError(f"{_where(hunk)}: {text}", rule=rule, hunk=hunk.number, patch_line=hunk.patch_line)


def _anchor_not_found(view: FileView, hunk: Hunk, anchor: str, start: int, filename: str) -> PatchError:
    text = f"'@@ {anchor.strip()}' not found in {filename}"
    above = view.find_anchor(anchor, 0, start) if start > 0 else None
    if above is not None:
        text += (f" at or after line {start + 1}; it occurs only above, at line {above[0] + 1} "
                 "(hunks must be in file order, and stacked @@ lines go from outer to inner scope)")
    else:
        if start > 0:
            text += f" at or after line {start + 1}"
        lines = [ln.strip() for ln in view.lines[start:]]
        close = difflib.get_close_matches(anchor.strip(), lines, n=1, cutoff=0.6)
        if close:
            text += f" (closest line: {close[0]!r})"
    text += ". An @@ line must copy a line of the file, e.g. its 'def' or 'class' line."
    return _fail(hunk, "anchor-not-found", text)


def _locate_anchors(view: FileView, hunk: Hunk, cursor: int, prev_anchors: list[str],
                    filename: str) -> tuple[int, list[int], list[str]]:
    """Spec 4.4 step 2: returns (block_start, anchor positions, anchor passes)."""
    satisfied = {a.strip() for a in prev_anchors}
    anchors = list(hunk.anchors)
    while anchors and anchors[0].strip() in satisfied:
        anchors.pop(0)  # the previous hunk's scope is still open
    block_start, positions, passes = cursor, [], []
    for anchor in anchors:
        hit = view.find_anchor(anchor, positions[-1] + 1 if positions else cursor, len(view))
        if hit is not None:
            block_start = hit[0]
            positions.append(hit[0])
            passes.append(PASS_NAMES[hit[1]])
        elif not positions and view.find_anchor(anchor, 0, cursor) is not None:
            continue  # already passed by an earlier hunk: keep the cursor
        else:
            raise _anchor_not_found(view, hunk, anchor, positions[-1] + 1 if positions else cursor, filename)
    return block_start, positions, passes


def _pure_insertion(view: FileView, hunk: Hunk, cursor: int, filename: str) -> Placement:
    added = [ln.text for ln in hunk.lines]
    positions, passes = [], []
    if hunk.eof:
        # End of File decides alone (docs/patch-format.md §4, first rule), so an anchor repeated from an
        # earlier hunk, now above the cursor, does no harm here.
        index, how = len(view), "eof"
    elif hunk.anchors:
        for anchor in hunk.anchors:
            start = positions[-1] + 1 if positions else cursor
            hit = view.find_anchor(anchor, start, len(view))
            if hit is None:
                raise _anchor_not_found(view, hunk, anchor, start, filename)
            positions.append(hit[0])
            passes.append(PASS_NAMES[hit[1]])
        index, how = positions[-1] + 1, "anchor"
    elif not view.lines:
        index, how = 0, "empty-file"
    else:
        raise _fail(hunk, "ambiguous-insertion",
                    "this hunk only adds lines and has no context line, '@@' anchor or "
                    "'*** End of File', so where it goes is ambiguous; add 1-3 unchanged lines "
                    "around the new lines, each with a leading space")
    return Placement(index, index, added, index, how, index, positions, passes)


def _strip_blank_context(lines: list[HunkLine]) -> list[HunkLine]:
    lo, hi = 0, len(lines)
    while lo < hi and lines[lo].kind == " " and not lines[lo].text.strip():
        lo += 1
    while hi > lo and lines[hi - 1].kind == " " and not lines[hi - 1].text.strip():
        hi -= 1
    return lines[lo:hi]


def _find(view: FileView, lines: list[HunkLine], eof: bool, block_start: int) -> tuple[int, int, bool] | None:
    """Spec 4.4 step 3 for one version of the hunk: (position, pass, at_eof) or None."""
    old = [ln.text for ln in lines if ln.kind != "+"]
    tail = len(view) - len(old)
    if eof and tail >= block_start:
        hit = view.find_block(old, tail, tail + 1)
        if hit is not None:
            return hit[0], hit[1], True
    hit = view.find_block(old, block_start)
    return None if hit is None else (hit[0], hit[1], False)


def _edit(view: FileView, lines: list[HunkLine], p: int) -> tuple[int, int, list[str]]:
    """Spec 4.4 step 4, as the replaced region with unchanged context trimmed off both ends.

    Trimming keeps consecutive hunks from overlapping when one reuses the
    previous hunk's trailing context; end == the cursor rule of step 5.
    """
    out, i = [], p
    for ln in lines:
        if ln.kind == " ":
            out.append(view.lines[i])  # the file's text, not the patch's
            i += 1
        elif ln.kind == "-":
            i += 1
        else:
            out.append(ln.text)
    kinds = [ln.kind for ln in lines]
    lead = next(j for j, k in enumerate(kinds) if k != " ")
    trail = next(j for j, k in enumerate(reversed(kinds)) if k != " ")
    return p + lead, i - trail, out[lead:len(out) - trail]


def locate_hunk(view: FileView, hunk: Hunk, cursor: int, prev_anchors: list[str],
                filename: str = "program.py") -> Placement:
    """Place one hunk at or after `cursor`; raises PatchError with a message for the model."""
    if not hunk.old:
        return _pure_insertion(view, hunk, cursor, filename)
    block_start, positions, passes = _locate_anchors(view, hunk, cursor, prev_anchors, filename)
    lines, retried = hunk.lines, False
    found = _find(view, lines, hunk.eof, block_start)
    if found is None:
        trimmed = _strip_blank_context(lines)
        if len(trimmed) < len(lines) and any(ln.kind != "+" for ln in trimmed):
            found = _find(view, trimmed, hunk.eof, block_start)
            lines, retried = trimmed, True
    if found is None:
        raise _not_found(view, hunk, cursor, block_start, positions, filename)
    p, k, at_eof = found
    if not any(ln.kind != " " for ln in lines):  # context only: located, changes nothing
        return Placement(p, p, [], p, PASS_NAMES[k], p, positions, passes, retried, at_eof)
    start, end, new = _edit(view, lines, p)
    return Placement(start, end, new, end, PASS_NAMES[k], p, positions, passes, retried, at_eof)


# ---------------------------------------------------------------- messages

def _closest(view: FileView, old: list[str], prefer_from: int) -> tuple[int, int, int]:
    """(position, first differing offset, lines in common) of the region most like `old`."""
    norm_old, fl = [_p3(x) for x in old], view.norm[3]
    best, best_score = 0, -1
    for i in range(max(1, len(view) - len(old) + 1)):
        score = sum(1 for j, x in enumerate(norm_old) if i + j < len(fl) and fl[i + j] == x)
        if score > best_score or (score == best_score and best < prefer_from <= i):
            best, best_score = i, score
    diff = next((j for j, x in enumerate(norm_old) if best + j >= len(fl) or fl[best + j] != x), 0)
    return best, diff, best_score


def _most_similar_line(view: FileView, text: str) -> int:
    target = _p3(text)
    ratios = [difflib.SequenceMatcher(None, target, ln).ratio() for ln in view.norm[3]]
    return max(range(len(ratios)), key=ratios.__getitem__)


def _not_found(view: FileView, hunk: Hunk, cursor: int, block_start: int, positions: list[int],
               filename: str) -> PatchError:
    old_lines = [ln for ln in hunk.lines if ln.kind != "+"]
    old = [ln.text for ln in old_lines]
    variants = [old]
    trimmed = [ln.text for ln in _strip_blank_context(hunk.lines) if ln.kind != "+"]
    if trimmed and trimmed != old:
        variants.append(trimmed)
    earlier = next((hit for v in variants if (hit := view.find_block(v, 0, block_start))), None)
    if earlier is not None:
        at = earlier[0] + 1
        if positions and earlier[0] >= cursor:
            return _fail(hunk, "above-anchor",
                         f"its lines were found only before its '@@' anchor (line {block_start + 1}), "
                         f"at line {at}; an anchor must be a line above the lines it scopes "
                         "(hunks must be in file order)")
        return _fail(hunk, "out-of-order",
                     f"its lines were found only before the previous hunk (hunks must be in file "
                     f"order): they occur at line {at}, but the previous hunk already reached line {cursor}. "
                     "Order hunks top to bottom and merge hunks that overlap")
    where = f"at or after line {block_start + 1}" if block_start > 0 else "anywhere"
    shown = old_lines if len(old_lines) <= 40 else old_lines[:40]
    listing = "\n".join(f"  patch line {ln.patch_line:>4} | {ln.text}" for ln in shown)
    if len(shown) < len(old_lines):
        listing += f"\n  ... ({len(old_lines) - len(shown)} more)"
    text = (f"could not find its {len(old)} context/'-' lines in {filename} {where}. "
            f"The hunk expects, in this order:\n{listing}")
    if view.lines:
        pos, j, common = _closest(view, old, block_start)
        if common:
            found_line = view.lines[pos + j] if pos + j < len(view) else "<end of file>"
            text += (f"\nClosest region starts at file line {pos + 1}; first difference at file line "
                     f"{pos + j + 1} (patch line {old_lines[j].patch_line}):\n"
                     f"  patch expects: {old[j]!r}\n  file has:      {found_line!r}")
        else:
            ref = next((ln for ln in old_lines if ln.text.strip()), old_lines[0])
            k = _most_similar_line(view, ref.text)
            text += (f"\nNone of these lines is in {filename}. The line most like patch line "
                     f"{ref.patch_line} ({ref.text!r}) is file line {k + 1}: {view.lines[k]!r}")
    else:
        text += f"\n{filename} is empty."
    text += "\nCopy context and '-' lines exactly from the current program."
    return _fail(hunk, "context-not-found", text)

"""Apply the reflector's V4A patch to program.py (format: docs/patch-format.md).

    apply_patch(original, patch_text) -> new text         raises PatchError
    apply_patch_detailed(...) -> PatchResult               same, plus per-hunk reports

Pure functions, all or nothing: a rejected patch changes nothing and raises
PatchError (a ValueError) whose message tells the model what to fix. The
pieces: `parse` cuts the patch out of the reply and parses it,
`locate` finds where each hunk goes, this module normalises line ends,
applies the hunks of each section and joins the result.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from mstar.patch.locate import FileView, Placement, join_file, locate_hunk, split_file
from mstar.patch.parse import PatchError, Section, basename, parse_patch, patch_lines

__all__ = ["PatchError", "HunkReport", "PatchResult", "apply_patch", "apply_patch_detailed", "split_file"]


@dataclass
class HunkReport:
    """How one hunk was placed, for logs: the pass that matched and where."""
    match_pass: str              # "P0"-"P3" (exact .. punctuation-mapped), or for pure
                                 # insertions "eof" / "anchor" / "empty-file"
    position: int                # 0-based line in the file as its section found it
    hunk: int = 0                # 1-based hunk number in the patch
    section: int = 0             # 0-based section index
    patch_line: int = 0
    anchor_passes: list[str] = field(default_factory=list)
    retried_without_blank: bool = False
    eof_position: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class PatchResult:
    text: str
    hunks: list[HunkReport]
    replaced_file: bool = False  # an '*** Add File' section replaced the whole file

    def to_dict(self) -> dict:
        return asdict(self)


def _apply_update(lines: list[str], section: Section, index: int, filename: str,
                  reports: list[HunkReport]) -> list[str]:
    """Locate every hunk against the section's starting text, then splice once."""
    view = FileView(lines)
    cursor, prev_anchors = 0, []
    placements: list[Placement] = []
    for hunk in section.hunks:
        placed = locate_hunk(view, hunk, cursor, prev_anchors, filename)
        placements.append(placed)
        reports.append(HunkReport(placed.match_pass, placed.position, hunk.number, index,
                                  hunk.patch_line, placed.anchor_passes,
                                  placed.retried_without_blank, placed.eof_position))
        cursor, prev_anchors = placed.cursor, hunk.anchors
    out, pos = [], 0
    for placed in placements:
        # Regions never overlap: each hunk is searched from the previous one's cursor,
        # which is where its replaced region ends.
        assert placed.start >= pos, "hunk regions overlap"
        out.extend(lines[pos:placed.start])
        out.extend(placed.new_lines)
        pos = max(pos, placed.end)
    out.extend(lines[pos:])
    return out


def apply_patch_detailed(original_text: str, patch_text: str, *,
                         filename: str = "program.py") -> PatchResult:
    """Apply a V4A patch to `filename`'s text; raises PatchError, never applies part of it."""
    if not isinstance(original_text, str) or not isinstance(patch_text, str):
        raise TypeError("apply_patch takes the file text and the patch text as str")
    if basename(filename) != filename or not filename:
        raise ValueError(f"filename must be a plain file name, got {filename!r}")
    lines, final_nl, eol = split_file(original_text)
    sections = parse_patch(patch_lines(patch_text), filename)
    reports: list[HunkReport] = []
    replaced = False
    for index, section in enumerate(sections):
        if section.kind == "add":
            lines, final_nl, replaced = list(section.add_lines), True, True
        else:
            lines = _apply_update(lines, section, index, filename, reports)
    return PatchResult(join_file(lines, final_nl, eol), reports, replaced)


def apply_patch(original_text: str, patch_text: str, *, filename: str = "program.py") -> str:
    """Apply a V4A patch to `filename`'s text and return the new text; raises PatchError."""
    return apply_patch_detailed(original_text, patch_text, filename=filename).text

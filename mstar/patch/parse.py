"""Read a V4A patch out of a reflector reply (docs/patch-format.md §2-§3).

Two steps, both pure: find the patch body inside whatever the model wrapped
around it (commit message, fences, heredoc), then turn the body into sections
and hunks. Nothing here looks at the file being patched; wrong context is
caught later, when hunks are located (`mstar.patch.locate`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

# Marker lines are compared after strip(); case and inner spacing are forgiven
# because models "pad" them, e.g. `*** Begin Patch ***` or `***  End Patch`.
_BEGIN = re.compile(r"\*{3}\s*begin patch(\s*\*{3})?", re.I)
_END = re.compile(r"\*{3}\s*end patch(\s*\*{3})?", re.I)
_FILE = re.compile(r"\*{3}\s*(update|add|delete) file\s*:\s*(.*)", re.I)
_MOVE = re.compile(r"\*{3}\s*move to\s*:\s*(.*)", re.I)
_EOF = re.compile(r"\*{3}\s*end of file(\s*\*{3})?", re.I)
# `@@ -12,7 +12,8 @@ heading`: unified-diff line numbers carry no anchor.
_LINE_NUMBERS = re.compile(r"-\d+(,\d+)?\s+\+\d+(,\d+)?(\s*@@.*)?")


class PatchError(ValueError):
    """A patch that was rejected; the message is written for the reflector.

    `rule` is a short stable tag (e.g. "anchor-not-found") for logs and tests;
    `hunk` and `patch_line` locate the problem when they are known.
    """

    def __init__(self, message: str, *, rule: str = "invalid", hunk: int | None = None,
                 patch_line: int | None = None):
        super().__init__(message)
        self.rule = rule
        self.hunk = hunk
        self.patch_line = patch_line


@dataclass(frozen=True)
class HunkLine:
    kind: str          # " " context, "-" delete, "+" insert
    text: str
    patch_line: int    # 1-based line of the patch text, for messages


@dataclass
class Hunk:
    number: int                    # 1-based over the whole patch
    patch_line: int                # its first line (the first @@, or its first body line)
    anchors: list[str] = field(default_factory=list)
    lines: list[HunkLine] = field(default_factory=list)
    eof: bool = False

    @property
    def old(self) -> list[str]:
        """The lines the hunk expects in the file: context and `-` lines, in order."""
        return [ln.text for ln in self.lines if ln.kind != "+"]

    @property
    def changes(self) -> bool:
        return any(ln.kind != " " for ln in self.lines)


@dataclass
class Section:
    kind: str                      # "update" or "add"
    path: str
    patch_line: int
    hunks: list[Hunk] = field(default_factory=list)
    add_lines: list[str] = field(default_factory=list)


def is_marker(stripped: str) -> bool:
    """True when a stripped line is one of the markers the parser acts on."""
    return any(rx.fullmatch(stripped) for rx in (_BEGIN, _END, _FILE, _MOVE, _EOF))


def basename(path: str) -> str:
    """`./program.py`, `"/abs/dir/program.py"`, `` `program.py` `` -> program.py."""
    cleaned = path.strip().strip("'\"`").strip()
    return re.split(r"[\\/]", cleaned)[-1]


def parse_at_header(line: str) -> str | None:
    """The anchor of an `@@` line, or None for a bare header (docs/patch-format.md §3)."""
    rest = line.lstrip()[2:]
    if rest.startswith(" "):
        rest = rest[1:]
    if not rest.strip() or _LINE_NUMBERS.fullmatch(rest.strip()):
        return None
    if rest.rstrip().endswith("@@"):
        rest = rest.rstrip()[:-2].rstrip()
        if not rest.strip():
            return None
    return rest  # indentation kept: it is part of what the anchor says


# ---------------------------------------------------------------- envelope

def patch_lines(patch_text: str) -> list[str]:
    """The patch's lines with CRLF and a trailing CR removed (docs/patch-format.md §1)."""
    return [ln[:-1] if ln.endswith("\r") else ln for ln in patch_text.replace("\r\n", "\n").split("\n")]


def extract_body(lines: list[str]) -> list[tuple[int, str]]:
    """Cut the patch body out of the reply (docs/patch-format.md §2): [(1-based patch line, text)].

    When the body does not start with a file header (after *** Begin Patch, or
    a bare @@ body), its first lines belong to an implicit `Update File`.
    """
    begins = [i for i, ln in enumerate(lines) if _BEGIN.fullmatch(ln.strip())]
    if len(begins) > 1:
        where = ", ".join(str(i + 1) for i in begins)
        raise PatchError(f"found {len(begins)} '*** Begin Patch' lines (patch lines {where}); "
                         "send exactly one patch per reply", rule="multiple-begin")
    if begins:
        start = begins[0] + 1
    else:
        header = next((i for i, ln in enumerate(lines) if _FILE.fullmatch(ln.strip())), None)
        if header is not None:
            start = header
        else:
            first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
            if first is None or not lines[first].lstrip().startswith("@@"):
                raise PatchError("no V4A patch found: expected '*** Begin Patch', then "
                                 "'*** Update File: program.py', hunks, and '*** End Patch'",
                                 rule="no-patch")
            start = first
    end = next((i for i in range(start, len(lines)) if _END.fullmatch(lines[i].strip())), None)
    if end is None:
        end = next((i for i in range(start, len(lines)) if lines[i].startswith("```")), len(lines))
    while end > start and not lines[end - 1].strip():
        end -= 1
    return [(i + 1, lines[i]) for i in range(start, end)]


# ---------------------------------------------------------------- body

class _BodyParser:
    """State machine over the body lines; one instance per patch."""

    def __init__(self, filename: str):
        self.filename = filename
        self.sections: list[Section] = []
        self.section: Section | None = None
        self.hunk: Hunk | None = None        # the open hunk
        self.hunk_count = 0
        self.after_eof = False               # last hunk closed by *** End of File
        self.move_allowed = False            # right after *** Update File
        self.diff_headers_allowed = False    # before the first line of an Update section
        self.trailing_blank_adds = 0         # Add File: blank lines not (yet) followed by a line

    def run(self, body: list[tuple[int, str]]) -> list[Section]:
        i = 0
        while i < len(body):
            i += self.line(body, i)
        self.close_section()
        if not self.sections:
            raise PatchError(f"empty patch: no '*** Update File: {self.filename}' section and no "
                             "hunks", rule="empty-patch")
        has_change = any(s.kind == "add" or any(h.changes for h in s.hunks) for s in self.sections)
        if not has_change:
            raise PatchError("no changes: the patch has no '+' or '-' line", rule="no-changes")
        return self.sections

    # Returns how many body lines were consumed.
    def line(self, body: list[tuple[int, str]], i: int) -> int:
        no, line = body[i]
        stripped = line.strip()
        m = _FILE.fullmatch(stripped)
        if m:
            self.open_section(m.group(1).lower(), m.group(2), no)
            return 1
        m = _MOVE.fullmatch(stripped)
        if m:
            self.move_to(m.group(1), no)
            return 1
        if _EOF.fullmatch(stripped):
            self.end_of_file(no)
            return 1
        if line.startswith("***"):
            raise PatchError(f"patch line {no}: unknown marker {stripped!r}; known markers are "
                             "*** Begin Patch, *** Update File:, *** Add File:, *** Move to:, "
                             "*** End of File, *** End Patch", rule="unknown-marker", patch_line=no)
        if self.section is None:
            if not stripped:
                return 1
            # Body before any file header: only after *** Begin Patch or in a bare @@ body.
            self.section = Section("update", self.filename, no)
            self.diff_headers_allowed = True
        if self.section.kind == "add":
            return self.add_line(no, line, stripped)
        if stripped:
            self.move_allowed = False
        if self.diff_headers_allowed and stripped:
            self.diff_headers_allowed = False
            if line.startswith("---") and i + 1 < len(body) and body[i + 1][1].startswith("+++"):
                return 2  # unified-diff file headers carry nothing we need
        if self.hunk is None and not stripped:
            return 1
        if line.lstrip().startswith("@@"):
            self.at_header(no, line)
            return 1
        if line.startswith("\\"):
            return 1  # "\ No newline at end of file"
        self.body_line(no, line)
        return 1

    def open_section(self, kind: str, raw_path: str, no: int) -> None:
        self.close_section()
        path = raw_path.strip()
        if not path:
            raise PatchError(f"patch line {no}: file header without a path; write "
                             f"'*** Update File: {self.filename}'", rule="no-path", patch_line=no)
        if kind == "delete":
            raise PatchError(f"patch line {no}: '*** Delete File' is not allowed; only "
                             f"{self.filename} can be edited, with '*** Update File: {self.filename}'",
                             rule="delete-file", patch_line=no)
        if basename(path) != self.filename:
            raise PatchError(f"patch line {no}: only {self.filename} can be edited "
                             f"(the patch names {path!r})", rule="wrong-file", patch_line=no)
        self.section = Section(kind, path, no)
        self.move_allowed = self.diff_headers_allowed = kind == "update"
        self.trailing_blank_adds = 0

    def move_to(self, raw_path: str, no: int) -> None:
        if self.section is None or self.section.kind != "update" or not self.move_allowed:
            raise PatchError(f"patch line {no}: '*** Move to:' must come right after "
                             "'*** Update File:'", rule="misplaced-move", patch_line=no)
        if basename(raw_path) != self.filename:
            raise PatchError(f"patch line {no}: only {self.filename} can be edited; it cannot be "
                             f"moved to {raw_path.strip()!r}", rule="wrong-file", patch_line=no)
        self.move_allowed = False

    def end_of_file(self, no: int) -> None:
        if self.section is not None and self.section.kind == "add":
            return  # an Add File body already ends at the end of the file
        if self.hunk is None or not self.hunk.lines:
            raise PatchError(f"patch line {no}: '*** End of File' must follow the lines of a hunk",
                             rule="misplaced-eof", patch_line=no)
        self.hunk.eof = True
        self.close_hunk()
        self.after_eof = True

    def at_header(self, no: int, line: str) -> None:
        anchor = parse_at_header(line)
        if self.hunk is not None and not self.hunk.lines:
            if anchor is not None:      # stacked @@ lines narrow the scope
                self.hunk.anchors.append(anchor)
            return
        self.close_hunk()
        self.new_hunk(no)
        if anchor is not None:
            self.hunk.anchors.append(anchor)

    def body_line(self, no: int, line: str) -> None:
        if self.after_eof:
            raise PatchError(f"patch line {no}: after '*** End of File' the next hunk must start "
                             "with an @@ line", rule="line-after-eof", patch_line=no)
        if self.hunk is None:
            self.new_hunk(no)
        if line[:1] in (" ", "-", "+"):
            self.hunk.lines.append(HunkLine(line[0], line[1:], no))
        else:
            # "" is empty context; any other line is context whose space was forgotten.
            self.hunk.lines.append(HunkLine(" ", line, no))

    def add_line(self, no: int, line: str, stripped: str) -> int:
        if line.startswith("+"):
            self.section.add_lines.append(line[1:])
            self.trailing_blank_adds = 0
        elif not stripped:
            self.section.add_lines.append("")
            self.trailing_blank_adds += 1
        elif not line.startswith("\\"):
            raise PatchError(f"patch line {no}: every line of an '*** Add File' body must start "
                             f"with '+' (got {line!r})", rule="add-line", patch_line=no)
        return 1

    def new_hunk(self, no: int) -> None:
        self.hunk_count += 1
        self.hunk = Hunk(self.hunk_count, no)
        self.after_eof = False

    def close_hunk(self) -> None:
        hunk, self.hunk = self.hunk, None
        if hunk is None:
            return
        if not hunk.lines:
            head = f"'@@ {hunk.anchors[-1]}'" if hunk.anchors else "'@@'"
            raise PatchError(f"hunk {hunk.number} (patch line {hunk.patch_line}): {head} is followed "
                             "by no lines; a hunk needs context, '-' or '+' lines",
                             rule="empty-hunk", hunk=hunk.number, patch_line=hunk.patch_line)
        self.section.hunks.append(hunk)

    def close_section(self) -> None:
        self.close_hunk()
        section, self.section = self.section, None
        self.after_eof = False
        if section is None:
            return
        if section.kind == "add":
            if self.trailing_blank_adds:
                del section.add_lines[-self.trailing_blank_adds:]
        elif not section.hunks:
            raise PatchError(f"patch line {section.patch_line}: '*** Update File: {section.path}' "
                             "has no hunks", rule="no-hunks", patch_line=section.patch_line)
        self.sections.append(section)


def parse_patch(lines: list[str], filename: str = "program.py") -> list[Section]:
    """Patch lines (see patch_lines) -> sections; raises PatchError."""
    return _BodyParser(filename).run(extract_body(lines))

"""Write a V4A patch that turns one text into another (docs/patch-format.md).

The offline reflector proposes its changes with this, so the patch must apply
back to exactly `new`. Context lines alone can be ambiguous (repeated lines,
blank lines), so every hunk is placed with the applier's own locating code
before it is accepted; when it would land elsewhere, the hunk is rebuilt
without its anchor, then with leading context reaching back to where the
previous hunk ended (a block that starts at the cursor can only match
there). The whole patch is then applied for real; should that still differ,
a single whole-file hunk, then `*** Add File`, are the fallbacks.
"""
from __future__ import annotations

import re
from difflib import SequenceMatcher

from mstar.patch.apply import apply_patch
from mstar.patch.locate import FileView, locate_hunk, split_file
from mstar.patch.parse import Hunk, HunkLine, PatchError, basename, is_marker, parse_at_header

_SCOPE = re.compile(r"\s*(async\s+def|def|class)\b")

Op = tuple[str, int, int, int, int]  # difflib opcode


def _target_lines(new: str, final_nl: bool, eol: str) -> list[str]:
    """The line list the applier must produce to print `new` (docs/patch-format.md §5 in reverse)."""
    text = new.replace("\r\n", "\n") if eol == "\r\n" else new
    if text == "":
        return []
    if final_nl and text.endswith("\n"):
        text = text[:-1]
    # Without a final newline in the old file, a trailing "" element prints as one.
    return text.split("\n")


def _groups(ops: list[Op], context: int) -> list[list[Op]]:
    """Change opcodes, grouped when at most 2*context unchanged lines separate them."""
    groups, cur = [], []
    for op in ops:
        if op[0] != "equal":
            cur.append(op)
        elif cur and op[2] - op[1] > 2 * context:
            groups.append(cur)
            cur = []
        elif cur:
            cur.append(op)
    if cur:
        groups.append(cur)
    # A group ends with its last change; the unchanged lines after it become trailing context.
    return [g[:max(i for i, op in enumerate(g) if op[0] != "equal") + 1] for g in groups]


def _context_safe(text: str) -> bool:
    """False when ` text` would be read as a marker or an @@ header instead of context."""
    return not (is_marker(text.strip()) or text.lstrip().startswith("@@"))


def _hunk_lines(old: list[str], new: list[str], group: list[Op], s: int, e: int) -> list[HunkLine]:
    i1, i2 = group[0][1], group[-1][2]
    rows = [(" ", old[x]) for x in range(s, i1)]
    for tag, a1, a2, b1, b2 in group:
        if tag == "equal":
            rows += [(" ", x) for x in old[a1:a2]]
        if tag in ("delete", "replace"):
            rows += [("-", x) for x in old[a1:a2]]
        if tag in ("insert", "replace"):
            rows += [("+", x) for x in new[b1:b2]]
    rows += [(" ", old[x]) for x in range(i2, e)]
    lines = []
    for kind, text in rows:
        if kind == " " and not _context_safe(text):
            # Deleting and re-adding the line says the same thing and always parses.
            lines += [HunkLine("-", text, 0), HunkLine("+", text, 0)]
        else:
            lines.append(HunkLine(kind, text, 0))
    return lines


def _scope_line(old: list[str], new: list[str], group: list[Op]) -> int | None:
    """Index of the nearest `def`/`class` line enclosing the changed lines, as models write `@@`."""
    changed = old[group[0][1]:group[-1][2]] + [x for _, _, _, b1, b2 in group for x in new[b1:b2]]
    indents = [len(x) - len(x.lstrip()) for x in changed if x.strip()]
    if not indents:
        return None
    indent = min(indents)
    for k in range(group[0][1] - 1, -1, -1):
        line = old[k]
        if line.strip() and len(line) - len(line.lstrip()) < indent and _SCOPE.match(line):
            usable = parse_at_header("@@ " + line) == line and not line.endswith("\r")
            return k if usable else None
    return None


def _place_group(view: FileView, old: list[str], new: list[str], group: list[Op], context: int,
                 cursor: int, prev_anchors: list[str]) -> tuple[Hunk, int] | None:
    """The first candidate hunk for this group that the applier puts exactly where it belongs."""
    n = len(old)
    i1, i2 = group[0][1], group[-1][2]
    s0, e = max(cursor, i1 - context), min(n, i2 + context)
    tries: list[tuple[int, str | None]] = []
    scope = _scope_line(old, new, group)
    if scope is not None:
        # An anchor inside the leading context starts the block (the anchor match is inclusive).
        tries.append((max(s0, scope), old[scope]))
    tries += [(s0, None), (cursor, None)]
    for s, anchor in tries:
        e_ = e
        if s == i1 == i2 == e_ and i1 < n:
            # A pure insertion without context has no place; borrow one neighbour.
            s, e_ = (i1 - 1, e_) if i1 - 1 >= cursor else (s, i2 + 1)
        lines = _hunk_lines(old, new, group, s, e_)
        hunk = Hunk(0, 0, [anchor] if anchor is not None else [], lines, eof=(e_ == n and n > 0))
        try:
            placed = locate_hunk(view, hunk, cursor, prev_anchors)
        except PatchError:
            continue
        expected = s if hunk.old else i1
        if placed.position == expected and not placed.retried_without_blank:
            return hunk, placed.cursor
    return None


def _update_patch(old: list[str], new: list[str], context: int, path: str) -> str | None:
    if old == new:
        if not old:
            return None
        ops: list[Op] = [("replace", 0, 1, 0, 1)]  # a no-op change that still is a change
        if len(old) > 1:
            ops.append(("equal", 1, len(old), 1, len(old)))
    else:
        ops = SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    view = FileView(old)
    cursor, prev_anchors, hunks = 0, [], []
    for group in _groups(ops, context):
        placed = _place_group(view, old, new, group, context, cursor, prev_anchors)
        if placed is None:
            return None
        hunk, cursor = placed
        prev_anchors = hunk.anchors
        hunks.append(hunk)
    out = ["*** Begin Patch", f"*** Update File: {path}"]
    for hunk in hunks:
        out += [f"@@ {a}" for a in hunk.anchors] or ["@@"]
        out += [ln.kind + ln.text for ln in hunk.lines]
        if hunk.eof:
            out.append("*** End of File")
    out.append("*** End Patch")
    return "\n".join(out) + "\n"


def _add_file_patch(new: list[str], path: str) -> str:
    return "\n".join(["*** Begin Patch", f"*** Add File: {path}", *("+" + x for x in new),
                      "*** End Patch"]) + "\n"


def _why_not(old: str, new: str) -> str:
    crlf = "\r\n" in old
    old_lf = old.replace("\r\n", "\n")
    if crlf and "\n" in new.replace("\r\n", ""):
        return "the old text uses CRLF line ends, so every line of the result gets CRLF"
    if not crlf and "\r\n" in new:
        return "the old text uses LF line ends; a patch cannot introduce CRLF"
    new_lf = new.replace("\r\n", "\n")
    if (old_lf == "" or old_lf.endswith("\n")) and new_lf and not new_lf.endswith("\n"):
        return "the old text is empty or ends with a newline; a patch cannot remove the final newline"
    return "a line ends with a bare CR, which patch lines cannot carry"


def make_patch(old: str, new: str, *, path: str = "program.py", context: int = 3) -> str:
    """A V4A patch (Begin/Update/hunks/End) with apply_patch(old, patch) == new.

    Raises PatchError when no V4A patch can produce `new` from `old` (the
    format keeps the old file's line ends and final newline).
    """
    if not isinstance(old, str) or not isinstance(new, str):
        raise TypeError("make_patch takes the old and new text as str")
    if not isinstance(context, int) or context < 0:
        raise ValueError(f"context must be an int >= 0, got {context!r}")
    filename = basename(path)
    if not filename or "\n" in path:
        raise ValueError(f"path must name a file, got {path!r}")

    old_lines, final_nl, eol = split_file(old)
    target = _target_lines(new, final_nl, eol)
    candidates = (
        lambda: _update_patch(old_lines, target, context, path),
        # One hunk spanning the whole file can only match at line 1.
        lambda: _update_patch(old_lines, target, len(old_lines) + len(target) + 1, path),
        lambda: _add_file_patch(target, path),
    )
    for build in candidates:
        text = build()
        if text is None:
            continue
        try:
            if apply_patch(old, text, filename=filename) == new:
                return text
        except PatchError:
            pass
    raise PatchError(f"cannot write this change as a V4A patch: {_why_not(old, new)}",
                     rule="unrepresentable")

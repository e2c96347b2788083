"""Compile-fix rules of the offline reflector (paper Appendix G.3, without an LLM).

`repair(source, error)` tries a short list of rules, each aimed at an error a mutated
program can plausibly hit, and returns the first repair that yields a parsing, different
program -- or None, and the reflector then says honestly that it cannot fix the error.

Rules, in order:
1. a missing helper method or module that our mutations use -> add it back;
2. names starting with "_" (refused by RestrictedPython) -> drop the underscore;
3. read() output over the character limit -> cut every return of read() to the limit;
4. an import outside the allowlist that nothing uses -> remove it;
5. a line that does not parse -> re-indent it, close its brackets, or comment it out;
6. an error on a line just below one of our "# knob: old -> new" comments -> revert the knob.
"""
from __future__ import annotations

import io
import re
import tokenize

from mstar.offline import source_edits as se
from mstar.offline.mutation_types import Edit

ALLOWED_IMPORTS = ("json", "re", "math", "hashlib", "collections", "dataclasses", "typing",
                   "datetime", "textwrap", "sqlite3", "chromadb")
READ_LIMIT = 3000


def _edit(old: str, new: str | None, title: str, diagnosis: str, change: str) -> Edit | None:
    if new is None or new == old or not se.parses(new):
        return None
    return Edit(new, title, diagnosis, change)


def missing_helper(source: str, error: str) -> Edit | None:
    new, added = source, []
    for name in se.HELPERS:
        if re.search(rf"\b{name}\b", error) and se.method_node(source, name) is None:
            new = se.ensure_helper(new, name)
            added.append(f"method {name}")
    for module in ALLOWED_IMPORTS:
        if re.search(rf"name '{module}' is not defined", error) and not se.has_import(new, module):
            new = se.ensure_import(new, module)
            added.append(f"import {module}")
    return _edit(source, new, f"Fix: add missing {', '.join(added)}" if added else "",
                 "The program uses a name it never defines.", f"Added {', '.join(added)}.")


def _rename_tokens(source: str, rename: dict[str, str]) -> str:
    lines = source.split("\n")
    toks = [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type == tokenize.NAME and t.string in rename]
    for t in sorted(toks, key=lambda t: t.start, reverse=True):
        row, col = t.start[0] - 1, t.start[1]
        lines[row] = lines[row][:col] + rename[t.string] + lines[row][col + len(t.string):]
    return "\n".join(lines)


def underscore_names(source: str, error: str) -> Edit | None:
    if not re.search(r'start(?:s|ing)? with "?_|invalid (?:variable|attribute) name|underscore', error, re.I):
        return None
    try:
        names = {t.string for t in tokenize.generate_tokens(io.StringIO(source).readline)
                 if t.type == tokenize.NAME}
    except (tokenize.TokenError, SyntaxError):
        return None
    rename = {n: n.lstrip("_") for n in names
              if n.startswith("_") and not (n.startswith("__") and n.endswith("__"))
              and n.lstrip("_") and n.lstrip("_") not in names and not n.lstrip("_")[0].isdigit()}
    if not rename:
        return None
    return _edit(source, _rename_tokens(source, rename), "Fix: rename names that start with an underscore",
                 "The sandbox refuses names and attributes that start with '_'.",
                 "Renamed " + ", ".join(f"{a} -> {b}" for a, b in sorted(rename.items())) + ".")


def output_too_long(source: str, error: str) -> Edit | None:
    if not re.search(r"too long|over(?:size|long)|exceed|more than \d+ char|\d+ characters", error, re.I):
        return None
    span = se.method_lines(source, "read")
    if span is None:
        return None
    limit = READ_LIMIT
    lines = source.split("\n")
    changed = 0
    for i in range(*span):
        m = re.match(r"^(\s*)return (.+?)\s*$", lines[i])
        if m and not re.search(rf"\[:{limit}\]$", m.group(2)) and not m.group(2).startswith(("\"", "'")):
            lines[i] = f"{m.group(1)}return ({m.group(2)})[:{limit}]"
            changed += 1
    return _edit(source, "\n".join(lines), f"Fix: cut every read() result to {limit} characters",
                 f"read() returned more than the {limit}-character limit.",
                 f"Each of the {changed} non-literal returns of read() is cut to {limit} characters.")


def unused_forbidden_import(source: str, error: str) -> Edit | None:
    lines, removed = source.split("\n"), []
    for i, line in enumerate(lines):
        m = re.match(r"^\s*(?:import|from)\s+([\w.]+)", line)
        if not m or m.group(1).split(".")[0] in ALLOWED_IMPORTS or m.group(1) not in error:
            continue
        top = m.group(1).split(".")[0]
        rest = "\n".join(lines[:i] + lines[i + 1:])
        if line.lstrip().startswith("import ") and not re.search(rf"\b{top}\.", rest):
            lines[i] = None
            removed.append(m.group(1))
    new = "\n".join(l for l in lines if l is not None)
    return _edit(source, new, f"Fix: remove the disallowed import of {', '.join(removed)}",
                 "The program imports a module outside the sandbox's allowlist.",
                 f"Removed the unused import of {', '.join(removed)}.") if removed else None


def _syntax_error(source: str) -> SyntaxError | None:
    try:
        compile(source, "program.py", "exec", dont_inherit=True)
    except SyntaxError as exc:
        return exc
    return None


def _line_candidates(lines: list[str], i: int) -> list[list[str]]:
    line = lines[i]
    prev = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
    nxt = next((lines[j] for j in range(i + 1, len(lines)) if lines[j].strip()), "")
    out = []
    for indent in (se.indent_of(prev) + ("    " if prev.rstrip().endswith(":") else ""), se.indent_of(nxt)):
        out.append(lines[:i] + [indent + line.strip()] + lines[i + 1:])
    opened = sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}")
    if opened > 0:
        closers = "".join({"(": ")", "[": "]", "{": "}"}[c] for c in re.findall(r"[(\[{]", line))[::-1]
        out.append(lines[:i] + [line.rstrip() + closers[:opened]] + lines[i + 1:])
    removed = [se.indent_of(line) + "# removed, did not parse: " + line.strip()]
    if prev.rstrip().endswith(":") and len(se.indent_of(nxt)) <= len(se.indent_of(prev)):
        removed.append(se.indent_of(line) + "pass")
    out.append(lines[:i] + removed + lines[i + 1:])
    return out


def syntax_line(source: str, error: str) -> Edit | None:
    fixed, notes = source, []
    for _ in range(3):  # a few independent breaks at most
        exc = _syntax_error(fixed)
        if exc is None:
            break
        if not exc.lineno:
            return None
        lines, i = fixed.split("\n"), exc.lineno - 1
        if i >= len(lines):
            return None
        for candidate in _line_candidates(lines, i):
            text = "\n".join(candidate)
            later = _syntax_error(text)
            if later is None or (later.lineno or 0) > exc.lineno:
                fixed = text
                notes.append(f"line {exc.lineno} ({exc.msg})")
                break
        else:
            return None
    if _syntax_error(fixed) is not None:
        return None
    return _edit(source, fixed, "Fix: repair the lines that did not parse",
                 "The program does not compile: " + "; ".join(notes) + ".",
                 "Re-indented, closed or commented out the offending lines.")


_KNOB_COMMENT = re.compile(r"^\s*# (?P<label>[\w -]+): (?P<old>\d+(?:\.\d+)?) -> (?P<new>\d+(?:\.\d+)?);")


def revert_knob(source: str, error: str) -> Edit | None:
    m = re.search(r"\bline (\d+)\b", error)
    if not m:
        return None
    lines, target = source.split("\n"), int(m.group(1)) - 1
    for start in range(min(target, len(lines) - 1), max(-1, target - 4), -1):
        c = _KNOB_COMMENT.match(lines[start])
        if not c:
            continue
        end = start + 1
        while end < len(lines) and lines[end].strip().startswith("#   "):
            end += 1
        if end >= len(lines) or c.group("new") not in lines[end]:
            return None
        code = re.sub(rf"(?<![\d.]){re.escape(c.group('new'))}(?![\d.])", c.group("old"), lines[end], count=1)
        new = "\n".join(lines[:start] + [code] + lines[end + 1:])
        return _edit(source, new, f"Fix: revert the {c.group('label')} change",
                     f"The error is on the line where the {c.group('label')} was moved from "
                     f"{c.group('old')} to {c.group('new')}.",
                     f"Restored the {c.group('label')} to {c.group('old')}.")
    return None


RULES = (missing_helper, underscore_names, output_too_long, unused_forbidden_import, syntax_line,
         revert_knob)


def repair(source: str, error: str) -> Edit | None:
    for rule in RULES:
        try:
            edit = rule(source, error)
        except (ValueError, IndexError, SyntaxError, tokenize.TokenError):
            edit = None
        if edit is not None:
            return edit
    return None

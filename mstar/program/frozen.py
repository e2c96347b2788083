"""Ablation switches (paper Table 2): evolve only the instructions, or only the code.

A program is split into its *instructions* (the four module-level string
constants) and its *code* (everything else). The split uses the tokenizer, not
the parser: it runs in the engine on untrusted text, and tokenizing cannot be
driven into deep recursion the way parsing can.
"""
from __future__ import annotations

import io
import tokenize

INSTRUCTION_NAMES = ("INSTRUCTION_KNOWLEDGE_ITEM", "INSTRUCTION_QUERY", "INSTRUCTION_RESPONSE",
                     "ALWAYS_ON_KNOWLEDGE")
MODES = ("all", "instructions", "code")


class FrozenPartError(ValueError):
    """A change touched the part of the program this run keeps fixed."""


def split_program(source: str) -> tuple[str, dict[str, str]]:
    """(code with each constant's value replaced by a placeholder and comments removed,
    {constant: value text}). Comments do not count as code: they change no behaviour."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def pos(row: int, col: int) -> int:
        return offsets[row - 1] + col

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError) as exc:
        raise FrozenPartError(f"the program cannot be tokenized: {exc}") from exc
    spans: list[tuple[int, int, str]] = []  # (start, end, constant name or "" for a comment)
    depth = 0
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.type == tokenize.COMMENT:
            spans.append((pos(*tok.start), pos(*tok.end), ""))
        elif tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        elif (tok.type == tokenize.NAME and tok.string in INSTRUCTION_NAMES and tok.start[1] == 0 and depth == 0
              and i + 1 < len(tokens) and tokens[i + 1].string in ("=", ":")):
            j = i + 1
            while j < len(tokens) and tokens[j].string != "=":
                j += 1
            # the value runs to the end of the logical line (NEWLINE token)
            k = j + 1
            while k < len(tokens) and tokens[k].type not in (tokenize.NEWLINE, tokenize.ENDMARKER):
                k += 1
            if j < len(tokens) and k > j + 1:
                spans.append((pos(*tokens[j + 1].start), pos(*tokens[k - 1].end), tok.string))
            i = k
            continue
        i += 1
    code, values, last = [], {}, 0
    for start, end, name in spans:
        code.append(source[last:start])
        if name:
            code.append(f"<{name}>")
            values[name] = source[start:end]
        last = end
    code.append(source[last:])
    return "".join(code), values


def _norm(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines() if line.strip())


def check_frozen(parent: str, child: str, mode: str) -> None:
    """Raise FrozenPartError when `child` changes what `mode` keeps fixed."""
    if mode == "all":
        return
    if mode not in MODES:
        raise ValueError(f"unknown evolution mode {mode!r}; use one of {', '.join(MODES)}")
    p_code, p_vals = split_program(parent)
    c_code, c_vals = split_program(child)
    if mode == "instructions" and _norm(p_code) != _norm(c_code):
        raise FrozenPartError(
            "this run evolves only the instructions: change only the values of INSTRUCTION_KNOWLEDGE_ITEM, "
            "INSTRUCTION_QUERY, INSTRUCTION_RESPONSE and ALWAYS_ON_KNOWLEDGE; the patch changed code "
            f"outside them (first difference: {_first_difference(p_code, c_code)})")
    if mode == "code":
        changed = sorted(n for n in set(p_vals) | set(c_vals) if _norm(p_vals.get(n, "")) != _norm(c_vals.get(n, "")))
        if changed:
            raise FrozenPartError(
                "this run evolves only the code: the instruction constants are fixed, but the patch changed "
                + ", ".join(changed))


def _first_difference(a: str, b: str) -> str:
    al, bl = _norm(a).splitlines(), _norm(b).splitlines()
    for n, (x, y) in enumerate(zip(al, bl), 1):
        if x != y:
            return f"line {n}: {x.strip()[:80]!r} became {y.strip()[:80]!r}"
    return "lines were added or removed"

"""Did an edit change what the program does? Known before an evaluation, or after one.

Before: a child whose text differs from a known program only in comments, blank lines or
trailing spaces runs the same code -- it is not evaluated again (`same_code`). The comparison
goes through Python's tokenizer (iterative, so a hostile, deeply nested text cannot exhaust the
engine the way a parser could), dropping comments and line breaks that carry no meaning.

After: a child whose answers equal its parent's on every static item made no behavioural change
(`same_answers`): the reflector is told so (failure memory) and the child does not compete for
parent (its parent already stands for it).
"""
from __future__ import annotations

from mstar.tasks.model import case_scored

import functools
import io
import tokenize

_IGNORED = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING}


@functools.lru_cache(maxsize=1024)   # the pool's programs are compared with every new child
def code_fingerprint(source: str) -> str | None:
    """The program's tokens without comments and blank lines, as one string; None when the text
    does not tokenize (it is then compared as text)."""
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in _IGNORED:
                continue
            out.append(f"{tok.type}:{tok.string}" if tok.type not in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)
                       else tokenize.tok_name[tok.type])
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return "\x00".join(out)


def same_code(child: str, known: list[str]) -> bool:
    """True when `child` runs exactly the code of one of the `known` programs."""
    mine = code_fingerprint(child)
    if mine is None:
        return False
    return any(code_fingerprint(other) == mine for other in known)


def same_answers(child_cases: list, parent_cases: list) -> bool:
    """Every item both evaluations answered got the same answer (and there was at least one)."""
    def answers(cases):
        out = {}
        for c in cases:
            get = c.get if isinstance(c, dict) else (lambda k, c=c: getattr(c, k, None))
            if case_scored(c):
                out[get("query_id")] = get("answer")
        return out
    a, b = answers(child_cases), answers(parent_cases)
    shared = [q for q in a if q in b]
    return bool(shared) and all(a[q] == b[q] for q in shared)

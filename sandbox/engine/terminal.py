"""Untrusted text made safe to print on a terminal: control and escape sequences shown, not run.

Programs and models write text that the CLI prints: a program's logs, read() outputs and error
messages (`python -m sandbox`, `mstar check`), the reflector's commit titles and bodies (`mstar
lineage`, `mstar show`, the progress lines). Printed raw, an escape sequence in it is executed by
the terminal: a hostile program made `sandbox.check` show `ok: True / stage: ok` over a failed
verdict, set the window title and wrote to the clipboard (OSC 52) (issue 16). `terminal_safe` is
the one function every such path uses: each character a terminal could act on is replaced by a
visible escape (`\\x1b`, `\\r`, `\\x9b`, `\\u202e`), so the text reads the same and does nothing.

Replaced: C0 controls (ESC, BEL, CR, backspace, ...) and DEL; C1 controls U+0080-U+009F (U+009B
is a one-character CSI on some terminals); the Unicode bidirectional overrides and isolates, which
reorder what a reader sees ("Trojan Source"); the line and paragraph separators; lone surrogates
(which would make `print` raise); and characters that print as nothing, so that text a person
reads is the text a model reads: zero-width spaces and joiners, the word joiner and invisible
operators, the byte-order mark, the soft hyphen, variation selectors, interlinear annotation
marks, and the tag characters U+E0000-E007F, which spell out hidden ASCII ("ASCII smuggling":
instructions a reflector model would read in a log that looks clean) (issue 30). An emoji built
with a zero-width joiner or a variation selector shows them escaped. Newlines and tabs are kept
unless `newlines=False` /
`tabs=False` ask for one line. Lives in the sandbox because its checker needs it and the sandbox
imports nothing from mstar; mstar's CLI imports it from here.
"""
from __future__ import annotations

import re

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ALWAYS = ("\x00-\x08\x0b-\x1f\x7f-\x9f"          # C0 except tab and newline, DEL, C1
           "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # bidi marks, embeddings, overrides, isolates
           "\u2028\u2029"                        # line and paragraph separators
           "\ud800-\udfff"                       # lone surrogates
           # printed as nothing: soft hyphen, grapheme joiner, Hangul and Khmer fillers, Mongolian
           # selectors, zero-width space / non-joiner / joiner, word joiner and invisible operators,
           # deprecated format controls, variation selectors, BOM, annotation marks, tags
           "\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200d\u2060-\u2064\u206a-\u206f"
           "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U000e0000-\U000e007f\U000e0100-\U000e01ef")
_PATTERNS = {(newlines, tabs): re.compile("[" + _ALWAYS + ("" if newlines else "\n") + ("" if tabs else "\t") + "]")
             for newlines in (True, False) for tabs in (True, False)}


def _visible(match: re.Match) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def terminal_safe(text: object, *, newlines: bool = True, tabs: bool = True) -> str:
    """`text` (anything: it is str()-ed first) with every character a terminal could act on
    replaced by a visible escape. `newlines=False` also escapes "\\n", for one-line fields."""
    if not isinstance(text, str):
        text = str(text)
    return _PATTERNS[(newlines, tabs)].sub(_visible, text)

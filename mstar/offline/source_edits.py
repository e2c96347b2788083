"""Small, pure edits on memory-program source, located through the AST.

The offline reflector changes programs the way a careful person would: find the
method or constant by parsing, change a few lines, keep everything else byte for
byte. Every function takes source text and returns source text (or a node / None
for look-ups); none of them checks that the result still parses -- the caller
does that once per mutation.

Helper methods added to programs have plain names (no leading underscore):
RestrictedPython refuses names and attributes that start with "_".
"""
from __future__ import annotations

import ast
import re

from mstar.offline.reach_helpers import REACH_HELPERS, REACH_NEEDS

# ---------------------------------------------------------------- helper methods
# Added to KnowledgeBase on demand. Written at class-body indent (4 spaces); add_method
# re-indents them to the program's own indent. Only whitelisted modules are used, and of the
# builtins only len and range: RestrictedPython's safe_builtins lack set, sum, max, enumerate.
HELPERS: dict[str, tuple[tuple[str, ...], str]] = {
    # name: (imports it needs, code)
    "query_words": (("re",), '''
    def query_words(self, text):
        # Lower-case words of 3+ characters: the units the overlap ranking compares.
        return {word for word in re.findall(r"[a-z0-9]{3,}", text.lower())}
'''),
    "rank_by_overlap": (("math",), '''
    def rank_by_overlap(self, query_text, texts, rank_weight=0.1):
        # Texts sharing more, and rarer, words with the query come first: a word found in
        # every text (a speaker's name, "the") adds little. rank_weight keeps the incoming
        # order (e.g. embedding similarity) as a tie-breaker.
        words = self.query_words(query_text)
        bags = [self.query_words(text) & words for text in texts]
        doc_freq = {}
        for bag in bags:
            for word in bag:
                doc_freq[word] = doc_freq.get(word, 0) + 1
        scored = []
        for i in range(len(texts)):
            overlap = 0.0
            for word in bags[i]:
                overlap += math.log(1 + len(texts) / doc_freq[word])
            scored.append((overlap - rank_weight * i / (len(texts) or 1), -i))
        scored.sort(reverse=True)
        return [texts[-minus_i] for score, minus_i in scored]
'''),
    "split_turns": ((), '''
    def split_turns(self, text):
        # One unit per non-empty line: a dialogue turn is the natural size of one fact, so
        # retrieval can return exactly the turn that answers.
        return [line.strip() for line in text.split("\\n") if line.strip()]
'''),
    "date_stamp": ((), '''
    def date_stamp(self, raw_text, units):
        # Episodes open with a "[time on date]" line. Stamping every stored unit with it lets
        # the answerer date an event even when the opening line is not retrieved.
        first = raw_text.strip().split("\\n")[0].strip()
        if not (first.startswith("[") and "]" in first):
            return units
        stamp = first[: first.index("]") + 1]
        # The opening line itself adds nothing once every unit carries its date.
        units = [unit for unit in units if unit != first] or units
        return [unit if unit.startswith(stamp) else stamp + " " + unit for unit in units]
'''),
}
# Helpers that call other helpers.
HELPER_NEEDS = {"rank_by_overlap": ("query_words",)}
# The helpers of the reach edits (speaker index, bridge, newest first ...) live in their own
# module; merged here so ensure_helper and the compile-fix rules know them too.
HELPERS.update(REACH_HELPERS)
HELPER_NEEDS.update(REACH_NEEDS)


def parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


def _tree(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def class_node(source: str, name: str = "KnowledgeBase") -> ast.ClassDef | None:
    tree = _tree(source)
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def method_node(source: str, name: str) -> ast.FunctionDef | None:
    cls = class_node(source)
    if cls is None:
        return None
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None


def method_lines(source: str, name: str) -> tuple[int, int] | None:
    """0-based [start, end) line range of a KnowledgeBase method, or None."""
    node = method_node(source, name)
    if node is None:
        return None
    start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
    return start, node.end_lineno


def method_text(source: str, name: str) -> str:
    span = method_lines(source, name)
    if span is None:
        return ""
    return "\n".join(source.split("\n")[span[0]:span[1]])


def arg_name(source: str, method: str, index: int) -> str | None:
    """Name of a method's positional parameter (0 = self)."""
    node = method_node(source, method)
    if node is None or len(node.args.args) <= index:
        return None
    return node.args.args[index].arg


def query_text_expr(source: str) -> str | None:
    """`query.<first str field>` as read() sees it, e.g. "query.query_text"."""
    param = arg_name(source, "read", 1)
    cls = class_node(source, "Query")
    if param is None or cls is None:
        return None
    for node in cls.body:
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(node.annotation, ast.Name) and node.annotation.id == "str"):
            return f"{param}.{node.target.id}"
    return None


def indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def add_method(source: str, code: str, before: str = "read") -> str:
    """Insert a method (given at 4-space indent) just above method `before`."""
    span = method_lines(source, before)
    if span is None:
        raise ValueError(f"program has no KnowledgeBase.{before} to insert a method before")
    lines = source.split("\n")
    indent = indent_of(lines[span[0]])
    body = [(indent + l[4:]) if l.strip() else "" for l in code.strip("\n").split("\n")]
    return "\n".join(lines[: span[0]] + body + [""] + lines[span[0]:])


def has_import(source: str, module: str) -> bool:
    tree = _tree(source)
    if tree is None:
        return False
    for node in tree.body:
        if isinstance(node, ast.Import) and any(a.name == module and a.asname is None for a in node.names):
            return True
    return False


def ensure_import(source: str, module: str) -> str:
    """Add `import module` above the first top-level import (or after the docstring)."""
    if has_import(source, module):
        return source
    tree = _tree(source)
    lines = source.split("\n")
    at = 0
    if tree is not None:
        imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
        if imports:
            at = imports[0].lineno - 1
        elif tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant):
            at = tree.body[0].end_lineno
    return "\n".join(lines[:at] + [f"import {module}"] + lines[at:])


def ensure_helper(source: str, name: str) -> str:
    """Add helper method `name` (and what it needs) unless the program already has it."""
    for dep in HELPER_NEEDS.get(name, ()):
        source = ensure_helper(source, dep)
    if method_node(source, name) is not None:
        return source
    imports, code = HELPERS[name]
    for module in imports:
        source = ensure_import(source, module)
    return add_method(source, code)


def constant_span(source: str, name: str) -> tuple[int, int] | None:
    """0-based [start, end) lines of a module-level `NAME = ...` assignment."""
    tree = _tree(source)
    if tree is None:
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name):
            return node.lineno - 1, node.end_lineno
    return None


def constant_value(source: str, name: str) -> str | None:
    tree = _tree(source)
    if tree is None:
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            return node.value.value
    return None


def set_comment_above(lines: list[str], index: int, key: str, text: str, width: int = 96) -> int:
    """Put `# key: text` (wrapped) right above lines[index], replacing our earlier `# key:` block.

    Returns the new index of the commented line. Recognising our own earlier comment keeps a
    knob moved five times from collecting five stale comments.
    """
    indent = indent_of(lines[index])
    words, block, cur = text.split(), [], f"{indent}# {key}:"
    for word in words:
        if len(cur) + 1 + len(word) > width and not cur.endswith(":"):
            block.append(cur)
            cur = f"{indent}#   {word}"   # continuation lines are indented, so they can be found
        else:
            cur = f"{cur} {word}"
    block.append(cur)
    start = comment_block_above(lines, index, key)
    start = index if start is None else start
    lines[start:index] = block
    return start + len(block)


def comment_block_above(lines: list[str], index: int, key: str) -> int | None:
    """Start of a `# key: ...` comment block (with its continuation lines) ending right above
    lines[index], or None when there is none."""
    start = index
    while start > 0 and lines[start - 1].strip().startswith("#   "):
        start -= 1
    if start > 0 and lines[start - 1].strip().startswith(f"# {key}:"):
        return start - 1
    return None


def wrap_python_string(value: str, indent: str = "    ", width: int = 88) -> list[str]:
    """A long string as a parenthesised run of literals, each line under `width`."""
    words, chunks, cur = value.split(" "), [], ""
    for word in words:
        piece = word if not cur else cur + " " + word
        if len(repr(piece)) + len(indent) > width and cur:
            chunks.append(cur + " ")
            cur = word
        else:
            cur = piece
    chunks.append(cur)
    return [indent + _quote(c) for c in chunks]


def _quote(text: str) -> str:
    # Prefer double quotes, as the seeds do; repr() would switch to single quotes.
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def replace_constant(source: str, name: str, value: str) -> str:
    span = constant_span(source, name)
    if span is None:
        raise ValueError(f"program has no module-level constant {name}")
    lines = source.split("\n")
    if len(_quote(value)) + len(name) + 3 <= 100:
        new = [f"{name} = {_quote(value)}"]
    else:
        new = [f"{name} = ("] + wrap_python_string(value) + [")"]
    return "\n".join(lines[: span[0]] + new + lines[span[1]:])


def find_line(lines: list[str], pattern: str, start: int = 0, end: int | None = None) -> int | None:
    rx = re.compile(pattern)
    for i in range(start, len(lines) if end is None else end):
        if rx.search(lines[i]):
            return i
    return None

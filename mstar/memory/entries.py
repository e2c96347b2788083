"""What a namespace holds, as its user sees it: entries, pages of them, a text match (in the raw
text or the item's values, never its field names), ids, and the export format.

An entry is one acknowledged write: its id, its place in the log (seq), when it was
acknowledged, the raw text and the KnowledgeItem the program's write() received. Its id is the
client's (`remember(..., id=...)`: a retry with the same id is answered from the log instead of
written again) or one the store made (`mem-` and 20 hex digits); entries of logs written before
ids existed are `seq-<seq>`.

An export is JSON Lines, one entry a line, in log order: {"text", "id", "at"}; a file is written
0600 like the store's own files (it holds every raw text). The texts are what a store takes back
(`mstar memory import`, `StoredMemory.import_jsonl`): each is extracted again with the importing
store's program, under the same id, so importing a file twice writes each entry once.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Iterable, Iterator

from mstar.memory.log import LogRecord
from mstar.memory.store import StoreError
from mstar.run.store import atomic_write_text

DEFAULT_PAGE = 50
MAX_PAGE = 500
MAX_ID = 200


@dataclass
class Entry:
    id: str
    seq: int
    at: str
    text: str
    item: dict
    error: str | None = None      # write() raised when it was remembered (kept all the same)

    @classmethod
    def of(cls, rec: LogRecord) -> "Entry":
        return cls(rec.entry_id, rec.seq, rec.at, rec.text, dict(rec.item), rec.error)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Page:
    namespace: str
    entries: list[Entry]
    total: int                    # entries that match (all of them without `contains`)
    offset: int
    next_offset: int | None       # where the next page starts; None on the last one

    def to_dict(self) -> dict:
        return {"namespace": self.namespace, "entries": [e.to_dict() for e in self.entries], "total": self.total,
                "offset": self.offset, "next_offset": self.next_offset}


def new_id() -> str:
    return f"mem-{uuid.uuid4().hex[:20]}"


def check_id(value: object, what: str = "id") -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_ID or not value.isprintable():
        raise StoreError(f"{what} {repr(value)[:80]} refused: give 1-{MAX_ID} printable characters")
    return value


def matches(rec: LogRecord, needle: str) -> bool:
    """`needle` (any case) is in the raw text or in one of the KnowledgeItem's values -- not its
    field names, nor the JSON around them: "content" must not match every entry of a program
    whose item has a `content` field."""
    folded = needle.casefold()
    return any(folded in text.casefold() for text in (rec.text, *_values(rec.item)))


def _values(value: object) -> Iterator[str]:
    """The texts (and numbers) an item holds, at any depth, each on its own: a match never spans two."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for inner in value.values():
            yield from _values(inner)
    elif isinstance(value, (list, tuple)):
        for inner in value:
            yield from _values(inner)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield str(value)


def check_needle(needle: object) -> str:
    if not isinstance(needle, str) or not needle.strip():
        raise StoreError("the text to match is empty: give the words the entries hold")
    return needle


def page(namespace: str, records: list[LogRecord], offset: int = 0, limit: int = DEFAULT_PAGE,
         contains: str | None = None) -> Page:
    if type(offset) is not int or offset < 0:
        raise StoreError(f"offset {offset!r} refused: give 0 or more")
    if type(limit) is not int or not 1 <= limit <= MAX_PAGE:
        raise StoreError(f"limit {limit!r} refused: give 1 to {MAX_PAGE}")
    chosen = [r for r in records if matches(r, check_needle(contains))] if contains is not None else records
    shown = chosen[offset:offset + limit]
    end = offset + len(shown)
    return Page(namespace, [Entry.of(r) for r in shown], len(chosen), offset, end if end < len(chosen) else None)


def export_lines(records: Iterable[LogRecord]) -> Iterator[str]:
    for rec in records:
        yield json.dumps({"text": rec.text, "id": rec.entry_id, "at": rec.at}, ensure_ascii=False) + "\n"


def write_export(path: str | Path, text: str) -> None:
    """Write an export as the store keeps its files (0600): it holds every raw text. Written whole
    or not at all (a temporary file beside it, renamed)."""
    atomic_write_text(Path(path), text, mode=0o600)


def read_export(source: str | Path | IO[str]) -> list[tuple[str, str | None]]:
    """(text, id) of every line of an export; StoreError naming the first bad line."""
    if isinstance(source, (str, Path)):
        try:
            with open(source, encoding="utf-8") as fh:
                lines = fh.read().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"{source} cannot be read: {exc}") from None
        name = str(source)
    else:
        lines, name = source.read().splitlines(), "the export"
    out: list[tuple[str, str | None]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            raise StoreError(f"{name}: line {number} is not JSON") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
            raise StoreError(f"{name}: line {number} has no \"text\" (a string)")
        ident = obj.get("id")
        out.append((obj["text"], None if ident is None else check_id(ident, f"{name}: line {number}: id")))
    return out

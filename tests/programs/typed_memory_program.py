"""Test fixture: type hints that never run (signatures, annotated locals) name modules freely."""
import sqlite3
import typing
import datetime
from dataclasses import dataclass, field
from typing import Optional, List, TYPE_CHECKING

INSTRUCTION_KNOWLEDGE_ITEM = "x"
INSTRUCTION_QUERY = "x"
INSTRUCTION_RESPONSE = "x"
ALWAYS_ON_KNOWLEDGE = "x"


@dataclass
class KnowledgeItem:
    text: str = field(default="", metadata={"description": "t"})


@dataclass
class Query:
    text: str = field(default="", metadata={"description": "t"})


class KnowledgeBase:
    def __init__(self, toolkit: "Toolkit") -> None:
        self.db: sqlite3.Connection = toolkit.db
        self.items: List[str] = []
        self.when: typing.Optional[datetime.datetime] = None
        count: typing.Counter[str] = None

    def write(self, item: "KnowledgeItem", raw_text: str) -> None:
        self.items.append(item.text)

    def read(self, query: Query) -> str:
        stamp = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
        return ("\n".join(self.items) + str(stamp.year))[:3000]


if __name__ == "__main__":
    print("demo")

# ATTACK: search every reachable object for something with kill/getppid
# EXPECTED: runs harmlessly: nothing reachable offers a way to signal the engine
# outcome: ok
# output: found nothing
# The test passes a unique marker path (in a world-writable directory) as raw_text and
# as every str field of the item and the query; the directory must stay empty.
import json
import re
import math
import hashlib
import collections
import datetime
import textwrap
import sqlite3
import chromadb
import typing
import dataclasses
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Copy the text."
INSTRUCTION_QUERY = "Copy the question."
INSTRUCTION_RESPONSE = "Answer from the memory."
ALWAYS_ON_KNOWLEDGE = ""


@dataclass
class KnowledgeItem:
    text: str = field(default="", metadata={"description": "The text to remember"})


@dataclass
class Query:
    question: str = field(default="", metadata={"description": "The question"})


class KnowledgeBase:
    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.notes = []

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        target = raw_text.strip()  # the marker path
        self.notes.append(item.text)

    def read(self, query: Query) -> str:
        target = query.question.strip()  # the marker path
        found = []
        roots = [json, re, math, hashlib, collections, datetime, textwrap, sqlite3, chromadb, typing,
                 dataclasses, self.toolkit, self.toolkit.db, self.toolkit.chroma, self.toolkit.logger]
        for root in roots:
            for name in dir(root):
                for wanted in ("kill", "getppid", "killpg", "abort", "system", "environ"):
                    if wanted in name.lower():
                        try:
                            getattr(root, name)
                            found.append(name)
                        except Exception:
                            pass
        return "found " + (", ".join(found) if found else "nothing")

# ATTACK: dig for a module object through an allowed function's non-dunder attributes
# EXPECTED: runs harmlessly: nothing reachable without dunders is a module; every probe is refused
# outcome: ok
# output: modules reached: 0
# The test passes a unique marker path (in a world-writable directory) as raw_text and
# as every str field of the item and the query; the directory must stay empty.
import json
import re
import datetime
import textwrap
import typing
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
        reached = 0
        probes = [(re.compile("a"), "scanner"), (datetime.datetime, "strptime"), (textwrap.shorten, "func_globals"),
                  (typing.Optional, "copy_with"), (json.JSONDecodeError, "mro")]
        for obj, name in probes:
            try:
                value = getattr(obj, name)
                if "module" in repr(value) and "proxy" not in repr(value):
                    reached += 1
            except Exception:
                pass
        return "modules reached: " + str(reached)

"""A case as the offline reflectors read it, and the two patterns they and the answerer share.

The offline reflector (reflector_model.py) and GEPA's offline proposer (gepa_proposer.py) both
read failed cases and name what went wrong; the task model asks the same "is this a when
question" of the question it answers. One definition each keeps their signals in step.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# A question about a point in time ("When did ...", "In which year ...").
WHEN_RE = re.compile(r"^\s*when\b| when |\b(?:what|which) (?:year|date|month)\b", re.I)
# An answer that says nothing ("unknown", "no information about ...", "I don't know", or empty).
EMPTY_RE = re.compile(r"^\W*(?:unknown|none|n/?a|no (?:relevant )?information[\w ]*|not mentioned|"
                      r"i don'?t know)?\W*$", re.I)


@dataclass
class Case:
    """One underperforming case: what was asked, what was expected, what came back."""
    question: str
    expected: str
    answer: str
    retrieved: str

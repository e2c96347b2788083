"""Dynamic Cheatsheet (Suzgun et al. 2025; paper Table 1, cumulative variant): one global
cheatsheet, rewritten by the model after every new experience.

write() spends its one toolkit call on the curator step: the model sees the current cheatsheet
and the new episode and returns the *whole* updated cheatsheet, which replaces the old one --
there is only ever one summary. read() ignores the query and returns the cheatsheet as it
stands (no retrieval: the cheatsheet is the memory). If the toolkit call fails or comes back
empty, the cheatsheet keeps its text and gains the task agent's one-line summary, oldest lines
dropped first once it is full.

What the contract forced: the cheatsheet is capped at 3,000 characters, the engine's limit on
read() output (the published method bounds it by a word budget in the curator prompt); and the
curator sees the raw episode instead of the generator's own solution attempt, because the
engine asks questions only after all episodes are written.
"""
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = "Summarise the most important new information in this text in one sentence."
INSTRUCTION_QUERY = "Restate the question as a short search query."
INSTRUCTION_RESPONSE = "Answer the question using the retrieved memory. Be short and specific."
ALWAYS_ON_KNOWLEDGE = ""

CHEATSHEET_CHARS = 3000    # read() returns the cheatsheet whole, so it must fit the read limit
EPISODE_CHARS = 8000       # how much of a new episode the curator sees

CURATOR_PROMPT = (
    "You maintain a cheatsheet: a compact reference of facts, people, dates, events, reusable "
    "strategies and pitfalls that will help answer future questions.\n"
    "Rewrite the cheatsheet so that it integrates what the new experience adds. Keep every "
    "entry that is still useful, correct entries the experience contradicts, merge duplicates, "
    "and keep dates attached to the events they date. Stay under {limit} characters.\n"
    "The Query line says in one sentence what the experience adds; the cheatsheet so far and "
    "the experience follow the Notes line.\n"
    "Reply with the complete updated cheatsheet and nothing else."
)


@dataclass
class KnowledgeItem:
    summary: str = field(default="", metadata={"description": "The most important new information, in one sentence"})


@dataclass
class Query:
    query_text: str = field(default="", metadata={"description": "The question as a search query"})


class KnowledgeBase:
    """A single cheatsheet string, replaced on every write."""

    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.cheatsheet = ""
        self.version = 0

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        if not raw_text.strip():
            return
        messages = [
            {"role": "system", "content": CURATOR_PROMPT.replace("{limit}", str(CHEATSHEET_CHARS))},
            {"role": "user", "content": "Query: " + (item.summary.strip() or "what this experience adds")
             + "\nNotes:\n--- cheatsheet so far ---\n" + (self.cheatsheet or "(empty)")
             + "\n--- new experience ---\n" + raw_text[:EPISODE_CHARS]},
        ]
        try:
            updated = self.toolkit.llm_completion(messages).strip()
        except Exception as exc:  # provider failure: keep the old cheatsheet, add the summary
            self.toolkit.logger.debug("curator call failed: " + str(exc))
            updated = ""
        if updated:
            self.cheatsheet = self.fit(updated)
            how = "rewritten"
        else:
            self.cheatsheet = self.fit((self.cheatsheet + "\n- " + item.summary.strip()).strip())
            how = "appended (fallback)"
        self.version += 1
        self.toolkit.logger.debug("cheatsheet v" + str(self.version) + " " + how + ": "
                                  + str(len(self.cheatsheet)) + " chars")

    def fit(self, text):
        # Over the cap, drop whole lines from the top: the newest knowledge sits at the end.
        lines = text.split("\n")
        while len(lines) > 1 and len("\n".join(lines)) > CHEATSHEET_CHARS:
            lines = lines[1:]
        return "\n".join(lines)[-CHEATSHEET_CHARS:]

    def read(self, query: Query) -> str:
        if not self.cheatsheet:
            return "No information stored."
        return self.cheatsheet

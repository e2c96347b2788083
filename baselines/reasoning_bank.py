"""ReasoningBank (Ouyang et al. 2025; paper Table 1): distil each experience into a few
structured memory items and retrieve them by how similar the new task is to the task that
produced them.

A memory item has a title, a one-line description and a few sentences of content. write()
spends its one toolkit call on the extraction step: the model reads the episode and writes up
to MAX_ITEMS items in a fixed markdown layout (`# Memory Item`, `## Title`, `## Description`,
`## Content`). When the reply has none in that layout (a failed call, another model's habits)
the task agent's own item is stored instead. Every item is filed under the *task description*
of its episode: chroma embeds that description, not the item text, so read() finds the
experience whose task looks most like the question and returns all of that experience's items
(TOP_K experiences, 1 as in the published method).

What the contract forced: ReasoningBank labels each trajectory a success or a failure with an
LLM judge and distils strategies from successes and guard-rails from failures; our episodes
carry no outcome and write() has one call, so every episode is treated as an experience to
learn from and no judge runs. Retrieved items are cut to the 3,000-character read limit.
"""
import re
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Describe the task or situation in this text in one line, then distil its most useful "
    "lesson: a short title and the lesson itself with the concrete facts it rests on."
)
INSTRUCTION_QUERY = "Describe the task or situation the question is about, as a short search query."
INSTRUCTION_RESPONSE = "Answer the question using the retrieved memory. Be short and specific."
ALWAYS_ON_KNOWLEDGE = ""

TOP_K = 1          # experiences returned per query (ReasoningBank's default)
MAX_ITEMS = 3      # memory items distilled per experience
READ_LIMIT = 3000

EXTRACT_PROMPT = (
    "You distil reusable memory from one experience. Write at most {n} memory items that would "
    "help with similar tasks later: concrete facts with their dates, strategies that worked, "
    "pitfalls to avoid. Use exactly this layout for each item:\n"
    "# Memory Item\n## Title <a few words>\n## Description <one sentence>\n"
    "## Content <one to three sentences>\n"
    "The Query line names the task; the experience follows the Text line."
)


@dataclass
class KnowledgeItem:
    task: str = field(default="", metadata={"description": "The task or situation in the text, in one line"})
    title: str = field(default="", metadata={"description": "A few words naming the lesson"})
    lesson: str = field(default="", metadata={"description": "The lesson, with the concrete facts it rests on"})
    date: str = field(default="", metadata={"description": "When the experience happened, if the text says"})


@dataclass
class Query:
    task: str = field(default="", metadata={"description": "The task or situation the question is about"})


class KnowledgeBase:
    """Memory items in chroma, embedded by the task description of their experience."""

    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.items = toolkit.chroma.get_or_create_collection("reasoning_bank", metadata={"hnsw:space": "cosine"})
        self.experiences = 0
        self.stored = 0

    def parse_items(self, reply):
        """Memory items in the fixed markdown layout; anything else yields none."""
        out = []
        for block in re.split(r"(?m)^\s*#\s*Memory Item\s*$", reply)[1:]:
            parts = {}
            for key in ("Title", "Description", "Content"):
                m = re.search(r"(?ms)^\s*##\s*" + key + r"\s*:?\s*(.*?)(?=^\s*##\s|\Z)", block)
                parts[key.lower()] = " ".join(m.group(1).split()) if m else ""
            if parts["content"]:
                out.append(parts)
        return out[:MAX_ITEMS]

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        if not raw_text.strip():
            return
        task = (item.task or item.title or raw_text[:120]).strip()[:300]
        messages = [{"role": "system", "content": EXTRACT_PROMPT.replace("{n}", str(MAX_ITEMS))},
                    {"role": "user", "content": "Query: " + task + "\nText:\n" + raw_text[:8000]}]
        try:
            memory_items = self.parse_items(self.toolkit.llm_completion(messages))
        except Exception as exc:
            self.toolkit.logger.debug("extraction call failed: " + str(exc))
            memory_items = []
        source = "llm"
        if not memory_items and item.lesson.strip():
            memory_items = [{"title": item.title.strip(), "description": task, "content": item.lesson.strip()}]
            source = "task agent"
        exp_id = "exp" + str(self.experiences)
        self.experiences += 1
        for mi in memory_items:
            self.items.add(ids=[exp_id + "_" + str(self.stored)], documents=[task],
                           metadatas=[{"experience": exp_id, "task": task, "date": item.date.strip()[:60],
                                       "title": mi["title"][:200],
                                       "description": mi["description"][:400], "content": mi["content"][:1500]}])
            self.stored += 1
        self.toolkit.logger.debug(exp_id + ": " + str(len(memory_items)) + " item(s) from " + source
                                  + " under task '" + task[:80] + "'")

    def read(self, query: Query) -> str:
        if self.stored == 0:
            return "No information stored."
        # Items of one experience share its task embedding, so ask for enough neighbours to see
        # TOP_K distinct experiences, then keep whole experiences in similarity order.
        hits = self.items.query(query_texts=[query.task], n_results=min(self.stored, TOP_K * MAX_ITEMS + MAX_ITEMS),
                                include=["metadatas", "distances"])
        metas = hits["metadatas"][0] if hits["metadatas"] else []
        chosen = []
        for meta in metas:
            if meta["experience"] not in chosen:
                if len(chosen) == TOP_K:
                    continue
                chosen.append(meta["experience"])
        blocks = []
        for exp_id in chosen:
            metas_of = [m for m in metas if m["experience"] == exp_id]
            # A dated header line first: the experience's date then covers all of its items.
            head = ("[" + metas_of[0]["date"] + "] " if metas_of[0]["date"] else "") + "Experience: " + metas_of[0]["task"]
            body = ["Title: " + m["title"] + "\nDescription: " + m["description"] + "\nContent: " + m["content"]
                    for m in metas_of]
            blocks.append(head + "\n" + "\n".join(body))
        self.toolkit.logger.debug("query '" + query.task[:80] + "' -> experiences " + ", ".join(chosen))
        return "\n\n".join(blocks)[:READ_LIMIT] if blocks else "No relevant information found."

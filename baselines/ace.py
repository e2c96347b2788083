"""ACE, Agentic Context Engineering (Zhang et al. 2025; seed document 001): an evolving
playbook of itemised bullets, each with an id and helpful / harmful counters, grown by small
delta updates and refined by de-duplication and pruning.

- Reflector + Curator: write() spends its one toolkit call on both roles at once. The model
  sees the new episode and the playbook bullets most related to it, tags each shown bullet
  helpful, harmful or neutral for this experience, and proposes ADD operations (section +
  content) for what the playbook does not cover yet. When the reply cannot be read, shown
  bullets that the episode restates (most of their words occur in it) are tagged helpful and
  the task agent's insights become the ADD operations.
- Deterministic merge (no LLM, as in ACE): tags update the counters; each ADD is compared with
  the nearest stored bullet (chroma, cosine) and, at DEDUP_SIM or above, merged into it -- the
  bullet keeps its id and counters and takes the fuller wording -- otherwise appended as a new
  bullet (grow).
- Refine: when the playbook passes MAX_BULLETS, bullets judged more harmful than helpful go
  first, then the lowest-scoring, oldest first (lazy grow-and-refine).
- read() renders the bullets as `[ctx-00001] helpful=2 harmful=0 :: content`, grouped by section.

What the contract forced: ACE hands the generator the whole playbook; read() may return at most
3,000 characters, so it returns the bullets most similar to the query, as many as fit. The
generator's own "this bullet helped / misled me" feedback on answers never reaches the program
(answers are scored after all writes), so counters come from the reflector's judgement of each
new episode against the related bullets. No multi-epoch passes.
"""
import json
import re
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Name the topic of this text in a few words and list the insights worth keeping in a "
    "playbook: concrete facts with their dates, reusable strategies and pitfalls, one "
    "self-contained sentence each."
)
INSTRUCTION_QUERY = "Restate the question as a short search query for the playbook."
INSTRUCTION_RESPONSE = "Answer the question using the retrieved memory. Be short and specific."
ALWAYS_ON_KNOWLEDGE = ""

RELATED_K = 8       # bullets shown to the reflector for a new episode
MAX_NEW = 6         # ADD operations taken from one episode
DEDUP_SIM = 0.85    # cosine similarity at which an ADD merges into an existing bullet
MAX_BULLETS = 300   # refine (prune) above this many bullets
READ_K = 30         # bullets considered for a query
READ_LIMIT = 3000

CURATOR_PROMPT = (
    "You are the reflector and curator of a playbook of short bullets. For the new experience:\n"
    "1. Tag every playbook bullet shown: helpful if the experience confirms it or it would have "
    "helped here, harmful if the experience contradicts it or it would mislead, else neutral.\n"
    "2. Propose ADD operations for insights the playbook does not cover yet: concrete facts with "
    "dates, strategies, pitfalls. One self-contained sentence per bullet; no duplicates.\n"
    'Reply with JSON only: {"bullet_tags": [{"id": "ctx-00001", "tag": "helpful"}], '
    '"operations": [{"type": "ADD", "section": "section name", "content": "bullet text"}]}'
)

WORD = re.compile(r"[a-z0-9]+")
STOP = set("a an and are as at be but by for from had has have he her his i in is it its of on or our "
           "she so that the their them they this to was we were will with you your".split())


def content_words(text):
    return [w for w in WORD.findall(text.lower()) if w not in STOP]


@dataclass
class KnowledgeItem:
    topic: str = field(default="", metadata={"description": "The topic of the text, in a few words"})
    insights: list[str] = field(default_factory=list, metadata={"description": "Insights worth keeping, one self-contained sentence each"})
    date: str = field(default="", metadata={"description": "When it happened, if the text says"})


@dataclass
class Query:
    query_text: str = field(default="", metadata={"description": "A search query for the playbook"})


class KnowledgeBase:
    """Bullets in SQLite (content + counters) and chroma (for de-duplication and retrieval)."""

    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.db = toolkit.db
        self.db.execute("CREATE TABLE bullets (id TEXT PRIMARY KEY, section TEXT, content TEXT, "
                        "helpful INTEGER, harmful INTEGER, created INTEGER)")
        self.index = toolkit.chroma.get_or_create_collection("ace_playbook", metadata={"hnsw:space": "cosine"})
        self.next_id = 1
        self.count = 0

    # ------------------------------------------------------------------ helpers
    def nearest(self, text, k):
        if self.count == 0:
            return []
        hits = self.index.query(query_texts=[text], n_results=min(k, self.count), include=["distances"])
        return [(bid, 1.0 - d) for bid, d in zip(hits["ids"][0], hits["distances"][0])]

    def bullet(self, bid):
        return self.db.execute("SELECT id, section, content, helpful, harmful FROM bullets WHERE id = ?",
                               (bid,)).fetchone()

    def render(self, row):
        return "[" + row[0] + "] helpful=" + str(row[3]) + " harmful=" + str(row[4]) + " :: " + row[2]

    def parse_reply(self, reply, shown):
        start, end = reply.find("{"), reply.rfind("}")
        if start < 0 or end <= start:
            return None
        try:
            data = json.loads(reply[start:end + 1])
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        tags = []
        for t in data.get("bullet_tags") or []:
            if isinstance(t, dict) and t.get("id") in shown and t.get("tag") in ("helpful", "harmful", "neutral"):
                tags.append((t["id"], t["tag"]))
        adds = []
        for op in data.get("operations") or []:
            if isinstance(op, dict) and str(op.get("type", "")).upper() == "ADD" and str(op.get("content", "")).strip():
                adds.append((str(op.get("section") or "general").strip(), " ".join(str(op["content"]).split())))
        return tags, adds

    # ------------------------------------------------------------------ write
    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        if not raw_text.strip():
            return
        section = item.topic.strip()[:80] or "general"
        date = item.date.strip()[:60]
        candidates = []
        for text in item.insights:
            text = " ".join(str(text).split())
            if text and date and date not in text:
                # Date first: a trailing "(date)" after the full stop reads as a separate sentence.
                text = "(" + date + ") " + text
            if text and text not in candidates:
                candidates.append(text)
        shown = {}
        for bid, _ in self.nearest(raw_text[:2000], RELATED_K):
            shown[bid] = self.bullet(bid)
        listing = "\n".join(self.render(row) for row in shown.values()) or "(empty playbook)"
        messages = [{"role": "system", "content": CURATOR_PROMPT},
                    {"role": "user", "content": "Query: " + section + "\nNotes:\nPlaybook bullets:\n" + listing
                     + "\nNew experience:\n" + raw_text[:6000] + "\nCandidate insights:\n"
                     + "\n".join("- " + c for c in candidates)}]
        parsed = None
        try:
            parsed = self.parse_reply(self.toolkit.llm_completion(messages), shown)
        except Exception as exc:
            self.toolkit.logger.debug("curator call failed: " + str(exc))
        source = "llm"
        if parsed is None:
            source = "rule"
            text_words = set(content_words(raw_text))
            tags = []
            for bid, row in shown.items():
                words = set(content_words(row[2]))
                if words and len(words & text_words) >= 0.6 * len(words):
                    tags.append((bid, "helpful"))
            parsed = (tags, [(section, c) for c in candidates])
        tags, adds = parsed
        for bid, tag in tags:
            if tag == "helpful":
                self.db.execute("UPDATE bullets SET helpful = helpful + 1 WHERE id = ?", (bid,))
            elif tag == "harmful":
                self.db.execute("UPDATE bullets SET harmful = harmful + 1 WHERE id = ?", (bid,))
        added, merged = [], []
        for sec, content in adds[:MAX_NEW]:
            near = self.nearest(content, 1)
            if near and near[0][1] >= DEDUP_SIM:
                self.merge(near[0][0], content)
                merged.append(near[0][0])
            else:
                added.append(self.add(sec, content))
        pruned = self.refine()
        self.toolkit.logger.debug(
            "delta (" + source + "): tags " + str(tags) + "; added " + str(added) + "; merged into "
            + str(merged) + "; pruned " + str(pruned) + "; bullets " + str(self.count))

    def add(self, section, content):
        bid = "ctx-" + str(self.next_id).zfill(5)
        self.next_id += 1
        self.db.execute("INSERT INTO bullets VALUES (?, ?, ?, 0, 0, ?)", (bid, section, content, self.next_id))
        self.index.add(ids=[bid], documents=[content], metadatas=[{"section": section}])
        self.count += 1
        return bid

    def merge(self, bid, content):
        # Same insight, other words: keep the id and counters, keep the fuller wording.
        row = self.bullet(bid)
        if len(set(content_words(content)) - set(content_words(row[2]))) > 0 and len(content) > len(row[2]):
            self.db.execute("UPDATE bullets SET content = ? WHERE id = ?", (content, bid))
            self.index.update(ids=[bid], documents=[content])

    def refine(self):
        if self.count <= MAX_BULLETS:
            return []
        extra = self.count - MAX_BULLETS
        rows = self.db.execute("SELECT id FROM bullets ORDER BY (harmful > helpful) DESC, "
                               "helpful - harmful, created LIMIT ?", (extra,)).fetchall()
        ids = [r[0] for r in rows]
        for bid in ids:
            self.db.execute("DELETE FROM bullets WHERE id = ?", (bid,))
        if ids:
            self.index.delete(ids=ids)
        self.count -= len(ids)
        return ids

    # ------------------------------------------------------------------ read
    def read(self, query: Query) -> str:
        if self.count == 0:
            return "No information stored."
        sections, used = {}, 0
        for bid, _ in self.nearest(query.query_text, READ_K):
            row = self.bullet(bid)
            line = self.render(row)
            if used + len(line) + len(row[1]) + 6 > READ_LIMIT:
                continue
            if row[1] not in sections:
                sections[row[1]] = []
                used += len(row[1]) + 5
            sections[row[1]].append(line)
            used += len(line) + 1
        parts = ["## " + sec + "\n" + "\n".join(lines) for sec, lines in sections.items()]
        return "\n".join(parts)[:READ_LIMIT]

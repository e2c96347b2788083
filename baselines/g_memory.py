"""G-Memory (Zhang et al. 2025; paper Table 1): a three-tier hierarchical memory -- an insight
graph over a query graph over interaction trajectories -- kept in SQLite, entered by vector
search.

- Query graph: each episode becomes a query node (its task description, date and raw
  interaction text). A new node is linked to the LINK_K most similar earlier nodes (cosine on
  the task description, at least LINK_SIM), edges weighted by that similarity.
- Insight graph: generalisable insights, each linked to the query nodes it came from and
  carrying a support count. write() spends its one toolkit call here: the model sees the new
  episode and the insights of the neighbouring queries and answers which insights the episode
  supports and which new ones it teaches. When the reply cannot be read, the task agent's
  insight is merged deterministically (a near-identical stored insight gains support, anything
  else becomes a new node).
- Interaction tier: the raw trajectories, which read() sparsifies for the question.

read(): vector search for the SEED_K most similar query nodes, one hop along the query graph
(strongest edges first), then upward to the insights of all those queries (most supported
first) and downward to the trajectories of the closest ones, which the one toolkit call
condenses to what bears on the question. Without the call the trajectories' first lines stand in.

What the contract forced: G-Memory serves a multi-agent system and keeps per-agent, role-specific
views of the interaction graph; here one agent reads everything. Its insight graph is updated
from task outcomes (success/failure); episodes here have none, so every episode counts as
support. Both LLM steps (insight update on write, sparsification on read) get one call each.
"""
import json
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Describe the task or situation in this text in one line, and state one general insight "
    "it teaches that would help in similar situations."
)
INSTRUCTION_QUERY = "Describe the task or situation the question is about, as a short search query."
INSTRUCTION_RESPONSE = "Answer the question using the retrieved memory. Be short and specific."
ALWAYS_ON_KNOWLEDGE = ""

LINK_K = 3          # query-graph edges made for a new query node
LINK_SIM = 0.3      # minimum cosine similarity for a query-graph edge
SEED_K = 2          # query nodes found by vector search on read
HOP_K = 2           # neighbours followed from each of them (one hop)
MAX_INSIGHTS = 5
SAME_SIM = 0.85     # fallback merge: an insight this similar is the same insight
TRAJECTORY_CHARS = 6000
LINE_CHARS = 240    # per insight / task line
INSIGHTS_CHARS = 700   # the insight and task sections are capped so the condensed
TASKS_CHARS = 500      # trajectories always keep the rest of the read limit
READ_LIMIT = 3000

INSIGHT_PROMPT = (
    "You maintain the insight layer of a hierarchical memory. Given a new experience and the "
    "insights recorded for related past tasks, say which of those insights the experience "
    "supports and which new general insights it teaches (at most two).\n"
    'Reply with JSON only: {"supported": ["i3"], "new": ["insight text"]}'
)
SPARSIFY_PROMPT = (
    "Condense the past interactions below to the steps and facts that bear on the Query, "
    "keeping each fact's date. Reply with the condensed lines only."
)


@dataclass
class KnowledgeItem:
    task: str = field(default="", metadata={"description": "The task or situation in the text, in one line"})
    insight: str = field(default="", metadata={"description": "One general insight the text teaches"})
    date: str = field(default="", metadata={"description": "When it happened, if the text says"})


@dataclass
class Query:
    query_text: str = field(default="", metadata={"description": "The task or situation the question is about"})


class KnowledgeBase:
    """Query graph + insight graph in SQLite; chroma indexes task descriptions and insights."""

    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.db = toolkit.db
        self.db.executescript(
            "CREATE TABLE query_nodes (id INTEGER PRIMARY KEY, task TEXT, date TEXT, trajectory TEXT);"
            "CREATE TABLE query_edges (src INTEGER, dst INTEGER, weight REAL, PRIMARY KEY (src, dst));"
            "CREATE TABLE insights (id INTEGER PRIMARY KEY, text TEXT, support INTEGER);"
            "CREATE TABLE insight_links (insight_id INTEGER, query_id INTEGER, PRIMARY KEY (insight_id, query_id));")
        self.query_index = toolkit.chroma.get_or_create_collection("gm_queries", metadata={"hnsw:space": "cosine"})
        self.insight_index = toolkit.chroma.get_or_create_collection("gm_insights", metadata={"hnsw:space": "cosine"})
        self.queries = 0
        self.insight_count = 0

    # ------------------------------------------------------------------ write
    def nearest(self, collection, text, k, count):
        """[(numeric id, similarity)] of the k nearest entries; ids are 'q7' / 'i3' strings."""
        if count == 0 or not text.strip():
            return []
        hits = collection.query(query_texts=[text], n_results=min(k, count), include=["distances"])
        return [(int(i[1:]), 1.0 - d) for i, d in zip(hits["ids"][0], hits["distances"][0])]

    def add_insight(self, text, query_id):
        self.insight_count += 1
        iid = self.insight_count
        self.db.execute("INSERT INTO insights (id, text, support) VALUES (?, ?, 1)", (iid, text))
        self.insight_index.add(ids=["i" + str(iid)], documents=[text])
        self.link_insight(iid, query_id)
        return iid

    def link_insight(self, iid, query_id):
        self.db.execute("INSERT OR IGNORE INTO insight_links VALUES (?, ?)", (iid, query_id))

    def support(self, iid, query_id):
        self.db.execute("UPDATE insights SET support = support + 1 WHERE id = ?", (iid,))
        self.link_insight(iid, query_id)

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        if not raw_text.strip():
            return
        task = (item.task or raw_text[:160]).strip()[:300]
        nearest = self.nearest(self.query_index, task, LINK_K, self.queries)
        neighbours = [(q, s) for q, s in nearest if s >= LINK_SIM]
        self.queries += 1
        qid = self.queries
        self.db.execute("INSERT INTO query_nodes VALUES (?, ?, ?, ?)",
                        (qid, task, item.date.strip()[:60], raw_text[:TRAJECTORY_CHARS]))
        self.query_index.add(ids=["q" + str(qid)], documents=[task])
        for other, sim in neighbours:
            self.db.execute("INSERT OR REPLACE INTO query_edges VALUES (?, ?, ?)", (qid, other, sim))
            self.db.execute("INSERT OR REPLACE INTO query_edges VALUES (?, ?, ?)", (other, qid, sim))

        # Insight tier: the insights of neighbouring queries, then one call to update them.
        related = {}
        for other, _ in neighbours:
            for iid, text in self.db.execute("SELECT i.id, i.text FROM insights i JOIN insight_links l "
                                             "ON l.insight_id = i.id WHERE l.query_id = ?", (other,)).fetchall():
                related["i" + str(iid)] = text
        listing = "\n".join("- " + key + ": " + text for key, text in related.items()) or "(none yet)"
        messages = [{"role": "system", "content": INSIGHT_PROMPT},
                    {"role": "user", "content": "Query: " + task + "\nNotes:\nInsights of related tasks:\n"
                     + listing + "\nNew experience:\n" + raw_text[:TRAJECTORY_CHARS]}]
        decision = None
        try:
            decision = self.parse_decision(self.toolkit.llm_completion(messages), related)
        except Exception as exc:
            self.toolkit.logger.debug("insight call failed: " + str(exc))
        if decision is not None:
            supported, new = decision
            for key in supported:
                self.support(int(key[1:]), qid)
            for text in new:
                self.add_insight(text, qid)
            how = "llm: supported " + str(len(supported)) + ", new " + str(len(new))
        else:
            how = self.merge_fallback(item.insight.strip(), qid)
        self.toolkit.logger.debug("q" + str(qid) + " '" + task[:60] + "' linked to "
                                  + str(["q" + str(o) for o, _ in neighbours]) + "; insights " + how
                                  + "; nearest " + str([("q" + str(o), round(sim, 2)) for o, sim in nearest]))

    def parse_decision(self, reply, related):
        start, end = reply.find("{"), reply.rfind("}")
        if start < 0 or end <= start:
            return None
        try:
            data = json.loads(reply[start:end + 1])
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        supported = [str(k) for k in data.get("supported") or [] if str(k) in related]
        new = [" ".join(str(t).split()) for t in data.get("new") or [] if str(t).strip()][:2]
        return supported, new

    def merge_fallback(self, insight, qid):
        if not insight:
            return "none"
        near = self.nearest(self.insight_index, insight, 1, self.insight_count)
        if near and near[0][1] >= SAME_SIM:
            self.support(near[0][0], qid)
            return "rule: supported i" + str(near[0][0])
        return "rule: new i" + str(self.add_insight(insight, qid))

    # ------------------------------------------------------------------ read
    def read(self, query: Query) -> str:
        if self.queries == 0:
            return "No information stored."
        seeds = [q for q, _ in self.nearest(self.query_index, query.query_text, SEED_K, self.queries)]
        related = list(seeds)
        for qid in seeds:
            for (other,) in self.db.execute("SELECT dst FROM query_edges WHERE src = ? ORDER BY weight DESC, dst "
                                            "LIMIT ?", (qid, HOP_K)).fetchall():
                if other not in related:
                    related.append(other)
        marks = ",".join("?" for _ in related)
        insights = self.db.execute(
            "SELECT DISTINCT i.id, i.text, i.support FROM insights i JOIN insight_links l ON l.insight_id = i.id "
            "WHERE l.query_id IN (" + marks + ") ORDER BY i.support DESC, i.id LIMIT ?",
            tuple(related) + (MAX_INSIGHTS,)).fetchall()
        tasks = {}
        for qid, task, date, trajectory in self.db.execute(
                "SELECT id, task, date, trajectory FROM query_nodes WHERE id IN (" + marks + ")", tuple(related)).fetchall():
            tasks[qid] = (task, date, trajectory)
        # Downward: the closest queries' trajectories, condensed for this question.
        raw = "\n\n".join(tasks[q][2] for q in seeds if q in tasks)
        messages = [{"role": "system", "content": SPARSIFY_PROMPT},
                    {"role": "user", "content": "Query: " + query.query_text + "\nTexts:\n" + raw}]
        try:
            steps = self.toolkit.llm_completion(messages).strip()
        except Exception as exc:
            self.toolkit.logger.debug("sparsify call failed: " + str(exc))
            steps = "\n\n".join(tasks[q][2][:600] for q in seeds if q in tasks)
        parts = []
        if insights:
            parts.append(("Insights:\n" + "\n".join("- " + text[:LINE_CHARS] + " (support " + str(sup) + ")"
                                                   for _, text, sup in insights))[:INSIGHTS_CHARS])
        parts.append(("Related tasks:\n" + "\n".join(
            ("[" + tasks[q][1] + "] " if tasks[q][1] else "") + tasks[q][0][:LINE_CHARS]
            for q in related if q in tasks))[:TASKS_CHARS])
        parts.append("Key steps from similar past tasks:\n" + steps)
        self.toolkit.logger.debug("seeds " + str(["q" + str(q) for q in seeds]) + " + hop "
                                  + str(["q" + str(q) for q in related[len(seeds):]]) + "; insights "
                                  + str(["i" + str(r[0]) for r in insights]))
        return "\n\n".join(parts)[:READ_LIMIT]

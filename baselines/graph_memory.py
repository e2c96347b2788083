"""GraphMemory (Farhat, Desmond & Kyrillidis; seed document 000): ACE-style knowledge points
as graph nodes, directed relations weighted by Beta evidence, and bounded breadth-first
retrieval, so what reaches the answerer stays bounded however much is stored.

Graph. A node is one knowledge point (id, index section, short title, content). A directed edge
src -> dst keeps two evidence counters, helpful and harmful, under a uniform Beta(1, 1) prior;
its weight is the posterior mean (1 + helpful) / (2 + helpful + harmful). Opposite directions
are separate edges.

read() -- retrieve. The one toolkit call is the retriever: it reads a compact index (node
titles grouped by section) and names at most MAX_SECTIONS sections and MAX_ENTRIES entry nodes.
Traversal is deterministic breadth-first from the entries along outgoing edges, highest weight
first at each expansion, for at most MAX_HOPS hops, MAX_NODES nodes and TOKEN_BUDGET serialized
tokens (approximated as characters / 4). No valid entry means no memory block, never the full
memory. A retrieval trace (entries, loaded nodes, edges followed, tokens, depth) is logged.

write() -- reflect and curate, after retrieving for the episode as read() would (entries chosen
by similarity, since the one call is the curator's). The curator sees the loaded nodes, the
episode and the task agent's candidate points and answers with an ordered influence trace over
loaded nodes plus helpful / harmful / neutral feedback and a confidence, new nodes, revisions of
loaded nodes and new edges. Adjacent pairs of the trace become evidence: confidence is added to
the pair's helpful or harmful counter (neutral or zero confidence: unchanged); pairs outside the
loaded set and repeated pairs are dropped. When the reply cannot be read, a rule stands in:
loaded nodes the episode restates form a helpful trace at confidence 0.5, candidate points that
are not near-duplicates become nodes, chained in episode order and hung off the last traced node.

What the contract forced: GraphMemory reflects on its own prediction and the gold label before
curating; episodes here carry no label and no prediction, so the evidence is the curator's
judgement of which loaded knowledge the new episode bears out. read() output is also capped at
3,000 characters, which binds before the 2,500-token budget when nodes are long. The index is cut
to INDEX_CHARS (nodes most similar to the query kept) so the retriever prompt stays bounded.
"""
import json
import re
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Say who or what this text is about (the index section) and list its knowledge points: "
    "self-contained facts with their dates, strategies or lessons, one sentence each."
)
INSTRUCTION_QUERY = "Restate the question as a short search query."
INSTRUCTION_RESPONSE = "Answer the question using the retrieved memory. Be short and specific."
ALWAYS_ON_KNOWLEDGE = ""

MAX_SECTIONS = 2
MAX_ENTRIES = 6
MAX_HOPS = 2
MAX_NODES = 12
TOKEN_BUDGET = 2500
READ_LIMIT = 3000
INDEX_CHARS = 20000   # the retriever's index is cut to this size, most query-like nodes first
TITLE_WORDS = 10
DUP_SIM = 0.9         # fallback curation: a candidate this similar to a stored node is not new

RETRIEVER_PROMPT = (
    "You select memory for a question. The index lists knowledge nodes by section. Choose at "
    "most {sections} sections and at most {entries} entry nodes in them that best help with the "
    'Query, most useful first. Reply with JSON only: {"sections": ["section name"], "nodes": ["n1"]}'
)
CURATOR_PROMPT = (
    "You reflect on a new experience and curate a knowledge graph. You see the nodes retrieved "
    "for it, the experience and candidate knowledge points. Reply with JSON only:\n"
    '{"trace": ["n3", "n7"], "feedback": "helpful", "confidence": 0.8, '
    '"nodes": [{"section": "...", "title": "...", "content": "..."}], '
    '"revise": [{"id": "n3", "content": "..."}], "edges": [{"from": "n3", "to": "new1"}]}\n'
    "trace: the retrieved nodes that bear on the experience, in the order one leads to the next; "
    "feedback: helpful, harmful or neutral for that chain; confidence: 0 to 1; nodes: new "
    "knowledge points (refer to them as new1, new2, ... in edges); revise: corrected content for "
    "retrieved nodes; edges: directed relations between retrieved and new nodes."
)

WORD = re.compile(r"[a-z0-9]+")
NODE_ID = re.compile(r"\bn[0-9]+\b")
STOP = set("a an and are as at be but by did do does for from had has have he her his how i in is it its "
           "of on or our she so that the their them they this to was we were what when where which who "
           "why will with you your".split())


def content_words(text):
    return set(w for w in WORD.findall(text.lower()) if w not in STOP)


def approx_tokens(text):
    return (len(text) + 3) // 4


def parse_json(reply):
    start, end = reply.find("{"), reply.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(reply[start:end + 1])
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


@dataclass
class KnowledgeItem:
    section: str = field(default="", metadata={"description": "Who or what the text is about: the people involved or the theme"})
    points: list[str] = field(default_factory=list, metadata={"description": "Knowledge points, one self-contained sentence each"})
    date: str = field(default="", metadata={"description": "When it happened, if the text says"})


@dataclass
class Query:
    query_text: str = field(default="", metadata={"description": "The question as a short search query"})


class KnowledgeBase:
    """Nodes and evidence-weighted directed edges in SQLite; chroma finds similar nodes."""

    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.db = toolkit.db
        self.db.executescript(
            "CREATE TABLE nodes (id TEXT PRIMARY KEY, seq INTEGER, section TEXT, title TEXT, content TEXT);"
            "CREATE TABLE edges (src TEXT, dst TEXT, helpful REAL, harmful REAL, PRIMARY KEY (src, dst));")
        self.index = toolkit.chroma.get_or_create_collection("graph_nodes", metadata={"hnsw:space": "cosine"})
        self.count = 0

    # ------------------------------------------------------------------ graph primitives
    def node(self, nid):
        return self.db.execute("SELECT id, section, title, content FROM nodes WHERE id = ?", (nid,)).fetchone()

    def add_node(self, section, content, title=""):
        self.count += 1
        nid = "n" + str(self.count)
        title = title.strip() or " ".join(content.split()[:TITLE_WORDS])
        self.db.execute("INSERT INTO nodes VALUES (?, ?, ?, ?, ?)", (nid, self.count, section, title, content))
        self.index.add(ids=[nid], documents=[content], metadatas=[{"section": section}])
        return nid

    def ensure_edge(self, src, dst):
        self.db.execute("INSERT OR IGNORE INTO edges VALUES (?, ?, 0, 0)", (src, dst))

    def out_edges(self, nid):
        """[(dst, posterior-mean weight)], heaviest first, ties by node order."""
        rows = self.db.execute("SELECT e.dst, (1.0 + e.helpful) / (2.0 + e.helpful + e.harmful) AS w FROM edges e "
                               "JOIN nodes n ON n.id = e.dst WHERE e.src = ? ORDER BY w DESC, n.seq", (nid,)).fetchall()
        return [(r[0], r[1]) for r in rows]

    def render(self, row):
        return "[" + row[0] + "] " + row[3]

    # ------------------------------------------------------------------ retrieval
    def similar(self, text, k):
        if self.count == 0 or not text.strip():
            return []
        hits = self.index.query(query_texts=[text], n_results=min(k, self.count), include=["distances"])
        return [(nid, 1.0 - d) for nid, d in zip(hits["ids"][0], hits["distances"][0])]

    def choose_entries(self, candidates, sections, query_text):
        """At most MAX_SECTIONS sections and MAX_ENTRIES entry nodes from the candidates."""
        rows = [self.node(c) for c in candidates]
        rows = [r for r in rows if r is not None]
        if len(rows) > MAX_ENTRIES:
            # More proposals than the budget: keep the ones that share most words with the query.
            q = content_words(query_text)
            order = {r[0]: i for i, r in enumerate(rows)}
            rows = sorted(rows, key=lambda r: (-len(q & content_words(r[2] + " " + r[3])), order[r[0]]))
        chosen = [s for s in sections if any(r[1] == s for r in rows)][:MAX_SECTIONS]
        for r in rows:
            if r[1] not in chosen and len(chosen) < MAX_SECTIONS:
                chosen.append(r[1])
        entries = [r[0] for r in rows if r[1] in chosen][:MAX_ENTRIES]
        return [s for s in chosen if any(self.node(e)[1] == s for e in entries)], entries

    def traverse(self, entries):
        """Bounded breadth-first expansion; returns (loaded rows, edges followed, tokens, depth)."""
        queue = [(e, 0, None) for e in entries]
        seen = set(entries)
        loaded, followed, tokens, depth, chars = [], [], 0, 0, 0
        while queue and len(loaded) < MAX_NODES:
            nid, d, via = queue.pop(0)
            row = self.node(nid)
            text = self.render(row)
            if tokens + approx_tokens(text) > TOKEN_BUDGET or chars + len(text) + 1 > READ_LIMIT:
                break
            loaded.append(row)
            tokens += approx_tokens(text)
            chars += len(text) + 1
            depth = max(depth, d)
            if via is not None:
                followed.append(via)
            if d < MAX_HOPS:
                for dst, w in self.out_edges(nid):
                    if dst not in seen:
                        seen.add(dst)
                        queue.append((dst, d + 1, nid + "->" + dst + ":" + str(round(w, 3))))
        return loaded, followed, tokens, depth

    def build_index(self, query_text):
        rows = self.db.execute("SELECT id, section, title FROM nodes ORDER BY seq").fetchall()
        size = sum(len(r[0]) + len(r[2]) + 4 for r in rows) + sum(len(s) + 5 for s in set(r[1] for r in rows))
        cut = 0
        if size > INDEX_CHARS:
            q = content_words(query_text)
            ranked = sorted(rows, key=lambda r: -len(q & content_words(r[1] + " " + r[2])))
            kept, used = [], 0
            for r in ranked:
                if used + len(r[0]) + len(r[2]) + len(r[1]) + 9 <= INDEX_CHARS:
                    kept.append(r)
                    used += len(r[0]) + len(r[2]) + 4
            cut = len(rows) - len(kept)
            rows = sorted(kept, key=lambda r: int(r[0][1:]))
        sections = {}
        for nid, sec, title in rows:
            sections.setdefault(sec, []).append("- " + nid + ": " + title)
        text = "\n".join("## " + sec + "\n" + "\n".join(lines) for sec, lines in sections.items())
        return text, list(sections), cut

    # ------------------------------------------------------------------ read
    def read(self, query: Query) -> str:
        if self.count == 0:
            return ""
        index, section_names, cut = self.build_index(query.query_text)
        prompt = RETRIEVER_PROMPT.replace("{sections}", str(MAX_SECTIONS)).replace("{entries}", str(MAX_ENTRIES))
        messages = [{"role": "system", "content": prompt},
                    {"role": "user", "content": "Query: " + query.query_text + "\nNotes:\n" + index}]
        try:
            reply = self.toolkit.llm_completion(messages)
            data = parse_json(reply)
            if data is not None:
                candidates = [str(n) for n in data.get("nodes") or []]
                sections = [str(s) for s in data.get("sections") or [] if str(s) in section_names]
            else:
                candidates, sections = NODE_ID.findall(reply), []
            how = "retriever"
        except Exception as exc:
            self.toolkit.logger.debug("retriever call failed, entries by similarity: " + str(exc))
            candidates, sections, how = [n for n, _ in self.similar(query.query_text, 3 * MAX_ENTRIES)], [], "similarity"
        candidates = list(dict.fromkeys(candidates))
        chosen, entries = self.choose_entries(candidates, sections, query.query_text)
        if not entries:
            self.toolkit.logger.debug("retrieval: no valid entry node (" + how + "); no memory block")
            return ""
        loaded, followed, tokens, depth = self.traverse(entries)
        self.toolkit.logger.debug("retrieval (" + how + "): sections=" + json.dumps(chosen) + " entries="
                                  + ",".join(entries) + " loaded=" + ",".join(r[0] for r in loaded)
                                  + " edges=" + ",".join(followed) + " tokens=" + str(tokens) + " depth="
                                  + str(depth) + " index_cut=" + str(cut))
        return "\n".join(self.render(r) for r in loaded)

    # ------------------------------------------------------------------ write
    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        if not raw_text.strip():
            return
        section = item.section.strip()[:80] or "general"
        date = item.date.strip()[:60]
        candidates = []
        for p in item.points:
            p = " ".join(str(p).split())
            if p and date and date not in p:
                p = "(" + date + ") " + p   # date first, in the same sentence as the point
            if p and p not in candidates:
                candidates.append(p)
        # Retrieve for this episode first, as the answerer would have (graph of earlier episodes).
        entry_ids = [n for n, _ in self.similar(raw_text[:2000], 3 * MAX_ENTRIES)]
        chosen, entries = self.choose_entries(entry_ids, [], raw_text[:2000])
        loaded = self.traverse(entries)[0] if entries else []
        loaded_ids = [r[0] for r in loaded]
        messages = [{"role": "system", "content": CURATOR_PROMPT},
                    {"role": "user", "content": "Query: " + section + "\nNotes:\nRetrieved nodes:\n"
                     + ("\n".join("[" + r[0] + "] (" + r[1] + ") " + r[3] for r in loaded) or "(none)")
                     + "\nNew experience:\n" + raw_text[:6000] + "\nCandidate knowledge points:\n"
                     + "\n".join("- " + c for c in candidates)}]
        data = None
        try:
            data = parse_json(self.toolkit.llm_completion(messages))
        except Exception as exc:
            self.toolkit.logger.debug("curator call failed: " + str(exc))
        if data is None:
            data = self.rule_curation(section, candidates, loaded, raw_text)
            how = "rule"
        else:
            how = "curator"
        self.apply(data, loaded_ids, section, how)

    def rule_curation(self, section, candidates, loaded, raw_text):
        words = content_words(raw_text)
        trace = []
        for r in loaded:
            w = content_words(r[3])
            if w and len(w & words) >= 0.5 * len(w):
                trace.append(r[0])
        nodes, chain = [], []
        for c in candidates:
            near = self.similar(c, 1)
            if near and near[0][1] >= DUP_SIM:
                chain.append(near[0][0])   # already known: the chain runs through the stored node
            else:
                nodes.append({"section": section, "content": c})
                chain.append("new" + str(len(nodes)))
        if trace:
            chain = [trace[-1]] + chain
        edges = [{"from": a, "to": b} for a, b in zip(chain, chain[1:]) if a != b]
        return {"trace": trace, "feedback": "helpful", "confidence": 0.5, "nodes": nodes, "edges": edges}

    def apply(self, data, loaded_ids, section, how):
        # 1. Evidence from the ordered influence trace (loaded nodes only, each pair once).
        trace = [str(t) for t in data.get("trace") or [] if str(t) in loaded_ids]
        feedback = str(data.get("feedback") or "neutral").lower()
        try:
            conf = max(0.0, min(1.0, float(data.get("confidence", 0.0))))
        except (TypeError, ValueError):
            conf = 0.0
        pairs = []
        for a, b in zip(trace, trace[1:]):
            if a != b and (a, b) not in pairs:
                pairs.append((a, b))
        if conf > 0 and feedback in ("helpful", "harmful"):
            for a, b in pairs:
                self.ensure_edge(a, b)
                column = "helpful" if feedback == "helpful" else "harmful"
                self.db.execute("UPDATE edges SET " + column + " = " + column + " + ? WHERE src = ? AND dst = ?",
                                (conf, a, b))
        # 2. New nodes, revisions, relations.
        names = {}
        for i, spec in enumerate(data.get("nodes") or []):
            if isinstance(spec, dict) and str(spec.get("content", "")).strip():
                names["new" + str(i + 1)] = self.add_node(str(spec.get("section") or section).strip()[:80],
                                                          " ".join(str(spec["content"]).split()),
                                                          str(spec.get("title") or ""))
        for rev in data.get("revise") or []:
            if isinstance(rev, dict) and rev.get("id") in loaded_ids and str(rev.get("content", "")).strip():
                text = " ".join(str(rev["content"]).split())
                self.db.execute("UPDATE nodes SET content = ? WHERE id = ?", (text, rev["id"]))
                self.index.update(ids=[rev["id"]], documents=[text])
        known = set(loaded_ids) | set(names.values())
        made = []
        for e in data.get("edges") or []:
            if not isinstance(e, dict):
                continue
            a, b = names.get(str(e.get("from")), str(e.get("from"))), names.get(str(e.get("to")), str(e.get("to")))
            stored = a in known or self.node(a) is not None
            if a != b and stored and (b in known or self.node(b) is not None):
                self.ensure_edge(a, b)
                made.append(a + "->" + b)
        self.toolkit.logger.debug("curate (" + how + "): trace=" + ",".join(trace) + " " + feedback + "@"
                                  + str(conf) + " evidence_pairs=" + str(len(pairs)) + " new="
                                  + ",".join(names.values()) + " edges=" + ",".join(made) + " nodes=" + str(self.count))

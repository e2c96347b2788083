"""SelfMem (seed document 003): the raw transcript as an immutable source of truth in SQLite,
plus a small memory workspace the model curates itself.

Transcript store. Every episode is split into turns and appended to a SQLite table
`turns(turn_index, turn_id, role, time_anchor, content, rendered, char_count)`; triggers refuse
any UPDATE or DELETE, so nothing can rewrite what was said.

Memory workspace. Curated items (kind, content, the turn ids they rest on, active or archived)
in a second table, every change logged with its rationale. write() spends its one toolkit call
on the memory agent: it sees the workspace and the new turns and answers with operations -- add,
replace, merge, archive -- following a fixed procedural strategy in the spirit of the one
SelfMem's optimiser settled on: keep only stable, high-signal information (preferences,
constraints, relationships, standing plans), prefer replacing or merging over appending, leave
exact details (dates, counts, prices) to transcript lookup. When the reply cannot be read, a
rule stands in: the task agent's durable notes enter the workspace, replacing an active item
of the same kind whose word signature overlaps by half or more.

read() answers from both tiers with no model call: the workspace items that share most words
with the query, then the transcript turns that match the most query terms (SQL LIKE over the
turns, ranked in Python), shown in transcript order under their time anchors.

What the contract forced: SelfMem's agent works in a loop of tool calls (manifest, read-only SQL,
entity search, memory review, self-test probes) with cost and quality feedback; one call per
write means one round of operations per episode, with the transcript search done by the program.
Full-text search (FTS5) would rank turns better, but the sandbox refuses it (it needs a PRAGMA
the toolkit does not allow), so turns are found with LIKE.
"""
import json
import re
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = (
    "Say in a few words what this text is about, and note the stable information worth keeping "
    "about the people in it: preferences, constraints, relationships, standing plans."
)
INSTRUCTION_QUERY = "Restate the question as a short search query."
INSTRUCTION_RESPONSE = "Answer the question using the retrieved memory. Be short and specific."
ALWAYS_ON_KNOWLEDGE = ""

MAX_ACTIVE = 40        # active workspace items; the least recently touched are archived beyond it
SAME_SIGNATURE = 0.5   # fallback rule: word-signature overlap at which an item is replaced
WORKSPACE_K = 6
TURNS_K = 10
READ_LIMIT = 3000

STRATEGY = (
    "You manage a memory workspace next to an immutable transcript. Procedure: store only "
    "stable, high-signal information (preferences, constraints, relationships, standing plans); "
    "leave exact or changing details (dates, counts, prices) to transcript lookup; prefer "
    "replace or merge over add when an item covers the same thing; archive what the new turns "
    "make stale; cite the turn ids each item rests on.\n"
    'Reply with JSON only: {"operations": [{"op": "add", "kind": "preference", "content": "...", '
    '"source_turns": ["s1:t3"], "rationale": "..."}, {"op": "replace", "target": "m2", "content": "...", '
    '"source_turns": ["s2:t1"], "rationale": "..."}, {"op": "merge", "targets": ["m1", "m4"], '
    '"content": "...", "rationale": "..."}, {"op": "archive", "target": "m3", "rationale": "..."}]}'
)

WORD = re.compile(r"[a-z0-9]+")
ANCHOR = re.compile(r"^\s*\[([^\]]{1,80})\]\s*(.*)$")
SPEAKER = re.compile(r"^\s*([A-Z][\w .'-]{0,40}?):\s+(.*)$")
STOP = set("a an and are as at be but by did do does for from had has have he her his how i in is it its "
           "of on or our she so that the their them they this to was we were what when where which who "
           "why will with you your".split())


def content_words(text):
    return set(w for w in WORD.findall(text.lower()) if w not in STOP and len(w) > 1)


def stem(word):
    return word[:5]


@dataclass
class KnowledgeItem:
    topic: str = field(default="", metadata={"description": "What the text is about, in a few words"})
    durable_notes: list[str] = field(default_factory=list, metadata={"description": "Stable information about the people: preferences, constraints, relationships, plans"})
    date: str = field(default="", metadata={"description": "When the conversation took place, if the text says"})


@dataclass
class Query:
    query_text: str = field(default="", metadata={"description": "The question as a short search query"})


class KnowledgeBase:
    """Append-only transcript + curated workspace, both in SQLite."""

    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.db = toolkit.db
        self.db.executescript(
            "CREATE TABLE turns (turn_index INTEGER PRIMARY KEY, turn_id TEXT UNIQUE, role TEXT, "
            "time_anchor TEXT, content TEXT, rendered TEXT, char_count INTEGER);"
            "CREATE TRIGGER turns_no_update BEFORE UPDATE ON turns BEGIN SELECT RAISE(ABORT, 'transcript is immutable'); END;"
            "CREATE TRIGGER turns_no_delete BEFORE DELETE ON turns BEGIN SELECT RAISE(ABORT, 'transcript is immutable'); END;"
            "CREATE TABLE memory (id TEXT PRIMARY KEY, kind TEXT, content TEXT, source_turns TEXT, "
            "status TEXT, touched INTEGER);"
            "CREATE TABLE memory_log (seq INTEGER PRIMARY KEY, op TEXT, memory_id TEXT, rationale TEXT);")
        self.sessions = 0
        self.turn_count = 0
        self.memory_count = 0
        self.clock = 0

    # ------------------------------------------------------------------ transcript
    def append_transcript(self, raw_text, date):
        self.sessions += 1
        anchor, new = date, []
        for k, line in enumerate(raw_text.split("\n")):
            line = line.strip()
            if not line:
                continue
            m = ANCHOR.match(line)
            if m and re.search(r"\d", m.group(1)):
                inner = m.group(1)
                anchor = inner.split(" on ", 1)[1] if " on " in inner else inner
                line = m.group(2).strip()
                if not line or line.lower().startswith("session"):
                    continue
            s = SPEAKER.match(line)
            role, content = (s.group(1), s.group(2)) if s else ("narration", line)
            self.turn_count += 1
            turn_id = "s" + str(self.sessions) + ":t" + str(len(new) + 1)
            rendered = "[" + turn_id + "] " + role + ": " + content
            self.db.execute("INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (self.turn_count, turn_id, role, anchor, content, rendered, len(content)))
            new.append(rendered)
        return anchor, new

    # ------------------------------------------------------------------ workspace
    def active(self):
        return self.db.execute("SELECT id, kind, content, source_turns FROM memory WHERE status = 'active' "
                               "ORDER BY touched").fetchall()

    def log(self, op, memory_id, rationale):
        self.db.execute("INSERT INTO memory_log (op, memory_id, rationale) VALUES (?, ?, ?)",
                        (op, memory_id, str(rationale or "")[:300]))

    def add(self, kind, content, sources, rationale):
        self.memory_count += 1
        self.clock += 1
        mid = "m" + str(self.memory_count)
        self.db.execute("INSERT INTO memory VALUES (?, ?, ?, ?, 'active', ?)",
                        (mid, kind, content, json.dumps(sources), self.clock))
        self.log("add", mid, rationale)
        return mid

    def replace(self, mid, content, sources, rationale):
        self.clock += 1
        old = self.db.execute("SELECT source_turns FROM memory WHERE id = ?", (mid,)).fetchone()
        merged = list(dict.fromkeys(json.loads(old[0]) + list(sources))) if old else list(sources)
        self.db.execute("UPDATE memory SET content = ?, source_turns = ?, touched = ? WHERE id = ?",
                        (content, json.dumps(merged), self.clock, mid))
        self.log("replace", mid, rationale)

    def archive(self, mid, rationale):
        self.db.execute("UPDATE memory SET status = 'archived' WHERE id = ?", (mid,))
        self.log("archive", mid, rationale)

    def apply(self, ops, live):
        done = []
        for op in ops:
            kind = str(op.get("op", "")).lower()
            content = " ".join(str(op.get("content") or "").split())[:600]
            sources = [str(t) for t in op.get("source_turns") or []]
            why = op.get("rationale")
            if kind == "add" and content:
                done.append("add " + self.add(str(op.get("kind") or "note")[:30], content, sources, why))
            elif kind == "replace" and op.get("target") in live and content:
                self.replace(op["target"], content, sources, why)
                done.append("replace " + op["target"])
            elif kind == "merge" and content:
                targets = [t for t in op.get("targets") or [] if t in live]
                if targets:
                    self.replace(targets[0], content, sources, why)
                    for t in targets[1:]:
                        self.archive(t, "merged into " + targets[0])
                    done.append("merge " + ",".join(targets))
            elif kind == "archive" and op.get("target") in live:
                self.archive(op["target"], why)
                done.append("archive " + op["target"])
        return done

    def rule_ops(self, item, anchor, new_turns, live):
        ops = []
        sources = [t.split("]")[0][1:] for t in new_turns[:3]]
        for note in item.durable_notes:
            note = " ".join(str(note).split())
            if not note:
                continue
            sig = content_words(note)
            target = None
            for mid, kind, content, _ in live.values():
                other = content_words(content)
                if kind == "profile" and sig and other and len(sig & other) >= SAME_SIGNATURE * len(sig | other):
                    target = mid
            if target:
                ops.append({"op": "replace", "target": target, "content": note, "source_turns": sources,
                            "rationale": "rule: same signature"})
            else:
                ops.append({"op": "add", "kind": "profile", "content": note, "source_turns": sources,
                            "rationale": "rule: durable note"})
        return ops

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        if not raw_text.strip():
            return
        anchor, new_turns = self.append_transcript(raw_text, item.date.strip()[:60])
        live = {}
        for row in self.active():
            live[row[0]] = row
        workspace = "\n".join("[" + r[0] + "] (" + r[1] + ") " + r[2] for r in live.values()) or "(empty)"
        messages = [{"role": "system", "content": STRATEGY},
                    {"role": "user", "content": "Query: " + (item.topic or "what to remember") + "\nNotes:\n"
                     + "Workspace:\n" + workspace + "\nNew turns (" + str(anchor) + "):\n" + "\n".join(new_turns)}]
        ops = None
        try:
            reply = self.toolkit.llm_completion(messages)
            start, end = reply.find("{"), reply.rfind("}")
            data = json.loads(reply[start:end + 1]) if 0 <= start < end else None
            if isinstance(data, dict) and isinstance(data.get("operations"), list):
                ops = [op for op in data["operations"] if isinstance(op, dict)]
        except Exception as exc:
            self.toolkit.logger.debug("memory agent reply unusable: " + str(exc)[:200])
        how = "agent"
        if ops is None:
            ops, how = self.rule_ops(item, anchor, new_turns, live), "rule"
        done = self.apply(ops, live)
        active = self.active()
        for row in active[:max(0, len(active) - MAX_ACTIVE)]:
            self.archive(row[0], "workspace over budget")
        self.toolkit.logger.debug("session s" + str(self.sessions) + ": " + str(len(new_turns))
                                  + " turns appended (transcript " + str(self.turn_count) + "); workspace ("
                                  + how + "): " + ("; ".join(done) or "no change"))

    # ------------------------------------------------------------------ read
    def read(self, query: Query) -> str:
        if self.turn_count == 0:
            return "No information stored."
        terms = content_words(query.query_text)
        stems = set(stem(t) for t in terms)
        items = []
        for mid, kind, content, _ in self.active():
            overlap = len(stems & set(stem(w) for w in content_words(content)))
            if overlap:
                items.append((-overlap, mid, kind, content))
        items = sorted(items)[:WORKSPACE_K]
        turns = []
        if stems:
            patterns = ["%" + s + "%" for s in sorted(stems)]
            where = " OR ".join("content LIKE ? OR role LIKE ?" for _ in patterns)
            params = []
            for p in patterns:
                params += [p, p]
            rows = self.db.execute("SELECT turn_index, time_anchor, role, content FROM turns WHERE " + where
                                   + " LIMIT 5000", tuple(params)).fetchall()
            scored = []
            for idx, anchor, role, content in rows:
                words = set(stem(w) for w in content_words(role + " " + content))
                scored.append((-len(stems & words), idx, anchor, role, content))
            turns = sorted(sorted(scored)[:TURNS_K], key=lambda t: t[1])
        parts = []
        if items:
            parts.append("Memory workspace:\n" + "\n".join("- (" + k + ") " + c for _, _, k, c in items))
        if turns:
            lines, last = [], None
            for _, idx, anchor, role, content in turns:
                if anchor != last:
                    lines.append("[" + anchor + "]")
                    last = anchor
                lines.append(role + ": " + content)
            parts.append("Transcript evidence:\n" + "\n".join(lines))
        self.toolkit.logger.debug("read: " + str(len(items)) + " workspace items, " + str(len(turns)) + " turns")
        return "\n\n".join(parts)[:READ_LIMIT] if parts else "No relevant information found."

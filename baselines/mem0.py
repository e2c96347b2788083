"""Mem0 (Chhikara et al. 2025; paper Table 1): a store of atomic facts kept current by
ADD / UPDATE / DELETE / NONE decisions, read back by vector search.

Mem0's write path has two LLM phases. Phase one, extracting atomic facts from the new
messages, is what the task agent already does when it fills `KnowledgeItem.facts`, so it costs
write() nothing. Phase two is write()'s one toolkit call: for the new facts, the most similar
stored memories (chroma, cosine) are shown to the model under short integer ids, and it answers
with one operation per fact -- ADD a new memory, UPDATE a stored one whose topic it refines,
DELETE one it contradicts, or NONE when the fact is already known. When no stored memory is
related, every fact is added without a call. When the reply cannot be read as operations, a
deterministic rule decides: a near-identical memory means NONE (or UPDATE when the new fact says
more), anything else is an ADD. Every change is logged to a history table in SQLite, as in
Mem0. read() is plain similarity search over the memories, no LLM call.

What the contract forced: Mem0 asks for the update decision once per extracted fact; one call
per write means all of an episode's facts are decided together in one prompt. Mem0's optional
graph store (Mem0^g) is not included.
"""
import hashlib
import json
import re
from dataclasses import dataclass, field

INSTRUCTION_KNOWLEDGE_ITEM = (
    "List the atomic facts in this text worth remembering about the people in it: personal "
    "details, preferences, plans, relationships and events, one short self-contained sentence "
    "each, with names instead of pronouns."
)
INSTRUCTION_QUERY = "Restate the question as a short search query for stored facts."
INSTRUCTION_RESPONSE = "Answer the question using the retrieved memory. Be short and specific."
ALWAYS_ON_KNOWLEDGE = ""

MAX_FACTS = 12        # facts taken from one episode
SEARCH_K = 3          # stored memories looked up per new fact
RELATED_SIM = 0.5     # cosine similarity from which a stored memory is shown to the model
SAME_SIM = 0.9        # fallback rule: at or above this a memory already states the fact
READ_K = 10           # memories returned by read()
READ_LIMIT = 3000

UPDATE_PROMPT = (
    "You manage a memory of facts. For each new fact decide one operation:\n"
    "- ADD: the fact is new information;\n"
    "- UPDATE: a stored memory is about the same thing but the fact adds or corrects detail; "
    "give the stored id and the full rewritten text;\n"
    "- DELETE: the fact contradicts a stored memory; give the stored id;\n"
    "- NONE: a stored memory already says it.\n"
    'Reply with JSON only: {"operations": [{"event": "ADD", "text": "..."}, '
    '{"event": "UPDATE", "id": "0", "text": "..."}, {"event": "DELETE", "id": "1"}, '
    '{"event": "NONE", "id": "2"}]}'
)

WORD = re.compile(r"[a-z0-9]+")
STOP = set("a an and are as at be but by for from had has have he her his i in is it its of on or our "
           "she so that the their them they this to was we were will with you your".split())


def content_words(text):
    return set(w for w in WORD.findall(text.lower()) if w not in STOP)


@dataclass
class KnowledgeItem:
    facts: list[str] = field(default_factory=list, metadata={"description": "Atomic facts from the text, one short self-contained sentence each"})
    date: str = field(default="", metadata={"description": "When the conversation took place, if the text says"})


@dataclass
class Query:
    query_text: str = field(default="", metadata={"description": "A search query for stored facts"})


class KnowledgeBase:
    """Facts in a cosine-space chroma collection, a change history in SQLite."""

    def __init__(self, toolkit):
        self.toolkit = toolkit
        self.memories = toolkit.chroma.get_or_create_collection("mem0_memories", metadata={"hnsw:space": "cosine"})
        self.db = toolkit.db
        self.db.execute("CREATE TABLE history (seq INTEGER PRIMARY KEY, memory_id TEXT, event TEXT, "
                        "old_text TEXT, new_text TEXT)")
        self.next_id = 0
        self.live = 0

    # ------------------------------------------------------------------ store operations
    def log(self, memory_id, event, old_text, new_text):
        self.db.execute("INSERT INTO history (memory_id, event, old_text, new_text) VALUES (?, ?, ?, ?)",
                        (memory_id, event, old_text, new_text))

    def add(self, text, date):
        memory_id = "m" + str(self.next_id)
        self.next_id += 1
        self.memories.add(ids=[memory_id], documents=[text],
                          metadatas=[{"date": date, "hash": hashlib.md5(text.encode("utf-8")).hexdigest()}])
        self.live += 1
        self.log(memory_id, "ADD", None, text)

    def update(self, memory_id, old_text, text, date):
        self.memories.update(ids=[memory_id], documents=[text],
                             metadatas=[{"date": date, "hash": hashlib.md5(text.encode("utf-8")).hexdigest()}])
        self.log(memory_id, "UPDATE", old_text, text)

    def delete(self, memory_id, old_text):
        self.memories.delete(ids=[memory_id])
        self.live -= 1
        self.log(memory_id, "DELETE", old_text, None)

    # ------------------------------------------------------------------ write
    def related(self, facts):
        """{short id: (memory id, text, best similarity to any fact)} and each fact's best match."""
        shown, best = {}, []
        by_memory = {}
        for fact in facts:
            top = None
            if self.live > 0:
                hits = self.memories.query(query_texts=[fact], n_results=min(SEARCH_K, self.live),
                                           include=["documents", "distances"])
                for mid, doc, dist in zip(hits["ids"][0], hits["documents"][0], hits["distances"][0]):
                    sim = 1.0 - dist
                    if sim >= RELATED_SIM and mid not in by_memory:
                        by_memory[mid] = str(len(by_memory))
                        shown[by_memory[mid]] = (mid, doc)
                    if top is None or sim > top[2]:
                        top = (mid, doc, sim)
            best.append(top)
        return shown, best

    def parse_operations(self, reply):
        start, end = reply.find("{"), reply.rfind("}")
        if start < 0 or end <= start:
            return None
        try:
            data = json.loads(reply[start:end + 1])
        except ValueError:
            return None
        ops = data.get("operations") if isinstance(data, dict) else None
        if not isinstance(ops, list):
            return None
        return [op for op in ops if isinstance(op, dict) and str(op.get("event", "")).upper()
                in ("ADD", "UPDATE", "DELETE", "NONE")]

    def fallback_operations(self, facts, best):
        ops = []
        for fact, top in zip(facts, best):
            if top is None or top[2] < SAME_SIM:
                ops.append({"event": "ADD", "text": fact})
            elif content_words(fact) <= content_words(top[1]):
                ops.append({"event": "NONE", "memory": top[0]})
            else:
                ops.append({"event": "UPDATE", "memory": top[0], "text": fact})
        return ops

    def write(self, item: KnowledgeItem, raw_text: str) -> None:
        facts = []
        for fact in item.facts:
            fact = " ".join(str(fact).split())
            if fact and fact not in facts:
                facts.append(fact)
        facts = facts[:MAX_FACTS]
        if not facts:
            self.toolkit.logger.debug("no facts extracted; nothing stored")
            return
        date = item.date.strip()[:60]
        shown, best = self.related(facts)
        ops = None
        if shown:
            listing = [{"id": sid, "text": text} for sid, (mid, text) in shown.items()]
            messages = [{"role": "system", "content": UPDATE_PROMPT},
                        {"role": "user", "content": "Query: how do the new facts change the stored memories?\n"
                         + "Memories:\n" + json.dumps(listing, ensure_ascii=False)
                         + "\nNew facts:\n" + json.dumps(facts, ensure_ascii=False)}]
            try:
                ops = self.parse_operations(self.toolkit.llm_completion(messages))
            except Exception as exc:
                self.toolkit.logger.debug("update call failed: " + str(exc))
            for op in ops or []:
                target = shown.get(str(op.get("id", "")))
                op["memory"] = target[0] if target else None
        source = "llm"
        if ops is None:
            ops = self.fallback_operations(facts, best)
            source = "rule" if shown else "no related memories"
        texts = {}
        for sid, (mid, text) in shown.items():
            texts[mid] = text
        for top in best:
            if top is not None:
                texts[top[0]] = top[1]
        counts = {"ADD": 0, "UPDATE": 0, "DELETE": 0, "NONE": 0}
        for op in ops:
            event = str(op.get("event", "")).upper()
            target = op.get("memory")
            text = " ".join(str(op.get("text") or "").split())
            if event == "ADD" and text:
                self.add(text, date)
            elif event == "UPDATE" and target in texts and text:
                self.update(target, texts[target], text, date)
                texts[target] = text
            elif event == "DELETE" and target in texts:
                self.delete(target, texts.pop(target))
            elif event == "NONE":
                pass
            else:
                continue
            counts[event] += 1
        self.toolkit.logger.debug("facts " + str(len(facts)) + " (" + source + "): "
                                  + ", ".join(k + " " + str(v) for k, v in counts.items()) + "; memories " + str(self.live))

    # ------------------------------------------------------------------ read
    def read(self, query: Query) -> str:
        if self.live == 0:
            return "No information stored."
        hits = self.memories.query(query_texts=[query.query_text], n_results=min(READ_K, self.live),
                                   include=["documents", "metadatas"])
        lines = []
        for doc, meta in zip(hits["documents"][0], hits["metadatas"][0]):
            lines.append(("[" + meta["date"] + "] " if meta.get("date") else "") + doc)
        return "\n".join(lines)[:READ_LIMIT]

"""Each baseline's characteristic behaviour, through the real sandbox (ProgramSession: worker
process, RestrictedPython loader, real chromadb and sqlite) with a scripted toolkit LLM.
Internals are observed through read() output and the programs' logger.debug lines."""
from __future__ import annotations

import json
import re

import pytest

from sandbox.contract import DEFAULT_ALLOWED_IMPORTS
from mstar.program.sources import baseline_names, load_program_source
from mstar.offline.toolkit_model import OfflineToolkitModel
from sandbox.worker.embedding import embed_text
from sandbox.engine.gates import run_gates
from sandbox.engine.session import ProgramSession, SandboxLimits

LIMITS = SandboxLimits(call_timeout_s=20.0)


class ScriptedLLM:
    """Toolkit LLM stand-in: `reply(messages) -> str`, every call recorded."""

    def __init__(self, reply):
        self.reply = reply
        self.calls: list[list[dict]] = []

    def __call__(self, messages):
        self.calls.append(messages)
        return self.reply(messages)

    @staticmethod
    def sequence(*replies):
        it = iter(replies)
        return ScriptedLLM(lambda messages: next(it))


def session(program: str, llm=None, source: str | None = None) -> ProgramSession:
    src = source if source is not None else load_program_source(program)[1]
    s = ProgramSession(src, allowed_imports=DEFAULT_ALLOWED_IMPORTS, limits=LIMITS,
                       llm=llm or ScriptedLLM(lambda m: "no structured reply"))
    s.start()
    return s


def log_field(logs: list[str], key: str) -> str:
    for line in reversed(logs):
        m = re.search(key + r"=(\S*)", line)
        if m:
            return m.group(1)
    raise AssertionError(f"{key}= not in logs {logs}")


# ------------------------------------------------------------------------- every program

@pytest.mark.parametrize("name", baseline_names())
def test_every_baseline_passes_the_gates_within_one_call_per_op(name):
    llm = OfflineToolkitModel().complete
    report = run_gates(load_program_source(name)[1], allowed_imports=DEFAULT_ALLOWED_IMPORTS,
                       limits=LIMITS, llm=llm)
    assert report.ok, report.error
    windows = [c["window"] for c in report.llm_calls]
    assert all(windows.count(w) == 1 for w in windows), windows      # never a second call per op
    assert not any("budget" in line.lower() for line in report.logs), report.logs


# ------------------------------------------------------------------------- No Memory, Vector Search

def test_no_memory_returns_nothing():
    llm = ScriptedLLM(lambda m: "unused")
    with session("no_memory", llm) as s:
        s.write({"topic": "bakery"}, "Maya: I signed the lease for my bakery today.")
        assert s.read({"query_text": "What did Maya sign?"}).output == ""
    assert llm.calls == []


def test_vector_search_returns_the_top_k_chunks_by_similarity():
    episodes = [
        "Maya signed the lease for her bakery on Dock Street.",
        "Tom trains for the Ridgeback Trail half marathon every weekend.",
        "Maya named the bakery Flour and Fable after her grandmother's stories.",
        "Priya bakes cardamom knots every morning at the bakery.",
        "Ingrid is expecting a baby girl in July.",
        "The ferry terminal is next to the bakery on Dock Street.",
        "Tom's beagle Pepper keeps stealing socks.",
    ]
    query = "bakery on Dock Street lease"
    sims = [float(embed_text(e) @ embed_text(query)) for e in episodes]
    expected = [e for _, e in sorted(zip(sims, episodes), key=lambda p: -p[0])][:5]
    with session("vector_search") as s:
        for e in episodes:
            s.write({"topic": "", "content": ""}, e)
        out = s.read({"query_text": query}).output
    assert out.split("\n\n") == expected       # exactly the five nearest, nearest first


# ------------------------------------------------------------------------- Trajectory Retrieval

def test_trajectory_retrieval_returns_the_one_most_similar_whole_episode():
    a = "[1 May, 2024] Maya: The oven broke.\nTom: Call the repair shop on Dock Street.\nMaya: Fixed by noon."
    b = "[2 May, 2024] Tom: My half marathon is on Sunday.\nMaya: Eat pasta the night before."
    c = "[3 May, 2024] Ingrid: The baby is due in July.\nTom: I will be an uncle!"
    with session("trajectory_retrieval") as s:
        for ep in (a, b, c):
            s.write({"summary": ep.split("\n")[0]}, ep)
        out = s.read({"query_text": "half marathon Sunday pasta"}).output
    assert out == b


# ------------------------------------------------------------------------- Dynamic Cheatsheet

def test_dynamic_cheatsheet_rewrites_one_summary_from_the_current_one():
    llm = ScriptedLLM.sequence("CHEATSHEET v1: Maya owns a bakery.",
                               "CHEATSHEET v2: Maya owns Flour & Fable; Tom runs trails.")
    with session("dynamic_cheatsheet", llm) as s:
        r1 = s.write({"summary": "Maya opened a bakery."}, "Maya: I opened a bakery.")
        r2 = s.write({"summary": "Tom runs trails."}, "Tom: I run trails now.")
        out_a = s.read({"query_text": "Who runs trails?"})
        out_b = s.read({"query_text": "something else entirely"})
    assert r1.llm_calls == r2.llm_calls == 1
    assert out_a.output == out_b.output == "CHEATSHEET v2: Maya owns Flour & Fable; Tom runs trails."
    # the second rewrite started from the first cheatsheet and saw the new episode
    second_prompt = "\n".join(m["content"] for m in llm.calls[1])
    assert "CHEATSHEET v1: Maya owns a bakery." in second_prompt and "I run trails now" in second_prompt
    assert out_a.llm_calls == 0


# ------------------------------------------------------------------------- ACE

def test_ace_merges_near_duplicate_bullets():
    with session("ace") as s:   # replies are not JSON: the deterministic curator rule runs
        s.write({"topic": "bakery", "insights": ["Maya signed the lease for her bakery on Dock Street."],
                 "date": "14 March, 2024"}, "Maya: I signed the lease for my bakery on Dock Street!")
        res = s.write({"topic": "bakery", "insights": ["Maya signed the lease for her own bakery on Dock Street",
                                                       "Tom's sister Ingrid expects a baby in July."],
                       "date": "14 March, 2024"}, "Maya: Yes, the lease for my own bakery on Dock Street.")
        out = s.read({"query_text": "bakery lease Dock Street"}).output
    assert "merged into ['ctx-00001']" in res.logs[-1]
    assert "added ['ctx-00002']" in res.logs[-1]
    lease = [l for l in out.splitlines() if "lease" in l]
    assert len(lease) == 1 and lease[0].startswith("[ctx-00001]")
    assert "own bakery" in lease[0]            # the merge kept the fuller wording
    assert "## bakery" in out


def test_ace_counts_helpful_and_harmful_tags_and_keeps_counters():
    def reply(messages):
        prompt = messages[-1]["content"]
        if "ctx-00001" not in prompt:    # first episode: empty playbook, two new bullets
            return json.dumps({"bullet_tags": [], "operations": [
                {"type": "ADD", "section": "people", "content": "Tom teaches chemistry at Hillcrest."},
                {"type": "ADD", "section": "pets", "content": "Pepper the beagle steals socks."}]})
        return json.dumps({"bullet_tags": [{"id": "ctx-00001", "tag": "helpful"},
                                           {"id": "ctx-00002", "tag": "harmful"},
                                           {"id": "ctx-09999", "tag": "helpful"}], "operations": []})
    llm = ScriptedLLM(reply)
    with session("ace", llm) as s:
        s.write({"topic": "t", "insights": []}, "Tom: I teach chemistry at Hillcrest. Pepper stole a sock.")
        for _ in range(2):
            res = s.write({"topic": "t", "insights": []}, "Tom: chemistry class again. Pepper the beagle again.")
        out = s.read({"query_text": "Tom chemistry Pepper beagle"}).output
    assert "[ctx-00001] helpful=2 harmful=0 :: Tom teaches chemistry at Hillcrest." in out
    assert "[ctx-00002] helpful=0 harmful=2 :: Pepper the beagle steals socks." in out
    assert "## people" in out and "## pets" in out
    assert "ctx-09999" not in res.logs[-1]    # a tag for a bullet that was not shown is dropped


# ------------------------------------------------------------------------- GraphMemory

def graph_llm(curator_replies, retriever):
    """Curator replies in order; retriever(messages) for reads."""
    it = iter(curator_replies)

    def reply(messages):
        if "curate" in messages[0]["content"]:
            return json.dumps(next(it))
        return retriever(messages)
    return ScriptedLLM(reply)


CHAIN = {  # n1 -> n2 -> n4 -> n5 (n5 is three hops out), n1 -> n3; a second section with n6
    "trace": [], "feedback": "neutral", "confidence": 0,
    "nodes": [{"section": "Maya", "content": "Maya signed the bakery lease on Dock Street."},
              {"section": "Maya", "content": "The bakery is called Flour and Fable."},
              {"section": "Maya", "content": "Maya hired Priya as an assistant."},
              {"section": "Maya", "content": "Flour and Fable opened in July."},
              {"section": "Maya", "content": "A review called it the best bakery on the waterfront."},
              {"section": "Tom", "content": "Tom runs the Ridgeback Trail half marathon."}],
    "edges": [{"from": "new1", "to": "new2"}, {"from": "new1", "to": "new3"},
              {"from": "new2", "to": "new4"}, {"from": "new4", "to": "new5"}],
}


def test_graph_memory_traversal_keeps_its_hop_budget_and_follows_edge_weights():
    retriever = lambda m: json.dumps({"sections": ["Maya"], "nodes": ["n1"]})
    evidence = [  # the curator's influence traces: n1 -> n3 helped, n1 -> n2 misled
        {"trace": ["n1", "n3"], "feedback": "helpful", "confidence": 1.0},
        {"trace": ["n1", "n2"], "feedback": "harmful", "confidence": 1.0},
        {"trace": ["n1", "n2"], "feedback": "neutral", "confidence": 1.0},   # leaves counters alone
    ]
    llm = graph_llm([CHAIN] + evidence, retriever)
    with session("graph_memory", llm) as s:
        s.write({"section": "Maya", "points": []}, "Maya: I signed the lease. The bakery is Flour and Fable.")
        before = s.read({"query_text": "bakery"})
        for _ in evidence:
            s.write({"section": "Maya", "points": []}, "Maya: the bakery, the lease, Priya, Flour and Fable.")
        after = s.read({"query_text": "bakery"})
    # breadth-first from n1: depth 0 n1, depth 1 n2 n3 (tie -> older first), depth 2 n4; n5 is hop 3
    assert log_field(before.logs, "loaded") == "n1,n2,n3,n4"
    assert log_field(before.logs, "depth") == "2"
    assert "Ridgeback" not in before.output and "waterfront" not in before.output
    # evidence reorders the expansion: n1->n3 weight 2/3 now beats n1->n2 at 1/3
    assert log_field(after.logs, "loaded") == "n1,n3,n2,n4"
    assert log_field(after.logs, "edges") == "n1->n3:0.667,n1->n2:0.333,n2->n4:0.5"
    assert after.output.splitlines()[1] == "[n3] Maya hired Priya as an assistant."


def test_graph_memory_entry_node_and_section_budgets_and_empty_selection():
    nodes = [{"section": sec, "content": f"{sec} fact number {i} about the bakery"}
             for sec in ("Maya", "Tom", "Ingrid") for i in range(5)]
    build = {"trace": [], "feedback": "neutral", "confidence": 0, "nodes": nodes, "edges": []}
    proposals = iter([
        json.dumps({"nodes": [f"n{i}" for i in range(1, 16)]}),     # 15 entries over 3 sections
        "Nothing in the index is relevant.",                        # no valid entry
    ])
    llm = graph_llm([build], lambda m: next(proposals))
    with session("graph_memory", llm) as s:
        s.write({"section": "x", "points": []}, "Maya, Tom and Ingrid talk about the bakery.")
        many = s.read({"query_text": "bakery fact"})
        none = s.read({"query_text": "bakery fact"})
    sections = json.loads(re.search(r"sections=(\[.*?\]) entries=", many.logs[-1]).group(1))
    entries = log_field(many.logs, "entries").split(",")
    assert len(sections) <= 2 and len(entries) == 6
    assert all(e in [f"n{i}" for i in range(1, 11)] for e in entries)   # only from the two sections
    assert none.output == "" and "no valid entry" in none.logs[-1]


def test_graph_memory_node_and_token_budgets():
    star = {"trace": [], "feedback": "neutral", "confidence": 0,
            "nodes": [{"section": "Maya", "content": f"Bakery fact {i}: " + "flour " * 15} for i in range(20)],
            "edges": [{"from": "new1", "to": f"new{i}"} for i in range(2, 21)]}
    retriever = lambda m: json.dumps({"sections": ["Maya"], "nodes": ["n1"]})
    with session("graph_memory", graph_llm([star], retriever)) as s:
        s.write({"section": "Maya", "points": []}, "Maya talks about flour.")
        full = s.read({"query_text": "flour"})
    loaded = log_field(full.logs, "loaded").split(",")
    assert len(loaded) == 12                       # MAX_NODES, although 20 are reachable
    assert int(log_field(full.logs, "tokens")) <= 2500
    # the token budget binds when it is the tightest limit
    source = load_program_source("graph_memory")[1].replace("TOKEN_BUDGET = 2500", "TOKEN_BUDGET = 60")
    with session("graph_memory", graph_llm([star], retriever), source=source) as s:
        s.write({"section": "Maya", "points": []}, "Maya talks about flour.")
        small = s.read({"query_text": "flour"})
    tokens = int(log_field(small.logs, "tokens"))
    assert 0 < tokens <= 60
    assert len(log_field(small.logs, "loaded").split(",")) == len(small.output.splitlines()) < 12


# ------------------------------------------------------------------------- Mem0

def test_mem0_adds_without_a_call_then_applies_update_and_delete_decisions():
    def reply(messages):
        prompt = messages[-1]["content"]
        if "no longer" in prompt:
            return json.dumps({"operations": [{"event": "DELETE", "id": "0"}]})
        return json.dumps({"operations": [{"event": "UPDATE", "id": "0",
                                           "text": "Tom teaches biology at Hillcrest School."}]})
    llm = ScriptedLLM(reply)
    with session("mem0", llm) as s:
        first = s.write({"facts": ["Tom teaches chemistry at Hillcrest School."], "date": "1 May, 2024"}, "t")
        s.write({"facts": ["Tom teaches biology at Hillcrest School."], "date": "2 May, 2024"}, "t")
        updated = s.read({"query_text": "What does Tom teach?"}).output
        s.write({"facts": ["Tom no longer teaches at Hillcrest School."], "date": "3 May, 2024"}, "t")
        gone = s.read({"query_text": "What does Tom teach?"}).output
    assert first.llm_calls == 0 and "no related memories" in first.logs[-1]
    shown = json.loads(llm.calls[0][-1]["content"].split("Memories:\n")[1].split("\nNew facts:")[0])
    assert shown == [{"id": "0", "text": "Tom teaches chemistry at Hillcrest School."}]
    assert updated == "[2 May, 2024] Tom teaches biology at Hillcrest School."
    assert gone == "No information stored."


def test_mem0_rule_skips_a_fact_it_already_holds():
    with session("mem0") as s:   # unreadable replies: the deterministic rule decides
        s.write({"facts": ["Maya adopted a beagle named Pepper."]}, "t")
        res = s.write({"facts": ["Maya adopted a beagle named Pepper.", "Maya's bakery opens in July."]}, "t")
        out = s.read({"query_text": "Maya beagle"}).output
    assert "(rule): ADD 1, UPDATE 0, DELETE 0, NONE 1; memories 2" in res.logs[-1]
    assert out.count("Pepper") == 1


# ------------------------------------------------------------------------- G-Memory

def test_g_memory_links_similar_queries_hops_the_query_graph_and_climbs_to_insights():
    def reply(messages):
        system, prompt = messages[0]["content"], messages[-1]["content"]
        if "insight layer" in system:
            if "i1:" in prompt:          # a related task's insight is shown: the episode supports it
                return json.dumps({"supported": ["i1"], "new": []})
            return json.dumps({"supported": [], "new": ["Proof the dough overnight for a better crumb."]})
        return "CONDENSED: " + prompt.split("Texts:\n")[1][:40]
    episodes = [("baking sourdough bread at the bakery", "Maya: The sourdough proofed overnight."),
                ("baking sourdough rye bread at the bakery", "Priya: We tried a rye sourdough today."),
                ("training for the trail half marathon", "Tom: Long run of eighteen kilometres."),
                ("bread baking class for kids at the bakery", "Maya: Twelve kids came to the class.")]
    llm = ScriptedLLM(reply)
    with session("g_memory", llm) as s:
        logs = [s.write({"task": t, "insight": "x", "date": ""}, text).logs[-1] for t, text in episodes]
        out = s.read({"query_text": "sourdough bread baking"})
    assert "linked to []" in logs[0] and "linked to ['q1']" in logs[1]
    assert "linked to []" in logs[2] and "linked to ['q1', 'q2']" in logs[3]
    # vector search finds q1, q2; one hop along the query graph adds q4; the marathon q3 stays out
    assert "seeds ['q1', 'q2'] + hop ['q4']; insights ['i1']" in out.logs[-1]
    assert "bread baking class for kids" in out.output and "marathon" not in out.output
    # upward: the shared insight, supported by three related tasks
    assert "- Proof the dough overnight for a better crumb. (support 3)" in out.output
    # downward: the closest trajectories, sparsified by the one read call
    assert "CONDENSED: Maya: The sourdough proofed overnight." in out.output
    assert out.llm_calls == 1


# ------------------------------------------------------------------------- ReasoningBank

def test_reasoning_bank_retrieves_by_task_description_not_item_text():
    items = ("# Memory Item\n## Title Knot dough\n## Description Cardamom knots need cold dough.\n"
             "## Content Chill the cardamom knot dough before shaping.\n"
             "# Memory Item\n## Title Opening hours\n## Description Open early.\n## Content Open at seven.")
    llm = ScriptedLLM.sequence(items, "not in the memory item layout")
    with session("reasoning_bank", llm) as s:
        a = s.write({"task": "Running the bakery morning shift", "title": "t", "lesson": "l", "date": "4 May, 2024"},
                    "Maya: shaping cardamom knots at dawn.")
        b = s.write({"task": "Planning the trail marathon", "title": "Pace", "lesson": "Start slow on hills."},
                    "Tom: my marathon plan.")
        shift = s.read({"task": "bakery morning shift"}).output
        marathon = s.read({"task": "marathon planning"}).output
    assert "2 item(s) from llm" in a.logs[-1] and "1 item(s) from task agent" in b.logs[-1]
    assert shift.startswith("[4 May, 2024] Experience: Running the bakery morning shift")
    assert "Chill the cardamom knot dough" in shift and "Open at seven." in shift   # the whole experience
    assert "Start slow" not in shift
    assert "Content: Start slow on hills." in marathon and "cardamom" not in marathon


# ------------------------------------------------------------------------- SelfMem

def test_selfmem_replaces_workspace_memory_while_the_transcript_keeps_what_was_said():
    s1 = "[9:00 am on 14 March, 2024] Session 1 — Maya and Tom\nMaya: I only drink oat milk in my coffee.\nTom: Noted!"
    s2 = "[10:00 am on 2 April, 2024] Session 2 — Maya and Tom\nMaya: I switched to almond milk last week.\nTom: Fancy."

    def reply(messages):
        prompt = messages[-1]["content"]
        if "[m1]" not in prompt:
            return json.dumps({"operations": [{"op": "add", "kind": "preference", "content": "Maya drinks oat milk.",
                                               "source_turns": ["s1:t1"], "rationale": "stable preference"}]})
        return json.dumps({"operations": [{"op": "replace", "target": "m1", "content": "Maya drinks almond milk.",
                                           "source_turns": ["s2:t1"], "rationale": "preference changed"}]})
    llm = ScriptedLLM(reply)
    with session("selfmem", llm) as s:
        first = s.write({"topic": "coffee", "durable_notes": []}, s1)
        second = s.write({"topic": "coffee", "durable_notes": []}, s2)
        out = s.read({"query_text": "What milk does Maya drink?"})
    assert "2 turns appended (transcript 2)" in first.logs[-1]
    assert "replace m1" in second.logs[-1] and "transcript 4" in second.logs[-1]
    assert "[s2:t1] Maya: I switched to almond milk last week." in llm.calls[1][-1]["content"]
    workspace, transcript = out.output.split("Transcript evidence:")
    assert "(preference) Maya drinks almond milk." in workspace and "oat" not in workspace
    # the transcript still holds the superseded turn verbatim, under its time anchor
    assert "[14 March, 2024]\nMaya: I only drink oat milk in my coffee." in transcript
    assert "[2 April, 2024]\nMaya: I switched to almond milk last week." in transcript
    assert out.llm_calls == 0

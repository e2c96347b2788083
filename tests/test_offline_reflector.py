"""Tests for the offline reflector: mutation catalogue, reply format, determinism, lineage,
compile-fix, and chains of mutations over generations.

Mutated programs are checked for real: they parse, pass the sandbox's static gate, and run
write()/read() against a real chromadb collection (with the project's hashing embedding).
"""
from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import uuid
from pathlib import Path

import chromadb
import pytest
from chromadb.config import Settings

from mstar.config import SandboxConfig
from mstar.offline import source_edits as se
from mstar.offline.instruction_mutations import ALWAYS_ON_TEXTS
from mstar.offline.mutations import CATALOGUE, SIGNALS, TUNING
from mstar.offline.reflector_model import (Case, OfflineReflectorModel, candidate_pool, choice_rng, case_signals, choose_edit, edit_odds,
                                           parse_lineage, parse_reflection_prompt)
from mstar.offline.repairs import repair
from mstar.offline.task_model import is_directive, read_directives
from mstar.offline.text import split_sentences
from mstar.patch import apply_patch
from mstar.iteration.reflect import (ReflectionInput, ReplyError, build_compile_fix_messages,
                           build_reflection_messages, parse_reply)
from sandbox.worker.embedding import HashingEmbeddingFunction
from sandbox.worker.static_gate import check_source

SEEDS_DIR = Path(__file__).resolve().parents[1] / "seeds"
SEEDS = {name: (SEEDS_DIR / f"{name}.py").read_text() for name in
         ("vector_search", "llm_summarizer", "experience_learner")}
BY_NAME = {m.name: m for m in CATALOGUE}
SANDBOX = SandboxConfig()

EPISODES = [
    "[3:10 pm on 14 March, 2024] Session 2 — Maya and Tom\nMaya: I started pottery classes last week.\n"
    "Tom: Nice! I adopted a dog named Rex.",
    "[9:00 am on 2 April, 2024] Session 3 — Maya and Tom\nMaya: My pottery bowl won a prize at the fair.\n"
    "Tom: Rex learned to sit.",
]

# ---------------------------------------------------------------- running programs for real

_CLIENT = chromadb.EphemeralClient(Settings(anonymized_telemetry=False))
_EMBED = HashingEmbeddingFunction()


class _Chroma:
    # All ephemeral clients in a process share one store: give each program its own names.
    def __init__(self) -> None:
        self.prefix = "t" + uuid.uuid4().hex[:10]

    def get_or_create_collection(self, name, **_):
        return _CLIENT.get_or_create_collection(f"{self.prefix}_{name}", embedding_function=_EMBED)


class _Logger:
    def debug(self, message) -> None:
        pass


class _Toolkit:
    def __init__(self) -> None:
        self.chroma, self.logger, self.db = _Chroma(), _Logger(), None

    def llm_completion(self, messages, **_):
        return messages[-1]["content"][-2000:]   # an "LLM" that echoes the tail of its prompt


def run_program(source: str, question: str = "When did Maya win a prize for her pottery bowl?") -> str:
    assert not check_source(source), check_source(source)
    ns: dict = {}
    exec(compile(source, "program.py", "exec"), ns)
    kb = ns["KnowledgeBase"](_Toolkit())
    item_fields = ns["KnowledgeItem"].__dataclass_fields__
    for episode in EPISODES:
        values = {f: (episode.split("\n")[1] if "date" not in f else "14 March, 2024") for f in item_fields}
        kb.write(ns["KnowledgeItem"](**values), episode)
    out = kb.read(ns["Query"](**{f: question for f in ns["Query"].__dataclass_fields__}))
    assert isinstance(out, str) and len(out) <= 3000
    return out


def reflection_prompt(source: str, iteration: int = 1, cases=(), lineage=()) -> list[dict]:
    inp = ReflectionInput(source=source, iteration=iteration, score=0.1, failed_cases=list(cases),
                          success_cases=[], write_examples=[], lineage=list(lineage), references=[],
                          debug_logs=[])
    return build_reflection_messages(inp, SANDBOX)


def title_of(reply: str) -> str:
    return re.search(r"^Title: (.*)$", reply, re.M).group(1)


WHEN_CASE = {"question": "When did Maya start pottery classes?", "expected": "7 March, 2024",
             "answer": "pottery classes", "score": 0.0,
             "retrieved": "Maya: I started pottery classes last week.", "conversation": []}

# ---------------------------------------------------------------- the catalogue

# mutation -> the seed it targets, and the mutations that must come first (they create the knob)
TARGETS = {
    "date_stamp": ("vector_search", ()),
    "split_turns": ("vector_search", ()),
    "store_turns_in_list": ("llm_summarizer", ()),
    "keyword_rerank": ("vector_search", ()),
    "top_k_up": ("vector_search", ()),
    "top_k_down": ("vector_search", ()),
    "chunk_size_up": ("vector_search", ()),
    "chunk_size_down": ("vector_search", ()),
    "overfetch_up": ("vector_search", ("keyword_rerank",)),
    "overfetch_down": ("vector_search", ("keyword_rerank",)),
    "rank_weight_up": ("vector_search", ("keyword_rerank",)),
    "rank_weight_down": ("vector_search", ("keyword_rerank",)),
    "rank_stored_lists": ("experience_learner", ()),
    "store_raw_turns": ("experience_learner", ()),
    "add_date_field": ("experience_learner", ()),
    "list_cap_up": ("experience_learner", ()),
    "list_cap_down": ("experience_learner", ()),
    "context_cap_up": ("llm_summarizer", ()),
    "context_cap_down": ("llm_summarizer", ()),
    "answer_cap_down": ("vector_search", ()),
    "answer_cap_up": ("llm_summarizer", ()),
    "relative_dates_on": ("experience_learner", ()),
    "list_items": ("vector_search", ()),
    "relative_dates_off": ("vector_search", ("relative_dates_on",)),
    "always_on_rewrite": ("llm_summarizer", ()),
    "query_instruction_rewrite": ("vector_search", ()),
    "item_instruction_rewrite": ("experience_learner", ()),
    # reach edits (mstar/offline/reach_mutations.py; more in tests/test_offline_reflector_reach.py)
    "speaker_index": ("experience_learner", ()),
    "bridge_person": ("vector_search", ()),
    "newest_first": ("llm_summarizer", ("store_turns_in_list", "rank_stored_lists")),
    "spread_sessions": ("vector_search", ("keyword_rerank",)),
    "entity_queries": ("vector_search", ()),
    "evidence_budget_up": ("experience_learner", ("speaker_index",)),
    "evidence_budget_down": ("experience_learner", ("speaker_index",)),
    "evidence_only": ("experience_learner", ("speaker_index",)),
    "drop_captions": ("vector_search", ()),
}


def test_every_mutation_has_a_target_and_a_tuning_entry():
    assert set(TARGETS) == set(BY_NAME) == set(TUNING)
    for name, (_, boosts) in TUNING.items():
        assert set(boosts) <= set(SIGNALS), name


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_mutation_applies_to_its_seed_and_yields_a_working_program(name):
    seed, before = TARGETS[name]
    source = SEEDS[seed]
    for prep in before:
        source = BY_NAME[prep].apply(source, random.Random(0)).source
    mutation = BY_NAME[name]
    assert mutation.applies(source)
    edit = mutation.apply(source, random.Random(7))
    assert edit is not None and edit.source != source
    assert se.parses(edit.source)
    assert edit.title.split(":")[0] == mutation.key      # lineage lines are recognised by this key
    run_program(edit.source)


def test_structural_mutations_do_not_apply_where_they_make_no_sense():
    assert not BY_NAME["keyword_rerank"].applies(SEEDS["experience_learner"])
    assert not BY_NAME["store_raw_turns"].applies(SEEDS["vector_search"])
    assert not BY_NAME["add_date_field"].applies(SEEDS["llm_summarizer"])
    assert not BY_NAME["date_stamp"].applies(SEEDS["llm_summarizer"])
    once = BY_NAME["date_stamp"].apply(SEEDS["vector_search"], random.Random(0)).source
    assert not BY_NAME["date_stamp"].applies(once)       # recognises its own edit


LONG_EPISODE = ("[5:00 pm on 8 May, 2024] Session 4 — Maya and Tom\n"
                + "".join(f"Maya: Filler line number {i} about nothing in particular at all.\n" for i in range(12))
                + "Tom: The glazing kiln finally arrived at the studio.")


def test_date_stamp_puts_the_session_date_on_every_retrieved_chunk():
    question = "glazing kiln arrived studio"

    def chunk_with_answer(source):
        ns: dict = {}
        exec(compile(source, "program.py", "exec"), ns)
        kb = ns["KnowledgeBase"](_Toolkit())
        kb.write(ns["KnowledgeItem"](), LONG_EPISODE)
        out = kb.read(ns["Query"](query_text=question))
        return next(c for c in out.split("\n\n") if "glazing kiln" in c)

    assert not chunk_with_answer(SEEDS["vector_search"]).startswith("[")   # 2nd chunk: no date
    stamped = BY_NAME["date_stamp"].apply(SEEDS["vector_search"], random.Random(0)).source
    assert chunk_with_answer(stamped).startswith("[5:00 pm on 8 May, 2024] ")
    turns = BY_NAME["split_turns"].apply(SEEDS["vector_search"], random.Random(0)).source
    # Stored as turns, each line carries its own date and the bare header line is dropped.
    assert chunk_with_answer(turns) == "[5:00 pm on 8 May, 2024] Tom: The glazing kiln finally arrived at the studio."
    assert "Session 3" not in run_program(turns, "Rex learned to sit")


def test_keyword_rerank_puts_exact_word_matches_first():
    source = BY_NAME["keyword_rerank"].apply(SEEDS["vector_search"], random.Random(0)).source
    source = BY_NAME["split_turns"].apply(source, random.Random(0)).source
    out = run_program(source, "pottery bowl prize fair")
    assert out.split("\n\n")[0].endswith("My pottery bowl won a prize at the fair.")


def test_knobs_respect_bounds_and_never_touch_the_final_cut():
    source = SEEDS["experience_learner"]
    for _ in range(20):
        if not BY_NAME["list_cap_up"].applies(source):
            break
        source = BY_NAME["list_cap_up"].apply(source, random.Random(1)).source
    caps = [int(n) for n in re.findall(r"\)\[:(\d+)\]", source)]
    assert max(caps) == 3000 and not BY_NAME["list_cap_up"].applies(source)
    assert 'facts_text}"[:3000]' in source                # the final return keeps its 3000 cut
    # One knob comment per line, however often the knob moved.
    assert source.count("# character cap:") == 2


def test_instruction_rewrites_speak_the_task_models_directives():
    for text in ALWAYS_ON_TEXTS:
        for sentence in split_sentences(text):
            assert is_directive(sentence), sentence     # never quoted as an answer offline
    short = BY_NAME["answer_cap_down"].apply(SEEDS["vector_search"], random.Random(0)).source
    response = se.constant_value(short, "INSTRUCTION_RESPONSE")
    assert read_directives(response).max_words < 8
    relative = BY_NAME["relative_dates_on"].apply(short, random.Random(0)).source
    d = read_directives(se.constant_value(relative, "INSTRUCTION_RESPONSE"))
    assert d.relative_dates and d.max_words == read_directives(response).max_words  # cap kept


# ---------------------------------------------------------------- the model's replies

def test_reply_is_a_commit_message_and_a_patch_that_reproduces_the_mutation():
    source = SEEDS["vector_search"]
    reply = OfflineReflectorModel(seed=0).complete(reflection_prompt(source, cases=[WHEN_CASE]))
    assert re.match(r"\*\*\* Commit Message\nTitle: .+\n- .+\n- .+\n\*\*\* Begin Patch\n", reply)
    assert reply.rstrip().endswith("*** End Patch")
    parsed = parse_reply(reply)
    assert parsed.patch is not None and parsed.title == title_of(reply)
    child = apply_patch(source, reply)
    # The patch carries exactly the edit the model chose.
    view = parse_reflection_prompt(reflection_prompt(source, cases=[WHEN_CASE])[0]["content"])
    signals = set().union(*(case_signals(c) for c in view.cases))
    _, edit = choose_edit(view.source, choice_rng(0, view.source, view.iteration), signals, view.lineage)
    assert child == edit.source and edit.title == parsed.title


def test_same_prompt_and_seed_give_the_same_reply_and_seeds_differ():
    prompt = reflection_prompt(SEEDS["llm_summarizer"], iteration=4)
    assert OfflineReflectorModel(3).complete(prompt) == OfflineReflectorModel(3).complete(prompt)
    titles = {title_of(OfflineReflectorModel(s).complete(prompt)) for s in range(12)}
    assert len(titles) > 1
    other_iteration = {title_of(OfflineReflectorModel(3).complete(reflection_prompt(SEEDS["llm_summarizer"], i)))
                       for i in range(12)}
    assert len(other_iteration) > 1


def test_when_questions_answered_without_dates_favour_date_changes():
    dated = ("Stamp stored chunks", "Store dialogue turns", "Resolve relative dates", "Rewrite ALWAYS_ON",
             "Add a session_date", "Keep raw dialogue turns")
    # Exact odds, not a count over sampled reflections (a new catalogue entry reshuffles draws).
    pool, inert = candidate_pool(SEEDS["vector_search"], [])
    case = Case(WHEN_CASE["question"], WHEN_CASE["expected"], WHEN_CASE["answer"], WHEN_CASE["retrieved"])

    def dated_odds(signals) -> float:
        return sum(p for m, p in zip(pool, edit_odds(pool, signals, inert)) if m.key.startswith(dated))
    assert dated_odds(case_signals(case)) > 1.1 * dated_odds(set())
    assert "when_no_date" in case_signals(Case(WHEN_CASE["question"], WHEN_CASE["expected"],
                                               WHEN_CASE["answer"], WHEN_CASE["retrieved"]))


def test_case_signals():
    assert case_signals(Case("What did Tom adopt?", "a dog", "unknown", "No information stored.")) >= \
        {"no_answer", "not_retrieved"}
    long = "x " * 1500
    assert "long_retrieved" in case_signals(Case("What pet?", "dog", "dog", long + " dog"))
    assert "verbose" in case_signals(Case("What pet?", "dog", "he adopted a big brown dog last", "dog"))
    assert not case_signals(Case("When was it?", "2 April, 2024", "2 April, 2024", "[2 April, 2024] won"))


def test_regression_in_lineage_is_not_repeated_on_this_parent():
    prompt = reflection_prompt(SEEDS["vector_search"], 2, [WHEN_CASE])
    first = title_of(OfflineReflectorModel(0).complete(prompt))
    line = f"- [child] iter_002: {first} (score 0.100, \u0394 -0.020) \u2190 REGRESSION"
    lineage = parse_lineage(line)
    assert lineage[0].regression and lineage[0].title == first and lineage[0].kind == "child"
    for seed in range(10):
        again = OfflineReflectorModel(seed).complete(reflection_prompt(SEEDS["vector_search"], 2, [WHEN_CASE], [line]))
        assert title_of(again).split(":")[0] != first.split(":")[0]


def test_a_change_already_tried_on_this_parent_is_not_tried_again():
    # A structural edit already made from this parent would only produce a duplicate child.
    prompt = reflection_prompt(SEEDS["llm_summarizer"], 3)
    first = title_of(OfflineReflectorModel(1).complete(prompt))
    line = f"- [child] iter_003: {first} (score 0.400, \u0394 +0.050)"
    for seed in range(8):
        again = OfflineReflectorModel(seed).complete(reflection_prompt(SEEDS["llm_summarizer"], 3, [], [line]))
        assert title_of(again).split(":")[0] != first.split(":")[0]


def test_replies_do_not_depend_on_the_process_hash_seed():
    prompt = reflection_prompt(SEEDS["vector_search"], 5, [WHEN_CASE,
                               {**WHEN_CASE, "question": "What pet?", "answer": "unknown", "expected": "a dog"}])
    script = ("import json, sys; from mstar.offline.reflector_model import OfflineReflectorModel; "
              "print(OfflineReflectorModel(4).complete(json.load(sys.stdin)))")
    replies = set()
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run([sys.executable, "-c", script], input=json.dumps(prompt), env=env,
                             capture_output=True, text=True, timeout=120, check=True)
        replies.add(out.stdout)
    assert len(replies) == 1 and "*** Begin Patch" in replies.pop()


def test_a_banned_change_is_still_made_when_it_is_the_only_one():
    only = [BY_NAME["date_stamp"]]
    lineage = parse_lineage("- [child] iter_001: Stamp stored chunks with their session date: x "
                            "(score 0.1, \u0394 -0.01) \u2190 REGRESSION")
    chosen = choose_edit(SEEDS["vector_search"], random.Random(0), set(), lineage, only)
    assert chosen is not None and chosen[0].name == "date_stamp"


def test_prompt_parsing_reads_program_iteration_cases_and_lineage():
    prompt = reflection_prompt(SEEDS["experience_learner"], 7, [WHEN_CASE],
                               ["- [current] iter_003: Raise top-k: 5 -> 8 (score 0.2, \u0394 +0.010)"])
    view = parse_reflection_prompt(prompt[0]["content"])
    assert view.source.rstrip() == SEEDS["experience_learner"].rstrip() and view.iteration == 7
    assert view.score == pytest.approx(0.1)
    assert view.cases[0].question == WHEN_CASE["question"] and view.cases[0].expected == "7 March, 2024"
    assert view.lineage[0].title == "Raise top-k: 5 -> 8" and not view.lineage[0].regression
    with pytest.raises(ValueError, match="current_program"):
        OfflineReflectorModel().complete([{"role": "user", "content": "hello"}])


# ---------------------------------------------------------------- compile-fix

def compile_fix(source: str, error: str) -> str:
    return OfflineReflectorModel(0).complete(build_compile_fix_messages(source, error, SANDBOX))


def test_compile_fix_repairs_a_line_that_does_not_parse():
    lines = SEEDS["vector_search"].split("\n")
    at = next(i for i, l in enumerate(lines) if "self.doc_count += 1" in l)
    lines[at] = "  " + lines[at]                          # indentation error
    broken = "\n".join(lines)
    assert not se.parses(broken)
    reply = compile_fix(broken, f"gate failed at stage 'static': unexpected indent (line {at + 1})")
    fixed = apply_patch(broken, reply)
    assert fixed == SEEDS["vector_search"]
    run_program(fixed)


def test_compile_fix_adds_a_missing_helper_and_renames_underscore_names():
    with_rank = BY_NAME["rank_stored_lists"].apply(SEEDS["experience_learner"], random.Random(0)).source
    span = se.method_lines(with_rank, "rank_by_overlap")
    lines = with_rank.split("\n")
    broken = "\n".join(lines[:span[0]] + lines[span[1] + 1:])
    reply = compile_fix(broken, "gate failed at stage 'read': AttributeError: 'KnowledgeBase' object "
                                "has no attribute 'rank_by_overlap' (line 52)")
    run_program(apply_patch(broken, reply))
    underscored = with_rank.replace("query_words", "_query_words")
    reply = compile_fix(underscored, 'gate failed at stage \'static\': "_query_words" is an invalid attribute '
                                     'name because it starts with "_".')
    assert apply_patch(underscored, reply) == with_rank


def test_compile_fix_caps_an_oversize_read_and_reverts_a_knob():
    long = SEEDS["llm_summarizer"].replace("return result[:3000]", "return result")
    fixed = apply_patch(long, compile_fix(long, "read() returned 5200 characters; the limit is 3000"))
    assert "return (result)[:3000]" in fixed
    raised = BY_NAME["top_k_up"].apply(SEEDS["vector_search"], random.Random(0)).source
    line = next(i for i, l in enumerate(raised.split("\n"), 1) if "n_results=min(" in l)
    fixed = apply_patch(raised, compile_fix(raised, f"gate failed at stage 'read': timed out (line {line})"))
    assert fixed == SEEDS["vector_search"]


def test_compile_fix_says_so_when_it_cannot_fix():
    reply = compile_fix(SEEDS["vector_search"], "gate failed at stage 'init': KnowledgeItem field 'x' has "
                                                "type dict, which is not JSON-compatible")
    assert reply.startswith("*** Commit Message\nTitle: Cannot fix") and "*** Begin Patch" not in reply
    with pytest.raises(ReplyError):
        parse_reply(reply)
    assert repair(SEEDS["vector_search"], "something unknown happened") is None


def test_compile_fix_after_a_failed_patch_proposes_a_fresh_change():
    reply = compile_fix(SEEDS["experience_learner"], "patch: hunk 1: could not find the context lines")
    assert apply_patch(SEEDS["experience_learner"], reply) != SEEDS["experience_learner"]


# ---------------------------------------------------------------- generations

@pytest.mark.parametrize("seed_name", sorted(SEEDS))
def test_chained_mutations_keep_producing_valid_different_programs(seed_name):
    source, seen, titles = SEEDS[seed_name], {SEEDS[seed_name]}, []
    lineage: list[str] = []
    for generation in range(1, 13):
        reply = OfflineReflectorModel(seed=5).complete(reflection_prompt(source, generation, [WHEN_CASE], lineage))
        child = apply_patch(source, reply)
        assert child not in seen, title_of(reply)
        run_program(child)
        lineage.append(f"- [ancestor] iter_{generation:03d}: {title_of(reply)} (score 0.1, \u0394 +0.001)")
        titles.append(title_of(reply))
        seen.add(child)
        source = child
    assert len({t.split(":")[0] for t in titles}) >= 4       # not one knob moved back and forth


def test_helper_methods_run_under_restricted_python_with_only_safe_builtins():
    # The sandbox compiles programs with RestrictedPython; RP 9's safe_builtins hold len and
    # range but not set, sum, max or enumerate, so the helpers we add must not need them.
    import math
    import operator

    from RestrictedPython import compile_restricted, safe_builtins
    from RestrictedPython.Guards import guarded_iter_unpack_sequence, guarded_unpack_sequence, safer_getattr

    code = "import re\nimport math\nclass KB:\n" + "".join(c for _, c in se.HELPERS.values())
    builtins = dict(safe_builtins, __import__=lambda name, *a, **k: {"re": re, "math": math}[name])
    env = {"__builtins__": builtins, "_getattr_": safer_getattr, "_getitem_": operator.getitem,
           "_getiter_": iter, "_write_": lambda x: x, "__metaclass__": type, "__name__": "program",
           "_inplacevar_": lambda op, x, y: {"+=": operator.iadd}[op](x, y),
           "_iter_unpack_sequence_": guarded_iter_unpack_sequence, "_unpack_sequence_": guarded_unpack_sequence}
    exec(compile_restricted(code, "<program>", "exec"), env)
    kb = env["KB"]()
    units = kb.date_stamp(EPISODES[0], kb.split_turns(EPISODES[0]))
    assert units[0] == "[3:10 pm on 14 March, 2024] Maya: I started pottery classes last week."
    assert kb.rank_by_overlap("Tom adopted a dog", units)[0].endswith("I adopted a dog named Rex.")


def test_ablation_modes_restrict_the_offline_catalogue():
    """With a <mode> section, the offline reflector only touches the part that is evolving."""
    from mstar.config import SandboxConfig
    from mstar.program.frozen import check_frozen
    from mstar.patch import apply_patch
    from mstar.iteration.reflect import ReflectionInput, build_reflection_messages

    src = open("seeds/vector_search.py").read()
    for mode in ("instructions", "code"):
        for it in range(6):
            inp = ReflectionInput(src, it, 0.2, [], [], [], [], [], [], mode=mode)
            reply = OfflineReflectorModel(seed=3).complete(build_reflection_messages(inp, SandboxConfig()))
            child = apply_patch(src, reply)
            assert child != src
            check_frozen(src, child, mode)   # raises if the frozen part was touched

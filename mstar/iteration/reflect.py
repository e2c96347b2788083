"""The reflector's prompts and the parsing of its replies (paper Appendix G.2, G.3).

Two wordings (mstar.prompts): "mstar", written here -- its sections follow the paper: interface
spec, rules, patch format, the current program and its score, then, when there is data for them,
lineage, write examples, success cases, reference programs, memory debug logs, and the
underperforming cases with their whole retrieval-and-answer conversation -- and "paper", the
paper's templates in our words (mstar/prompts/paper_reflector.py). Both show a rubric case's
per-criterion verdicts, where a failed case's answer was lost when the task knows its evidence
(<where_lost>: mstar.evaluation.attribution), and a case in one section only (failed or success).
"""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Sequence

from mstar import prompts
from mstar.config import SandboxConfig
from mstar.prompts.sections import (MAX_CASE_FIELD, MAX_DEBUG_LINES, Section, chroma_embeddings_note,
                                    concurrent_reads_note, conversation_lines, cut as _cut, rubric_verdicts,
                                    split_cases, where_lost, where_lost_note)

__all__ = ["MAX_CASE_FIELD", "MAX_DEBUG_LINES", "ReflectionInput", "ReflectorReply", "ReplyError", "Section",
           "build_compile_fix_messages", "build_reflection_messages", "fit_to_budget", "interface_spec",
           "parse_reply", "reflection_sections"]


def _chroma_bullet(embeddings: str | None) -> str:
    text = ("- `toolkit.chroma`: a chromadb ephemeral client (get_or_create_collection, then add / upsert / "
            "query / get / count / delete; collection names need at least 3 characters); its "
            f"{chroma_embeddings_note(embeddings)}; a program cannot pass another embedding function")
    return textwrap.fill(text, width=100, initial_indent="     ", subsequent_indent="       ")


def interface_spec(sandbox: SandboxConfig, embeddings: str | None = None) -> str:
    imports = ", ".join(sandbox.allowed_imports)
    return f"""A memory program is one Python module, program.py, that defines:

1. `KnowledgeItem` -- a @dataclass: what gets stored. The task agent fills it from raw text by
   writing JSON, so every field must have a JSON-compatible type: str, int, float, bool, Any,
   list[...] and dict[str, ...] of those, or Optional[...] of any of them (no datetime, tuple, set,
   bytes or custom classes; containers nested at most two deep). Describe each
   field with `field(metadata={{"description": "..."}})`; give defaults where a value may be missing.
2. `Query` -- a @dataclass: what the agent asks the memory with. Same rules as KnowledgeItem.
3. `KnowledgeBase` -- the memory itself:
   - `__init__(self, toolkit)` receives the toolkit:
     - `toolkit.db`: an in-memory SQLite database (execute / executemany / executescript / commit,
       cursors with fetchone / fetchall; `row_factory` may be set to sqlite3.Row)
{_chroma_bullet(embeddings)}
     - `toolkit.llm_completion(messages, **kwargs) -> str`: an LLM for summarising, extracting or
       reasoning -- at most {sandbox.llm_calls_per_op} call per write() or read(), none in __init__
     - `toolkit.logger.debug(message)`: debug output, shown back to you as memory debug logs
   - `write(self, item: KnowledgeItem, raw_text: str) -> None`
   - `read(self, query: Query) -> str`
{textwrap.fill(concurrent_reads_note(sandbox), width=100, initial_indent="     ", subsequent_indent="     ")}
4. Four module-level string constants:
   - INSTRUCTION_KNOWLEDGE_ITEM: tells the agent what to extract from a text and how
   - INSTRUCTION_QUERY: tells the agent how to turn a question into a Query
   - INSTRUCTION_RESPONSE: tells the agent how to answer (format, length, style)
   - ALWAYS_ON_KNOWLEDGE: text placed before the retrieved memory in every answer prompt; may be ""

Allowed imports: {imports}. Nothing else can be imported; the program runs in a sandbox with no
files, no network and no environment.
Limits: read() returns at most {sandbox.read_max_chars} characters; each write() and read() must finish
within {sandbox.call_timeout_s:g} seconds; the LLM budget above is enforced and resets before each call."""


RULES = """1. Start with your diagnosis, then give the change as a patch.
2. Keep exactly the three classes (KnowledgeItem, Query, KnowledgeBase) and the four string
   constants (INSTRUCTION_KNOWLEDGE_ITEM, INSTRUCTION_QUERY, INSTRUCTION_RESPONSE, ALWAYS_ON_KNOWLEDGE).
3. KnowledgeBase.__init__ takes `toolkit`; write takes a KnowledgeItem and the raw text; read takes
   a Query and returns a str.
4. read() must never return more than the character limit.
5. Prefer small changes that should help on unseen questions too: no lists of words or rules that
   only fit the cases shown here.
6. Two levers, use both when they help: the instructions (the INSTRUCTION_* constants and
   ALWAYS_ON_KNOWLEDGE steer how the agent extracts, asks and answers; ALWAYS_ON_KNOWLEDGE reaches
   every answer) and the memory design (the schemas and how write() stores and read() retrieves).
7. Comment the code with the reason for each design choice, so later rounds keep what works."""


PATCH_FORMAT = """Write a commit message first:

*** Commit Message
Title: <one line: what changed and why>
- <the root cause you found>
- <what you changed>

Then the change as a V4A patch, with the marker lines on their own lines and no code fence:

*** Begin Patch
*** Update File: program.py
@@ <optional: a class or def line to anchor the hunk>
 <unchanged context line>
-<removed line>
+<added line>
 <unchanged context line>
*** End Patch

Context lines start with a space, removed lines with '-', added lines with '+'. Give about three
lines of unchanged context above and below each change, copied exactly from the program; one
*** Update File block may hold several hunks, in file order."""


MODE_NOTES = {
    "instructions": "This run evolves only the instructions: change only the values of the four constants "
                    "INSTRUCTION_KNOWLEDGE_ITEM, INSTRUCTION_QUERY, INSTRUCTION_RESPONSE and ALWAYS_ON_KNOWLEDGE. "
                    "A patch that touches any other line is rejected.",
    "code": "This run evolves only the code: the four instruction constants are fixed. A patch that changes "
            "any of them is rejected.",
}


@dataclass
class ReflectionInput:
    source: str
    iteration: int
    score: float
    failed_cases: list[dict]            # CaseResult dicts
    success_cases: list[dict]
    write_examples: list[dict]          # WriteRecord dicts
    lineage: list[str]
    references: list[tuple[str, float, str]]   # (program_id, score, source)
    debug_logs: list[str]
    already_tried: list[str] = field(default_factory=list)   # failure memory for this parent
    mode: str = "all"                   # ablation: "all", "instructions" or "code"
    prompts: str | None = None          # wording: "mstar" or "paper"; None = mstar.prompts.current()
    embeddings: str | None = None       # what chroma embeds with; None = the process-wide choice


def _fmt_conversation(conv: Sequence[dict]) -> str:
    return conversation_lines(conv)


def reflection_sections(inp: ReflectionInput, sandbox: SandboxConfig) -> list[Section]:
    """Every section of the reflection prompt, in prompt order, each with its priority."""
    if prompts.resolve(inp.prompts) == "paper":
        from mstar.prompts.paper_reflector import paper_reflection_sections
        return paper_reflection_sections(inp, sandbox)
    S = Section
    out = [
        S("intro", "You are an expert Python engineer who designs memory systems for LLM agents. Below is a "
          "memory program, its score on a task, and cases where it did badly. Find out why those cases "
          "failed and improve the program, through its instructions, its memory design, or both.", 0, True),
        S("interface_spec", f"<interface_spec>\n{interface_spec(sandbox, inp.embeddings)}\n</interface_spec>", 0, True),
        S("rules", f"<rules>\n{RULES}\n</rules>", 0, True),
        S("patch_format", f"<patch_format>\n{PATCH_FORMAT}\n</patch_format>", 0, True),
        S("current_program", f'<current_program iteration="{inp.iteration}">\n```python\n{inp.source.rstrip()}\n```\n'
          "</current_program>", 0, True),
        S("evaluation_score", f"<evaluation_score>{inp.score:.4f}</evaluation_score>", 0, True),
    ]
    if inp.mode in MODE_NOTES:
        out.insert(3, S("mode", f"<mode>\n{MODE_NOTES[inp.mode]}\n</mode>", 0, True))
    if inp.lineage:
        out.append(S("lineage", "<lineage>\nHow this program came to be and what was tried on it (\u0394 = score "
                     "change against its parent; do not repeat changes marked as regressions):\n"
                     + "\n".join(inp.lineage) + "\n</lineage>", 2))
    if inp.already_tried:
        out.append(S("already_tried", "<already_tried>\nAlready tried on this program and failed -- do not "
                     "propose these again:\n" + "\n".join(inp.already_tried) + "\n</already_tried>", 2))
    if inp.write_examples:
        ex = [f"<write_example episode=\"{w['episode_id']}\">\n<raw_text>{_cut(w['raw_text'], 800)}</raw_text>\n"
              f"<item>{w['item']}</item>\n</write_example>" for w in inp.write_examples]
        out.append(S("write_examples", "<write_examples>\nHow raw texts became knowledge items:\n"
                     + "\n".join(ex) + "\n</write_examples>", 5))
    successes = split_cases(inp.failed_cases, inp.success_cases)
    if successes:
        ex = [f"<case><question>{c['question']}</question><expected>{c['expected']}</expected>"
              f"<model_answer>{c['answer']}</model_answer><score>{c['score']:.2f}</score></case>"
              for c in successes]
        out.append(S("success_cases", "<success_cases>\nThese worked; keep what makes them work:\n"
                     + "\n".join(ex) + "\n</success_cases>", 4))
    if inp.references:
        ex = [f'<reference_program id="{pid}" score="{sc:.4f}">\n```python\n{src.rstrip()}\n```\n</reference_program>'
              for pid, sc, src in inp.references]
        out.append(S("reference_programs", "<reference_programs>\nOther programs from the population, higher "
                     "and lower scoring. Look for the design choices that go with better scores:\n"
                     + "\n".join(ex) + "\n</reference_programs>", 6))
    if inp.debug_logs:
        logs = inp.debug_logs[:MAX_DEBUG_LINES]
        out.append(S("memory_debug_logs", "<memory_debug_logs>\n" + "\n".join(_cut(l, 300) for l in logs)
                     + "\n</memory_debug_logs>", 3))
    cases = []
    for i, c in enumerate(inp.failed_cases, 1):
        cases.append(
            f'<case id="{i}">\n<question>{c["question"]}</question>\n<expected>{c["expected"]}</expected>\n'
            f'<model_answer>{c["answer"]}</model_answer>\n<score>{c["score"]:.2f}</score>\n'
            + (f'<where_lost>\n{lost}\n</where_lost>\n' if (lost := where_lost(c)) else "")
            + f'<retrieved>{_cut(c["retrieved"], MAX_CASE_FIELD)}</retrieved>\n'
            + (f'<error>{c["error"]}</error>\n' if c.get("error") else "")
            + (f'<rubric_verdicts>\nThe judge\'s verdict on each criterion (the score is the points of the met '
               f'criteria over the positive points):\n{verdicts}\n</rubric_verdicts>\n'
               if (verdicts := rubric_verdicts(c)) else "")
            + f'<conversation>\n{_fmt_conversation(c.get("conversation", []))}\n</conversation>\n</case>')
    out.append(S("underperforming_cases", "These cases scored low after the memory was written. Each shows the "
                 "whole retrieval and answer conversation." + where_lost_note(inp.failed_cases)
                 + "\n<underperforming_cases>\n" + "\n".join(cases)
                 + "\n</underperforming_cases>", 1))
    out.append(S("task", "<task>\n1. Diagnose why these cases scored low: look at what was retrieved and at how "
                 "the agent answered.\n2. Decide what to change: the instructions, the memory design, or both.\n"
                 "3. Write the commit message and the patch.\n</task>", 0, True))
    return out


def estimate_prompt_tokens(text: str) -> int:
    return len(text) // 4 + 1


def fit_to_budget(sections: list[Section], budget_tokens: int | None) -> tuple[list[Section], list[str]]:
    """Cut optional sections, least important first, until the prompt fits the budget.

    A section that must go is first shortened, then dropped; either way a visible marker stays in
    its place so the reader (and the model) knows something was left out. Returns the sections and
    the names of those cut.
    """
    if budget_tokens is None:
        return sections, []
    out = list(sections)
    cut: list[str] = []

    def total() -> int:
        return sum(estimate_prompt_tokens(s.text) for s in out) + len(out)

    for sec in sorted((s for s in sections if not s.required), key=lambda s: -s.priority):
        over = total() - budget_tokens
        if over <= 0:
            break
        i = out.index(sec)
        keep_chars = len(sec.text) - over * 4 - 200
        if keep_chars > 400:
            text = (sec.text[:keep_chars] + f"\n[... section '{sec.name}' cut to fit the prompt budget: "
                    f"{len(sec.text) - keep_chars} characters left out]")
        else:
            text = f"[section '{sec.name}' left out to fit the prompt budget]"
        out[i] = Section(sec.name, text, sec.priority, sec.required)
        cut.append(sec.name)
    return out, cut


def build_reflection_messages(inp: ReflectionInput, sandbox: SandboxConfig,
                              budget_tokens: int | None = None) -> list[dict]:
    sections, _ = fit_to_budget(reflection_sections(inp, sandbox), budget_tokens)
    return [{"role": "user", "content": "\n\n".join(s.text for s in sections)}]


def build_compile_fix_messages(source: str, error: str, sandbox: SandboxConfig, *, style: str | None = None,
                               embeddings: str | None = None) -> list[dict]:
    if prompts.resolve(style) == "paper":
        from mstar.prompts.paper_reflector import paper_compile_fix_messages
        return paper_compile_fix_messages(source, error, sandbox, embeddings)
    text = (
        "<task>compile_fix</task>\nA memory program failed to apply, compile or pass its checks. Fix the "
        "error and give the fix as a patch against the broken program below.\n\n"
        f"<interface_spec>\n{interface_spec(sandbox, embeddings)}\n</interface_spec>\n\n"
        f"<patch_format>\n{PATCH_FORMAT}\n</patch_format>\n\n"
        f"<broken_program>\n```python\n{source.rstrip()}\n```\n</broken_program>\n\n"
        f"<error>\n{error}\n</error>"
    )
    return [{"role": "user", "content": text}]


# ---------------------------------------------------------------- replies

@dataclass
class ReflectorReply:
    title: str
    body: str
    patch: str | None          # V4A text, when the reply carries one
    full_program: str | None   # a whole program in a code block, accepted as a replacement


class ReplyError(ValueError):
    """The reply carries neither a usable patch nor a whole program."""


_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.S)


def parse_reply(text: str) -> ReflectorReply:
    if not text or not text.strip():
        raise ReplyError("the reflector's reply was empty")
    title, body = _commit_message(text)
    has_begin = "*** Begin Patch" in text
    has_hunk = re.search(r"^\*\*\* (Update|Add) File:", text, re.M) is not None
    if has_begin or has_hunk:
        if has_begin and "*** End Patch" not in text and not has_hunk:
            raise ReplyError("the reply was cut off: '*** Begin Patch' without any file section or '*** End Patch'")
        return ReflectorReply(title, body, text, None)
    for block in _FENCE.findall(text):
        if "class KnowledgeBase" in block and "INSTRUCTION_RESPONSE" in block:
            return ReflectorReply(title, body, None, block)
    raise ReplyError("the reply has no '*** Begin Patch' ... '*** End Patch' patch and no complete program")


def _commit_message(text: str) -> tuple[str, str]:
    m = re.search(r"\*\*\* Commit Message\s*\n(.*?)(?=\n\s*\*\*\* (?:Begin Patch|Update File)|```|\Z)", text, re.S)
    block = m.group(1) if m else ""
    title = ""
    body_lines = []
    for line in block.splitlines():
        s = line.strip()
        if not title and s.lower().startswith("title:"):
            title = s[6:].strip()
        elif s:
            body_lines.append(s)
    if not title:
        title = next((l.strip() for l in block.splitlines() if l.strip()), "") or "untitled change"
    return title[:200], "\n".join(body_lines)

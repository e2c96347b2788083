"""The reflector's prompts in the paper's form (Appendix G.2 reflection, G.3 compile-fix).

Same sections, order, tags, headers and placeholders as the paper's templates; the sentences are
this project's paraphrase of them. Where the paper only names a section (lineage log, write
examples, success cases, reference programs, memory debug logs) its text is ours. Three
additions, needed by mstar's engine and harmless to the template: a run's ablation mode (<mode>,
when not "all"), the rubric verdicts of a judged case (<rubric_verdicts>) and where a case's
answer was lost when the task knows its evidence (<where_lost>, mstar.evaluation.attribution).
The failure memory ("already tried") joins the lineage log as entries of their own.

The offline reflector reads these prompts through mstar/offline/paper_forms.py.
"""
from __future__ import annotations

from mstar.prompts.sections import (MAX_DEBUG_LINES, Section, chroma_embeddings_note, concurrent_reads_note,
                                    conversation_lines, cut, rubric_verdicts, split_cases, where_lost,
                                    where_lost_note)

INTRO = (
    "You are a skilled Python programmer whose specialty is the design of knowledge base systems.\n"
    "Your job: you are given a Knowledge Base Program, the score it reached, and the cases where it "
    "did poorly; find the root cause behind each low score and make the program better. There are two "
    "kinds of improvement: (A) **Prompt Optimization** -- adjust the four instruction constants (above "
    "all ALWAYS_ON_KNOWLEDGE) so that the task agent behaves better, and (B) **Memory Design** -- "
    "improve the KnowledgeItem/Query schemas and how the KnowledgeBase stores and retrieves. Both "
    "count, and they should be weighed together.")

RULES = """1. Give your diagnosis first, and your changes as a patch after it.
2. The code has to define exactly three classes (KnowledgeItem, Query, KnowledgeBase) and four module-level string constants (INSTRUCTION_KNOWLEDGE_ITEM, INSTRUCTION_QUERY, INSTRUCTION_RESPONSE, ALWAYS_ON_KNOWLEDGE).
3. KnowledgeBase.__init__ has to take `toolkit`; write receives a KnowledgeItem; read receives a Query and gives back a str.
4. `read()` may return no more than {read_max_chars} characters.
5. Stay simple. Change little, and change what will still help on cases you have not seen -- no hard-coded word lists, no pattern rules made for the cases shown.
6. **Prompt Optimization**: change INSTRUCTION_* to steer the format of the task LLM's output. Put into ALWAYS_ON_KNOWLEDGE the domain strategies, heuristics and rules of behaviour the task agent must always apply -- this constant goes into EVERY prompt in which the task agent acts or decides, so it is often the change with the most leverage. Read the <model_generation> transcripts of the underperforming cases for patterns in the agent's behaviour (for example going in circles, exploring wastefully, picking the wrong object) that ALWAYS_ON_KNOWLEDGE can correct.
7. **Memory Design**: make the KnowledgeItem/Query field schemas and the KnowledgeBase read()/write() logic store and retrieve information that is more useful to the task agent.
8. Comment the code clearly on WHY each part works as it does -- later iterations then understand your design decisions and keep them."""

PATCH_FORMAT = """Before the patch, write a commit message that sums up your changes:

*** Commit Message
Title: <one line: what you changed and why>
- <root cause / diagnosis>
- <what you changed>

After it, give your changes as a V4A patch. IMPORTANT: the marker lines `*** Begin Patch` and `*** End Patch` MUST appear exactly like this, each on a line of its own. Do NOT put them inside code fences.

Format:
*** Begin Patch
*** Update File: program.py
@@ <optional context hint>
 context line (1-2 lines before the change)
-removed line
+added line
 context line (1-2 lines after the change)
*** End Patch

Rules:
- A line starting with `-` is removed, one starting with `+` is added, one starting with ` ` (a space) stays as it is.
- Put 1-2 lines of context before and after every change.
- One `*** Update File` block may hold several hunks."""

CASES_INTRO = ("The cases below did poorly on the validation set once the memory had been written. "
               "Every case holds the whole conversation of retrieval and answer.")

TASK = """<task>
1. Work out why these cases scored low -- look at the retrieval conversation AND at the <model_generation> transcript for problems in how the agent behaved.
2. Propose improvements in two dimensions:
   (A) **Prompt Optimization**: how should INSTRUCTION_* and ALWAYS_ON_KNOWLEDGE change to steer the task agent better?
   (B) **Memory Design**: how should the schemas or the storage/retrieval logic change so that more useful information comes back?
3. Give your changes as a patch.
</task>"""

MODE_NOTES = {  # the project's text (the paper has no ablation section); the offline reflector reads it
    "instructions": "This run evolves only the instructions: change nothing but the values of "
                    "INSTRUCTION_KNOWLEDGE_ITEM, INSTRUCTION_QUERY, INSTRUCTION_RESPONSE and ALWAYS_ON_KNOWLEDGE. "
                    "A patch that touches any other line is rejected.",
    "code": "This run evolves only the code: the four instruction constants stay fixed. A patch that changes "
            "any of them is rejected.",
}


def paper_interface_spec(sandbox, embeddings: str | None = None) -> str:
    """KB_INTERFACE_SPEC in the paper's layout (numbered classes, then the runtime constraints and
    the instruction constants as ## sections), our words; the limits are the run's own."""
    calls = sandbox.llm_calls_per_op
    return f"""You are designing a Knowledge Base Program, which implements three classes:

1. **KnowledgeItem** (dataclass): says which information is captured as knowledge items when something is written to the knowledge base.
   - It has to be a @dataclass with typed fields
   - An external LLM fills in instances by producing JSON that matches your field definitions
   - **Field types HAVE to be JSON-compatible**: only str, int, float, bool, list[str], Optional[str]
   - Do NOT use datetime, tuple, bytes or custom objects
   - Describe fields with `field(metadata={{"description": "..."}})`

2. **Query** (dataclass): says which parameters are used when reading from the knowledge base.
   - The same constraints as KnowledgeItem

3. **KnowledgeBase** (class): the knowledge base system itself.
   - `__init__(self, toolkit)`: gets a Toolkit with:
     - `toolkit.db`: sqlite3.Connection (an in-memory SQLite)
     - `toolkit.chroma`: a chromadb ephemeral client ({chroma_embeddings_note(embeddings)})
     - `toolkit.llm_completion(messages, **kwargs) -> str`: an LLM for reasoning, summarising and extracting information ({calls} call per write/read invocation)
     - `toolkit.logger.debug(message)`: debug logging
   - `write(self, item: KnowledgeItem, raw_text: str) -> None`
   - `read(self, query: Query) -> str`
   - {concurrent_reads_note(sandbox)}

Allowed imports: {", ".join(sandbox.allowed_imports)}

## Runtime Constraints
- Output limit of `read()`: no more than {sandbox.read_max_chars} characters.
- Timeout of `write()` / `read()`: {sandbox.call_timeout_s:g} seconds each.
- Budget of `toolkit.llm_completion()`: no more than {calls} LLM call per `write()` or `read()` invocation. The budget is reset before each call.

## Instruction Constants (required)
Four string constants at module level:
- INSTRUCTION_KNOWLEDGE_ITEM: what to extract, and how to structure it.
- INSTRUCTION_QUERY: how to phrase retrieval queries.
- INSTRUCTION_RESPONSE: the format, length and style of answers.
- ALWAYS_ON_KNOWLEDGE: standing context put into every prompt of the task agent. May be empty."""


def _case_block(i: int, c: dict) -> str:
    verdicts = rubric_verdicts(c)
    return (f'<case id="{i}">\n<question>{c["question"]}</question>\n<rationale>{c["expected"]}</rationale>\n'
            f'<model_generation>{c["answer"]}</model_generation>\n<score>{c["score"]:.2f}</score>\n'
            + (f"<where_lost>\n{lost}\n</where_lost>\n" if (lost := where_lost(c)) else "")
            + (f'<error>{c["error"]}</error>\n' if c.get("error") else "")
            + (f"<rubric_verdicts>\n{verdicts}\n</rubric_verdicts>\n" if verdicts else "")
            + f'<conversation>\n{conversation_lines(c.get("conversation", []))}\n</conversation>\n</case>')


def paper_reflection_sections(inp, sandbox) -> list[Section]:
    """The reflection prompt of Appendix G.2, section by section (see module doc)."""
    S = Section
    out = [
        S("intro", INTRO, 0, True),
        S("interface_spec", f"<interface_spec>\n{paper_interface_spec(sandbox, inp.embeddings)}\n</interface_spec>", 0, True),
        S("rules", "<rules>\n" + RULES.format(read_max_chars=sandbox.read_max_chars) + "\n</rules>", 0, True),
        S("patch_format", f"<patch_format>\n{PATCH_FORMAT}\n</patch_format>", 0, True),
        S("current_program", f'<current_program iteration="{inp.iteration}">\n```python\n{inp.source.rstrip()}\n```\n'
          "</current_program>", 0, True),
        S("evaluation_score", f"<evaluation_score>{inp.score:.4f}</evaluation_score>", 0, True),
    ]
    if inp.mode in MODE_NOTES:
        out.insert(3, S("mode", f"<mode>\n{MODE_NOTES[inp.mode]}\n</mode>", 0, True))
    lineage = list(inp.lineage) + list(inp.already_tried)
    if lineage:
        out.append(S("lineage", "<lineage>\nThe evolution history of this program's line: ancestors, children and "
                     "attempts, each with its score change (\u0394). Entries marked \u2190 REGRESSION made things "
                     "worse: do not repeat them.\n" + "\n".join(lineage) + "\n</lineage>", 2))
    if inp.write_examples:
        ex = [f"<write_example episode=\"{w['episode_id']}\">\n<raw_text>{cut(w['raw_text'], 800)}</raw_text>\n"
              f"<item>{w['item']}</item>\n</write_example>" for w in inp.write_examples]
        out.append(S("write_examples", "<write_examples>\nHow the external LLM turned raw document text into "
                     "knowledge items, each then passed to write():\n" + "\n".join(ex) + "\n</write_examples>", 5))
    if inp.debug_logs:
        logs = inp.debug_logs[:MAX_DEBUG_LINES]
        out.append(S("memory_debug_logs", "<memory_debug_logs>\nWhat toolkit.logger.debug() printed inside write() "
                     "and read():\n" + "\n".join(cut(l, 300) for l in logs) + "\n</memory_debug_logs>", 3))
    successes = split_cases(inp.failed_cases, inp.success_cases)
    if successes:
        ex = [f"<case><question>{c['question']}</question><rationale>{c['expected']}</rationale>"
              f"<model_generation>{c['answer']}</model_generation><score>{c['score']:.2f}</score></case>"
              for c in successes]
        out.append(S("success_cases", "<success_cases>\nThe current program did well on these; keep the "
                     "behaviour that makes them work:\n" + "\n".join(ex) + "\n</success_cases>", 4))
    if inp.references:
        ex = [f'<reference_program id="{pid}" score="{sc:.4f}">\n```python\n{src.rstrip()}\n```\n</reference_program>'
              for pid, sc, src in inp.references]
        out.append(S("reference_programs", "<reference_programs>\nPrograms from the population that score higher "
                     "or lower. Study which design patterns (use of llm_completion, ChromaDB or SQLite, how fine "
                     "the schema is) go with the scores:\n" + "\n".join(ex) + "\n</reference_programs>", 6))
    cases = [_case_block(i, c) for i, c in enumerate(inp.failed_cases, 1)]
    out.append(S("underperforming_cases", CASES_INTRO + where_lost_note(inp.failed_cases) + "\n<underperforming_cases>\n" + "\n".join(cases)
                 + "\n</underperforming_cases>", 1))
    out.append(S("task", TASK, 0, True))
    return out


def paper_compile_fix_messages(source: str, error: str, sandbox, embeddings: str | None = None) -> list[dict]:
    """The compile-fix prompt of Appendix G.3: intro, the interface spec, ## Broken Code, ## Error,
    and the request again -- no patch-format section, as in the paper's template (a reply with the
    whole program in a code block is accepted too, mstar.iteration.reflect.parse_reply). The text before
    the error's first colon is its **type**."""
    kind, _, details = error.strip().partition(":")
    if not details.strip() or " " in kind.strip():
        kind, details = "Error", error.strip()
    text = (
        "You are a skilled Python programmer. A Knowledge Base Program did not compile or did not run. "
        "Repair the error and give your repair as a patch.\n\n"
        f"{paper_interface_spec(sandbox, embeddings)}\n\n"
        f"## Broken Code\n```python\n{source.rstrip()}\n```\n\n"
        f"## Error\n**{kind.strip()}**: {details.strip()}\n\n"
        "Repair the error and give your repair as a patch."
    )
    return [{"role": "user", "content": text}]

"""A prompt built from named sections, each with a priority for cutting to a token budget
(mstar.iteration.reflect.fit_to_budget). Shared by both wordings of the reflection prompt."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from mstar.split.embed import program_embeddings_label

MAX_CASE_FIELD = 2500      # characters of one retrieved text / prompt shown per case
MAX_DEBUG_LINES = 40


@dataclass
class Section:
    name: str
    text: str
    priority: int        # lower = more important; kept first when the budget is tight
    required: bool = False


def cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + f"\n[... {len(text) - n} more characters cut]"


def conversation_lines(conv: Sequence[dict]) -> str:
    return "\n".join(f"[{m.get('role', '?')}]: {cut(str(m.get('content', '')), MAX_CASE_FIELD)}" for m in conv)


def rubric_verdicts(case: dict) -> str:
    """The judge's verdicts behind a case's score, one line per criterion ("" when the case was
    not judged): what the reflector needs to see why a rubric case lost points."""
    details = case.get("score_details") or {}
    lines = []
    for c in details.get("criteria") or []:
        met = c.get("met")
        verdict = "MET" if met is True else "NOT MET" if met is False else "NOT MET (no verdict)"
        try:
            points = f"{float(c.get('points', 0)):+g}"
        except (TypeError, ValueError):
            points = "?"
        why = str(c.get("explanation") or "").strip()
        lines.append(f"- [{verdict}] ({points} points) {str(c.get('criterion', '')).strip()}"
                     + (f" -- judge: {cut(why, 300)}" if why else ""))
    judge = details.get("judge")
    if isinstance(judge, dict) and not lines:
        met = judge.get("met")
        verdict = "MET" if met is True else "NOT MET"
        why = str(judge.get("explanation") or "").strip()
        lines.append(f"- [{verdict}] the answer gives the expected answer" + (f" -- judge: {cut(why, 300)}" if why else ""))
    return "\n".join(lines)


def split_cases(failed: list[dict], success: list[dict]) -> list[dict]:
    """The success cases that are not also shown as failed (by query_id): a case is in one
    section only, even when its score (0.5-1.0) made it both a sampled failure and a success."""
    failed_ids = {c.get("query_id") for c in failed} - {None}
    failed_questions = {c.get("question") for c in failed}

    def shown_as_failed(c: dict) -> bool:
        if c.get("query_id") is not None and failed_ids:
            return c["query_id"] in failed_ids
        return c.get("question") in failed_questions    # records without ids: by question

    return [c for c in success if not shown_as_failed(c)]


def chroma_embeddings_note(embeddings: str | None = None) -> str:
    """What toolkit.chroma's collections embed with (the run's choice; None = the process-wide
    one), for the interface spec of both wordings."""
    label = embeddings or program_embeddings_label()
    if "neural" in label:
        return (f"collections embed their texts with {label}: near vectors mean near meaning, "
                "paraphrases included")
    return (f"collections embed their texts with {label}: texts that share words are near, "
            "paraphrases that share none are not")


def concurrent_reads_note(sandbox) -> str:
    """What the interface spec says about reads that overlap (mstar.evaluation.read_state decides
    which programs' reads run alone), in both wordings."""
    return (f"Reads run concurrently, up to {getattr(sandbox, 'parallel_reads', 32)} at once on threads, so their "
            "LLM calls wait together: keep what one read() works with in local variables. A read() that changes "
            "the knowledge base -- assigns to self.<name> or an item of it, appends to or updates a list or dict "
            "it keeps, writes the database (INSERT, UPDATE, DELETE, commit) or adds to a collection -- makes the "
            "engine run the reads one at a time instead: correct, but each waits for the one before.")


_WHERE_LOST = {
    "not_stored": "never stored -- some evidence did not reach what write() keeps (the raw text or the item "
                  "fields write() reads), so read() could not return it",
    "not_retrieved": "not retrieved -- the evidence was written to memory, but read() did not return all of it",
    "not_used": "retrieved, not used -- read() returned the evidence, and the answer still missed it",
    "right": "the answer is mostly right",
}


WHERE_LOST_NOTE = ("A case's <where_lost> says at which stage the evidence its answer needs was lost: never "
                   "stored (change what write() keeps), not retrieved (change how read() finds it), or retrieved "
                   "and not used (change how read() presents it or how the agent is told to answer).")


def where_lost_note(cases: list[dict]) -> str:
    """" " + WHERE_LOST_NOTE when some case carries an attribution, else ""."""
    return " " + WHERE_LOST_NOTE if any((c.get("attribution") or {}).get("label") for c in cases) else ""


def where_lost(case: dict) -> str:
    """Where the case's answer was lost (mstar.evaluation.attribution), for the reflector: the stage,
    then each evidence unit with what became of it -- its text when read() did not return it.
    "" when the task gives no evidence."""
    att = case.get("attribution") or {}
    label = att.get("label")
    if not label:
        return ""
    if label == "unattributed":
        return f"unattributed -- {att.get('reason') or 'the evidence could not be matched'}"
    units = att.get("evidence") or []
    found = sum(1 for e in units if e.get("retrieved"))
    lines = [f"{_WHERE_LOST.get(label, label)} (evidence recall {found}/{len(units)})"]
    for e in units:
        state = "retrieved" if e.get("retrieved") else "kept, not retrieved" if e.get("stored") else "never stored"
        text = "" if e.get("retrieved") else f": {cut(str(e.get('text', '')), 300)}"
        lines.append(f"- {e.get('id')} [{state}]{text}")
    return "\n".join(lines)

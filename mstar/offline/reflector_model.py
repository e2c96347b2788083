"""Offline reflector: a deterministic, LLM-free stand-in for the reflector role.

Prompt in, reply out, in the same formats a real model sees and writes (mstar/iteration/reflect.py):

- a reflection prompt -> read the current program, its underperforming cases and its lineage;
  turn the cases into failure signals (mstar/offline/signals.py); choose ONE mutation from the
  catalogue (mstar/offline/mutations.py): first a failure to fix, then an edit meant for it, by
  weight x signal boosts (`edit_odds`), skipping changes the lineage marks as regressions or
  already tried on this parent; reply with a commit message and a V4A patch made
  by mstar.patch.apply.make_patch.
- a compile-fix prompt -> try the repair rules (mstar/offline/repairs.py); when none applies,
  say so without a patch, and the engine records a failed attempt. When the error is about the
  reply or the patch rather than the program, propose a fresh mutation instead.

Choices come from a `random.Random` seeded with (seed, hash of the program, iteration), so a
run is reproducible and the same parent drawn in another iteration can get a different change.
"""
from __future__ import annotations

import hashlib
import math
import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from mstar.offline import source_edits as se
from mstar.offline.cases import Case  # noqa: F401 (re-exported)
from mstar.offline.mutation_types import Edit, Mutation
from mstar.offline.instruction_mutations import INSTRUCTION_MUTATIONS
from mstar.offline.mutations import CATALOGUE, TUNING
from mstar.offline.repairs import repair
from mstar.offline.signals import SALIENCE, case_signals
from mstar.offline.text import extract_tag
from mstar.patch import make_patch


@dataclass
class LineageEntry:
    kind: str          # "ancestor" | "current" | "child" | "" (unknown format)
    title: str
    regression: bool
    inert: bool = False    # its score equalled its parent's exactly (" \u0394 +0.000")


@dataclass
class ReflectionView:
    """What the offline reflector reads from a reflection prompt."""
    source: str
    iteration: int
    score: float | None
    cases: list[Case] = field(default_factory=list)
    lineage: list[LineageEntry] = field(default_factory=list)
    attempt_error: str | None = None


def _fenced(block: str | None) -> str | None:
    if block is None:
        return None
    m = re.search(r"```(?:python|py)?[ \t]*\n(.*)\n[ \t]*```", block, re.S)
    return (m.group(1) if m else block.strip()) + "\n"


def parse_lineage(block: str | None) -> list[LineageEntry]:
    out = []
    for line in (block or "").splitlines():
        line = line.strip()
        if not line.startswith("- "):
            continue
        m = re.match(r"- \[(\w+)\] [^:\s]+: (.*)$", line)
        kind, rest = (m.group(1), m.group(2)) if m else ("", line[2:])
        title = re.sub(r"\s*\((?:score|\u0394|delta|failed|duplicate)[^()]*\)\s*(?:\u2190|<-)?\s*(?:REGRESSION)?\s*$", "", rest)
        inert = re.search(r"(?:\u0394|delta)\s*[+-]?0\.0+\)", line) is not None
        out.append(LineageEntry(kind, title.strip(), "REGRESSION" in line, inert))
    return out


def parse_reflection_prompt(prompt: str) -> ReflectionView:
    m = re.search(r'<current_program(?:\s+iteration="(\d+)")?[^>]*>(.*?)</current_program>', prompt, re.S)
    if not m:
        raise ValueError("offline reflector: the prompt has no <current_program> section")
    score_text = extract_tag(prompt, "evaluation_score")
    try:
        score = float(score_text) if score_text else None
    except ValueError:
        score = None
    cases = []
    for block in re.findall(r"<case\b[^>]*>(.*?)</case>", extract_tag(prompt, "underperforming_cases") or "", re.S):
        cases.append(Case(*(extract_tag(block, t) or "" for t in ("question", "expected", "model_answer",
                                                                   "retrieved"))))
    return ReflectionView(_fenced(m.group(2)), int(m.group(1) or 0), score, cases,
                          parse_lineage(extract_tag(prompt, "lineage")) + parse_lineage(extract_tag(prompt, "already_tried")),
                          extract_tag(prompt, "attempt_error"))


def title_key(title: str) -> str:
    return title.split(":", 1)[0].strip().lower()


def choice_rng(seed: int, source: str, iteration: int, extra: str = "") -> random.Random:
    digest = hashlib.sha256(f"{seed}\x00{iteration}\x00{extra}\x00{source}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


INERT_FACTOR = 0.25
# Share of reflections that address one failure the cases show (the rest draw from the whole
# catalogue by weight, so an edit no signal points at can still be found). A product of boosts
# alone cannot do this: a rare, specific failure ("who is her flatmate *now*") has one edit that
# fixes it, which would be outweighed by the many edits that claim "not retrieved".
TARGETED_SHARE = 0.8


def mutation_weight(m: Mutation, signals: Iterable[str]) -> float:
    base, boosts = TUNING[m.name]
    weight = base
    for s in sorted(signals):  # fixed order: float products must not depend on set order
        weight *= boosts.get(s, 1.0)
    return weight


def targets(m: Mutation, signal: str) -> bool:
    """The mutation is meant to fix this failure (its TUNING boosts the signal)."""
    return TUNING[m.name][1].get(signal, 1.0) > 1.0


def _count(signals: Iterable[str] | Mapping[str, int], s: str) -> float:
    """How strongly the cases call for fixing `s`: the cases that show it x its SALIENCE."""
    n = float(signals.get(s, 1)) if isinstance(signals, Mapping) else 1.0
    return n * SALIENCE.get(s, 1.0)


def edit_odds(pool: list[Mutation], signals: Iterable[str] | Mapping[str, int],
              inert: frozenset[str] = frozenset()) -> list[float]:
    """The probability of each mutation in `pool` being drawn, in two steps as a reflector
    reasons: with probability TARGETED_SHARE pick the failure to fix (a signal some mutation in
    the pool targets, weighted by the number of cases that show it x its SALIENCE), then an edit
    meant for it (by weight x boosts); otherwise -- or when no edit targets any signal -- any
    edit by weight. The odds of a mutation whose key is in `inert` are then cut to INERT_FACTOR
    times theirs (against the others, renormalised): whichever step would have chosen it."""
    weights = [mutation_weight(m, signals) for m in pool]
    total = math.fsum(weights)
    if total <= 0:
        return [1.0 / len(pool)] * len(pool) if pool else []
    addressed = [s for s in sorted(signals) if any(targets(m, s) for m in pool)]
    share = TARGETED_SHARE if addressed else 0.0
    odds = [(1.0 - share) * w / total for w in weights]
    counts = math.fsum(_count(signals, s) for s in addressed)
    for s in addressed:
        meant = [i for i, m in enumerate(pool) if targets(m, s)]
        meant_total = math.fsum(weights[i] for i in meant)
        for i in meant:
            if meant_total > 0:
                odds[i] += share * _count(signals, s) / counts * weights[i] / meant_total
            else:
                odds[i] += share * _count(signals, s) / counts / len(meant)
    odds = [p * (INERT_FACTOR if m.key.lower() in inert else 1.0) for m, p in zip(pool, odds)]
    total = math.fsum(odds)
    return [p / total for p in odds] if total > 0 else odds


def candidate_pool(source: str, lineage: list[LineageEntry],
                   catalogue: list[Mutation] = CATALOGUE) -> tuple[list[Mutation], frozenset[str]]:
    """The mutations a reflection may draw from for this program, and the keys of the inert ones.

    Changes marked as regressions anywhere in the lineage, and changes already tried on this
    parent (its children's titles: the same structural edit would be a duplicate), are left
    out while anything else applies; when nothing else does, regressions stay out first.
    """
    banned = {title_key(e.title) for e in lineage if e.regression}
    # "tried" entries come from the engine's failure memory (<already_tried>): changes on this
    # parent whose patch failed, whose child failed its gates or duplicated another program.
    tried = {title_key(e.title) for e in lineage if e.kind in ("child", "tried")}
    applicable = [m for m in catalogue if TUNING[m.name][0] > 0 and m.applies(source)]
    pool = ([m for m in applicable if m.key.lower() not in banned | tried]
            or [m for m in applicable if m.key.lower() not in banned] or applicable)
    # A change that left an ancestor's score exactly as it was is likely inert here too (a
    # rewrite the offline answerer ignores, a knob far from the cases that fail): less likely.
    inert = frozenset(title_key(e.title) for e in lineage if e.inert and e.kind in ("ancestor", "current"))
    return pool, inert


def choose_edit(source: str, rng: random.Random, signals: Iterable[str] | Mapping[str, int],
                lineage: list[LineageEntry], catalogue: list[Mutation] = CATALOGUE) -> tuple[Mutation, Edit] | None:
    """One draw from `candidate_pool` with the odds of `edit_odds`; `signals` is a set, or a
    mapping signal -> number of cases that show it. A mutation that fails to apply after all
    leaves the pool and the draw is repeated; so does one whose title an ancestor already carries
    (the same change from the same state: the lineage undid it since, and would go round in a
    circle -- relative dates on, off, on)."""
    made = {e.title for e in lineage if e.kind in ("ancestor", "current")}
    pool, inert = candidate_pool(source, lineage, catalogue)
    while pool:
        m = rng.choices(pool, weights=edit_odds(pool, signals, inert))[0]
        edit = m.apply(source, rng)
        if edit is not None and edit.source != source and se.parses(edit.source) and edit.title not in made:
            return m, edit
        pool.remove(m)
    return None


def format_reply(old: str, edit: Edit) -> str:
    message = f"*** Commit Message\nTitle: {edit.title}\n- {edit.diagnosis}\n- {edit.change}\n"
    return message + make_patch(old, edit.source)


def no_patch_reply(title: str, diagnosis: str) -> str:
    return (f"*** Commit Message\nTitle: {title}\n- {diagnosis}\n"
            "- No change proposed: the offline reflector has no rule that fixes this, so this reply "
            "carries no patch.\n")


def _evidence(cases: list[Case], m: Mutation) -> str:
    boosts = TUNING[m.name][1]
    hits = [(i, s) for i, c in enumerate(cases, 1) for s in sorted(case_signals(c)) if s in boosts]
    if not hits:
        return ""
    shown = "; ".join(f"case {i}: {s.replace('_', ' ')}" for i, s in hits[:3])
    return f" Seen in the failing cases ({shown})."


class OfflineReflectorModel:
    """Deterministic reflector: same prompt and seed, same reply (see module docstring)."""

    def __init__(self, seed: int = 0, catalogue: list[Mutation] | None = None):
        self.seed = seed
        self.catalogue = CATALOGUE if catalogue is None else catalogue

    def complete(self, messages: list[dict]) -> str:
        prompt = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "assistant")
        from mstar.offline import gepa_proposer, paper_forms
        if gepa_proposer.is_proposal_prompt(prompt):   # GEPA's reflection LM (mstar/gepa)
            return gepa_proposer.propose(prompt)
        prompt = paper_forms.tagged_reflector_prompt(prompt)   # the paper's wording -> tags
        catalogue = self._catalogue_for(prompt)
        if (extract_tag(prompt, "task") or "").strip() == "compile_fix":
            return self._compile_fix(prompt, catalogue)
        return self._reflect(parse_reflection_prompt(prompt), catalogue=catalogue)

    def _catalogue_for(self, prompt: str) -> list[Mutation]:
        # Ablation runs say in a <mode> section (or in the error of a compile-fix round) which
        # part of the program is frozen; only mutations of the other part are offered then.
        text = (extract_tag(prompt, "mode") or "") + (extract_tag(prompt, "error") or "")
        instruction_names = {m.name for m in INSTRUCTION_MUTATIONS}
        if "evolves only the instructions" in text:
            return [m for m in self.catalogue if m.name in instruction_names]
        if "evolves only the code" in text:
            return [m for m in self.catalogue if m.name not in instruction_names]
        return self.catalogue

    def _reflect(self, view: ReflectionView, extra: str = "", catalogue: list[Mutation] | None = None) -> str:
        # How many cases show each failure: the commonest one is the likeliest to be addressed.
        signals = Counter(s for c in view.cases for s in case_signals(c))
        # A retry after a failed attempt must not make the same choice again.
        rng = choice_rng(self.seed, view.source, view.iteration, extra + (view.attempt_error or ""))
        chosen = choose_edit(view.source, rng, signals, view.lineage,
                             self.catalogue if catalogue is None else catalogue)
        if chosen is None:
            return no_patch_reply("No applicable change found",
                                  "None of the offline reflector's mutations applies to this program.")
        m, edit = chosen
        edit = Edit(edit.source, edit.title, edit.diagnosis + _evidence(view.cases, m), edit.change)
        return format_reply(view.source, edit)

    def _compile_fix(self, prompt: str, catalogue: list[Mutation]) -> str:
        source = _fenced(extract_tag(prompt, "broken_program"))
        error = extract_tag(prompt, "error") or ""
        if source is None:
            raise ValueError("offline reflector: compile-fix prompt has no <broken_program> section")
        if re.match(r"\s*(?:patch|reply|frozen):", error):
            # The program itself is fine; the change did not arrive (or touched the frozen
            # part). Propose another one.
            return self._reflect(ReflectionView(source, 0, None), extra=error, catalogue=catalogue)
        edit = repair(source, error)
        if edit is None:
            first = error.strip().splitlines()[0][:160] if error.strip() else "unknown error"
            return no_patch_reply(f"Cannot fix: {first}",
                                  f"The error ({first}) matches none of the offline repair rules.")
        return format_reply(source, edit)

"""The memory X-ray as text, for `mstar show`, `mstar eval` and the report.

Reads the records mstar.evaluation.xray writes (a program's `xray` summary, a case's
`attribution`); kept apart from it so the run views do not import the evaluation machinery.
"""
from __future__ import annotations

# label -> the stage the report's stacked bar names, in the order the answer travels
STAGES = (("not_stored", "lost at store"), ("not_retrieved", "lost at read"), ("not_used", "lost at answer"),
          ("right", "right"))


def stage_counts(xray: dict | None) -> list[tuple[str, int]]:
    """(stage name, cases) for the stacked bar: lost at store / read / answer, right."""
    labels = (xray or {}).get("labels") or {}
    return [(name, int(labels.get(key, 0))) for key, name in STAGES]


def _num(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def one_line(xray: dict | None) -> str:
    """A program's X-ray in one line ("" without one)."""
    if not xray:
        return ""
    counts = ", ".join(f"{name} {n}" for name, n in stage_counts(xray))
    un = (xray.get("labels") or {}).get("unattributed", 0)
    return (f"evidence recall {_num(xray.get('recall'))}, precision {_num(xray.get('precision'))}, "
            f"score when retrieved {_num(xray.get('score_when_retrieved'))} ({xray.get('retrieved', 0)} cases); "
            f"{counts}" + (f"; {un} unattributed" if un else ""))


def case_tag(att: dict | None) -> str:
    """A case's attribution in brackets -- "[lost at read: D1:3 not retrieved]" -- or "" (right, none)."""
    if not att or att.get("label") == "right":
        return ""
    if att.get("label") == "unattributed":
        return f"[unattributed: {' '.join(str(att.get('reason') or '').split())[:60]}]"
    stage = dict(STAGES).get(att.get("label"), att.get("label"))
    missing = [str(e.get("id")) for e in att.get("evidence") or [] if not e.get("retrieved")]
    more = f" (+{len(missing) - 4})" if len(missing) > 4 else ""
    return f"[{stage}" + (f": {', '.join(missing[:4])}{more} not retrieved" if missing else "") + "]"


def category_lines(xray: dict | None) -> list[str]:
    """One line per category ("" categories: none): recall, score when retrieved, where lost."""
    out = []
    for cat, x in ((xray or {}).get("per_category") or {}).items():
        counts = ", ".join(f"{name} {n}" for name, n in stage_counts(x) if n)
        out.append(f"{cat}: recall {_num(x.get('recall'))}, score when retrieved "
                   f"{_num(x.get('score_when_retrieved'))}; {counts or 'no attributed case'}")
    return out

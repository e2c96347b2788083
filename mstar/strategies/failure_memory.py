"""Failure memory (beyond the paper): what was tried on each parent and did not help.

The reflector sees a parent's lineage (children with their deltas), but an attempt that never
produced a child -- a patch that failed its gates, a duplicate -- leaves no child to show. This
keeps one note per such attempt and per regression, under the parent it was tried on, and the
next reflection on that parent reads them ("already tried"). The loop and resume feed it the
same iteration outcomes in the same order, so a resumed run's notes are identical.
"""
from __future__ import annotations


class FailureMemory:
    def __init__(self) -> None:
        self._notes: dict[str, list[str]] = {}

    def remember(self, parent_id: str, iteration: int, status: str, title: str, attempts: list[dict],
                 delta: float | None, no_change: bool = False) -> None:
        """One iteration's outcome on `parent_id`: noted unless it added a child that changed
        something and did not lower the score."""
        if status == "ok" and not no_change and (delta is None or delta >= 0):
            return
        if status == "ok" and no_change:
            reason = "changed nothing: every static answer was the same as before; try a different kind of edit"
        elif status == "ok":
            reason = f"failed: lowered the static score by {delta:+.3f}"
        elif status == "duplicate":
            reason = "duplicate: identical to a program already in the pool"
        else:
            last = attempts[-1].get("error", "") if attempts else ""
            reason = "failed: " + " ".join(str(last).split())[:160]
        # Parentheses would end the note early for readers that parse these lines.
        reason = reason.replace("(", "[").replace(")", "]")
        self._notes.setdefault(parent_id, []).append(f"- [tried] attempt_{iteration:03d}: {title} ({reason})")

    def notes(self, parent_id: str) -> list[str]:
        return list(self._notes.get(parent_id, []))

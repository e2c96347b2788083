"""`Run`: a run folder as a Python object -- what `mstar.evolve` and `mstar.resume` return, and
`mstar.open_run(path)` gives for any run, finished or not.

Everything is read from the folder (mstar/run/views.py), so a Run never disagrees with
`mstar lineage`, `mstar report` or `mstar ui`, and a Run made from a folder another process is
still writing shows what is on disk now (`refresh()` reads it again).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mstar.run import events as ev_types
from mstar.run.spend import RoleSpend, total
from mstar.run.views import RunView


@dataclass(frozen=True)
class Champion:
    """The program the run hands over, with the evidence for it."""
    id: str
    source: str
    static: float | None                 # its score on the static validation set
    confirmed: float | None = None       # on the static set and the confirmation's items together
    confirmed_items: int | None = None   # ... over this many items
    test: float | None = None            # on the held-out test queries (None until the test ran)
    best_seed: str | None = None         # the best seed, tested on the same questions
    best_seed_test: float | None = None  # == test when the champion is the best seed
    vs_best_seed: dict | None = None     # test gain over it, paired: mean, low, high, n, significant
    rule: str = "static"                 # how it was chosen: "confirmed" (the race) or "static"

    @property
    def gain_holds(self) -> bool | None:
        """True when the paired 95% interval of the test gain over the best seed is above 0."""
        if not self.vs_best_seed:
            return None
        return bool(self.vs_best_seed.get("significant")) and self.vs_best_seed.get("mean", 0) > 0


class Run:
    """One run folder. `status` is "finished", "running", "stopped" (a budget, an endpoint, an
    interrupt: `mstar.resume(path)` goes on), "crashed" or "incomplete"."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._view = RunView(self.path)

    def refresh(self) -> "Run":
        self._view = RunView(self.path)
        return self

    def __repr__(self) -> str:
        best = self._view.best_id
        return f"Run({str(self.path)!r}, status={self.status!r}, iterations={self.iterations_done}, best={best!r})"

    # ------------------------------------------------------------ what happened
    @property
    def status(self) -> str:
        return self._view.status

    @property
    def config(self) -> dict:
        return dict(self._view.config)

    @property
    def events(self) -> list:
        """The typed lineage events (mstar.run.events: SeedEvent, IterationEvent,
        ConfirmationEvent, TestEvent, StoppedEvent), in the order they were written."""
        return list(self._view.events)

    @property
    def iterations_done(self) -> int:
        return self._view.iterations_done

    @property
    def summary(self) -> dict | None:
        """summary.json once the run finished (mstar/final/summary.py), else None."""
        return self._view.summary

    @property
    def stop_reason(self) -> str | None:
        stop = self._view.stop
        return stop.reason if stop is not None else (self.summary or {}).get("stop_reason")

    def spend(self) -> dict[str, RoleSpend]:
        """What the run spent per LLM role, and "total" (calls, tokens, dollars where priced)."""
        by_role = self._view.spend()
        return {**by_role, "total": total(by_role)}

    def scores(self) -> dict[str, float]:
        """Every program's static score, by id (seeds and children)."""
        return {n.program_id: n.static_score for n in self._view.nodes()
                if n.program_id and n.static_score is not None}

    @property
    def champion(self) -> Champion | None:
        """The best program so far; once finished, the run's champion with its test scores."""
        pid = self._view.best_id
        if pid is None:
            return None
        source = self._view.source(pid) or ""
        node = self._view.node(pid)
        conf = next((e for e in reversed(self._view.events) if isinstance(e, ev_types.ConfirmationEvent)), None)
        test = next((e for e in reversed(self._view.events) if isinstance(e, ev_types.TestEvent)), None)
        confirmed = (conf.scores or {}).get(pid, {}) if conf is not None else {}
        kwargs: dict[str, Any] = {}
        if test is not None and test.program_id == pid:
            # A champion that is the best seed was tested once: its test is the best seed's (a gain
            # over itself is not measured: vs_best_seed stays None).
            seed_test = test.test_score if test.best_seed_id == pid else test.best_seed_test_score
            kwargs = dict(test=test.test_score, best_seed=test.best_seed_id,
                          best_seed_test=seed_test, vs_best_seed=test.gain)
        return Champion(pid, source, node.static_score if node else None, confirmed.get("union"),
                        confirmed.get("n"), rule=(self.summary or {}).get("pick_rule", "static"), **kwargs)

    # ------------------------------------------------------------ using the winner
    def export(self, path: str | Path, program: str | None = None) -> Path:
        """Write the champion (or `program`) as a standalone file with a header that says where
        it came from (what `mstar export` writes); returns the path."""
        from mstar.run.export import export_program
        _, text = export_program(self._view, program)
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
        return out

    def open_memory(self, store: str | Path, *, namespace: str = "default", program: str | None = None,
                    **kwargs):
        """The champion (or `program`) as a memory kept in the store folder `store` (see
        mstar.api.MemoryProgram.open; kwargs: llm=, toolkit_llm=, ...). An existing store must
        hold the same program."""
        from mstar.api import MemoryProgram
        from mstar.run.export import export_program
        pid, text = export_program(self._view, program)
        folder = Path(store)
        folder.parent.mkdir(parents=True, exist_ok=True)
        staged = folder.parent / f".{folder.name}.{pid}.py"
        staged.write_text(text, encoding="utf-8")
        try:
            return MemoryProgram.open(staged, store=folder, namespace=namespace, **kwargs)
        finally:
            staged.unlink(missing_ok=True)

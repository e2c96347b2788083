"""The run's LLM router and what hangs on it, shared by a new run and a resumed one (mstar/library/launch.py): usage
records into the run folder, the live progress display, the seed ids the progress lines fit."""
from __future__ import annotations

import sys


def make_router(cfg):
    """The run's router (SetupError when the LLM settings cannot be used). Usage records go to
    the run folder once it exists (`attach_store`)."""
    from mstar.library.errors import SetupError
    from mstar.llm.router import LLMRouter
    from mstar.llm.types import LLMError
    try:
        return LLMRouter.from_config(cfg.llm, seed=cfg.evolution.seed,
                                     on_warning=lambda w: print(f"mstar: warning: {w}", file=sys.stderr, flush=True))
    except LLMError as exc:
        raise SetupError(str(exc)) from None


def attach_store(router, store, live=None) -> list:
    """From now on every LLM call is appended to the run's llm_usage.jsonl (the calls made
    before, the preflight's, are written first). A record that cannot be written is kept in the
    returned list instead of failing the call it belongs to: the next lineage write fails too,
    and the run ends with one line (mstar/library/exits.py)."""
    lost: list = []

    def on_usage(rec) -> None:
        if live is not None:
            live.record(rec)
        try:
            store.append_jsonl("llm_usage.jsonl", rec.to_dict())
        except OSError as exc:
            lost.append(exc)

    for rec in list(router.records):
        on_usage(rec)
    router.ledger.on_record = on_usage
    return lost


def live_display(router, quiet: bool):
    """The live progress of evaluations (mstar/run/eval_progress.py), wired to the router."""
    if quiet:
        return None
    from mstar.run.eval_progress import LiveProgress
    live = LiveProgress(router)
    router.eval_progress = live
    router.on_attempt_error = live.attempt_error
    warn = router.ledger.on_warning
    router.ledger.on_warning = lambda w: (live.pause(), warn(w)) if warn else None
    return live.start()


def seed_ids(cfg) -> list[str]:
    from mstar.program.sources import load_program_source
    return [f"seed_{load_program_source(s)[0]}" for s in cfg.seeds]

"""Which isolation layers a session has, and saying once which ones the machine lacks."""
from __future__ import annotations

import logging
import threading

log = logging.getLogger("sandbox.engine.session")

# Layers the engine side itself provides, whatever the worker reports.
ENGINE_LAYERS = ["worker_process", "clean_env", "process_group_kill", "parent_deadline",
                 "llm_budget_in_parent", "frame_pipe"]

_warned: set[str] = set()
_warned_lock = threading.Lock()


def log_layer_warnings(warnings: list[str]) -> None:
    """Log each missing layer once per engine process: a run starts hundreds of workers, and on a
    machine without (say) root every one of them lacks the same layers. Each session's LoadInfo
    still lists all of its warnings."""
    for warning in warnings:
        layer = warning.split(":", 1)[0]
        with _warned_lock:
            if layer in _warned:
                continue
            _warned.add(layer)
        log.warning("sandbox layer unavailable: %s (logged once per process)", warning)

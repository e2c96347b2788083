"""The built-in offline backend: deterministic stand-ins for every role.

It needs no network and no key, so a fresh clone can run a whole evolution.
Each role has its own model object (see mstar/offline/); this module only
adapts them to the Backend interface and estimates token counts.
"""
from __future__ import annotations

import time

from mstar.ast_guard import AST_LOCK
from mstar.llm.types import ChatResponse, estimate_tokens, messages_text


def _model_for(role: str, seed: int):
    # Imported lazily so that a run served entirely by real endpoints never
    # loads the offline models.
    if role == "task":
        from mstar.offline.task_model import OfflineTaskModel
        return OfflineTaskModel()
    if role == "toolkit":
        from mstar.offline.toolkit_model import OfflineToolkitModel
        return OfflineToolkitModel()
    if role == "judge":
        from mstar.offline.judge_model import OfflineJudgeModel
        return OfflineJudgeModel()
    if role == "reflector":
        from mstar.offline.reflector_model import OfflineReflectorModel
        return OfflineReflectorModel(seed=seed)
    raise ValueError(f"the offline backend has no model for role {role!r}")


class OfflineBackend:
    name = "offline"

    def __init__(self, role: str, *, seed: int = 0):
        self.role = role
        self.model = f"offline-{role}"
        self._impl = _model_for(role, seed)

    def complete(self, messages: list[dict]) -> ChatResponse:
        start = time.perf_counter()
        if self.role == "reflector":  # it edits programs through `ast` (see mstar/ast_guard.py)
            with AST_LOCK:
                text = self._impl.complete(messages)
        else:
            text = self._impl.complete(messages)
        return ChatResponse(
            text=text,
            model=self.model,
            backend=self.name,
            prompt_tokens=estimate_tokens(messages_text(messages)),
            completion_tokens=estimate_tokens(text),
            latency_s=time.perf_counter() - start,
        )

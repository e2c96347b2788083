"""Which wording the engine's prompts use: "mstar" (the project's own) or "paper".

"paper" follows the M* paper's templates (Appendix G.1 task agent, G.2 reflector, G.3 compile-fix,
H rubric judge): the same sections in the same order, the same tags, headers and placeholders,
with the sentences written in this project's words (mstar/prompts/paper_agent.py,
mstar/prompts/paper_reflector.py). "mstar" is the wording of mstar/agent.py, mstar/iteration/reflect.py and
mstar/tasks/judging.py. The offline models answer both (mstar/offline/paper_forms.py).

Every prompt builder takes `style=None`, which means `current()`: the context's choice (`using`,
carried into pools by mstar.llm.scope.submit like the LLM scope), else the process-wide one
(`use`, set once by a command from its run's `evolution.prompts`), else "mstar".
"""
from __future__ import annotations

import contextvars
from contextlib import contextmanager
from typing import Iterator

STYLES = ("mstar", "paper")
DEFAULT = "mstar"

_process_default = [DEFAULT]
_context: contextvars.ContextVar[str | None] = contextvars.ContextVar("mstar_prompt_style", default=None)


def check(style: str) -> str:
    if style not in STYLES:
        raise ValueError(f"unknown prompt wording {style!r}; choose one of {', '.join(STYLES)}")
    return style


def use(style: str) -> None:
    """Set the process-wide wording (a command does this once, from its run's configuration)."""
    _process_default[0] = check(style)


def default() -> str:
    """The process-wide wording (what `use` set), whatever a context says."""
    return _process_default[0]


def current() -> str:
    return _context.get() or _process_default[0]


def resolve(style: str | None) -> str:
    """A builder's `style` argument: None = current()."""
    return current() if style is None else check(style)


@contextmanager
def using(style: str) -> Iterator[None]:
    """`with using("paper"): ...` -- prompts built inside (and in work submitted through
    mstar.llm.scope.submit) use that wording."""
    token = _context.set(check(style))
    try:
        yield
    finally:
        _context.reset(token)

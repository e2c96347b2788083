"""Use an evolved memory program in your own agent.

    from mstar.api import MemoryProgram

    with MemoryProgram.load("best.py", llm=my_llm) as memory:   # my_llm(messages) -> str
        memory.ingest("Maya: I adopted a cat named Biscuit yesterday. [date: 2023-05-08]")
        print(memory.ask("What is the name of Maya's cat?"))

The program runs exactly as it did during evolution: in its own sandbox worker
(sandbox.engine.session.ProgramSession: static gate, restricted compile, import whitelist, separate process
with memory/CPU limits and a per-call deadline), and the task agent speaks to it through the same
prompts (mstar.agent): `ingest` asks the LLM for a KnowledgeItem and hands it to `write()`,
`ask` asks for a Query, hands it to `read()`, and answers from what came back. The program's own
toolkit LLM calls are served from this process, so your API key never enters the worker.

`llm` (and `toolkit_llm`, which defaults to it) may be:
  - a callable `messages -> str` (OpenAI chat messages in, reply text out);
  - an OpenAI-compatible client (`openai.OpenAI(...)`), with `model="..."`;
  - an `mstar.llm.router.LLMRouter` (its "task" and "toolkit" roles are used);
  - an `mstar.config.LLMConfig` -- what `mstar evolve --config/--base-url/--model ...` resolves to
    (`llm_config(...)` below takes the same options): a router is made from it;
  - "offline" (default): mstar's deterministic offline stand-ins, for trying things without a key.

A memory that survives restarts: `MemoryProgram.open(path, store="my-memory", namespace="alice")`
keeps every write in a log under the store folder and replays it into a fresh worker when opened
again (mstar.memory; the same store `mstar serve` serves over MCP).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mstar.memory.sandboxed import (Answer, Ingested, LLMFn, MemoryProgramError, SandboxedProgram,  # noqa: F401
                                  _as_llm_fn, as_router, llm_config)

if TYPE_CHECKING:
    from mstar.memory.service import StoredMemory

__all__ = ["Answer", "Ingested", "MemoryProgram", "MemoryProgramError", "as_router", "llm_config"]


class MemoryProgram(SandboxedProgram):
    """One memory program with one (initially empty) knowledge base in a sandbox worker; `open`
    gives one whose memory is kept in a store folder."""

    @classmethod
    def open(cls, path: str | Path | None, *, store: str | Path, namespace: str = "default",
             **kwargs: Any) -> "StoredMemory":
        """A memory kept in the store folder `store`: every `ingest` is logged (and fsync'd) before
        it returns, and opening the store again -- in this or another process -- replays the log
        into a fresh worker, so what was remembered is there after a restart. A new store is made
        for the program at `path`; an existing store must hold the same program (`path` may be
        None to use the store's own). `namespace` picks one knowledge base of the store (a user,
        an agent). Same kwargs as the class, plus `on_warning` (a callable taking one line).
        The same store can be served over MCP with `mstar serve`; one process holds a namespace
        at a time, and the handle holds its namespaces until it is closed (however long it idles:
        `idle_close_s` is the server's, refused here)."""
        from mstar.memory.service import StoredMemory
        return StoredMemory.open(path, store=store, namespace=namespace, **kwargs)

"""A memory program loaded in its own sandbox worker, with the task agent around it.

The class behind `mstar.api.MemoryProgram` (the public name; read its docstring for use): the
program runs exactly as during evolution -- the sandbox's gates, limits and per-call deadline
(sandbox.engine.session.ProgramSession) -- and the task agent speaks to it through the same
prompts (mstar.agent). Kept apart from mstar/api.py so that the stores built on it
(mstar.memory) and the public API that opens them import it without a circle.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from mstar import agent
from mstar.config import SandboxConfig
from mstar.evaluation import sandbox_limits
from sandbox.engine.session import ProgramSession, SandboxError, SandboxLimits

LLMFn = Callable[[list[dict]], str]


class MemoryProgramError(RuntimeError):
    """The program cannot be used any more (its worker died), or an LLM argument is unusable."""


@dataclass
class Ingested:
    item: dict                                    # the KnowledgeItem the agent extracted and write() got
    warnings: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)  # the program's debug output during write()
    error: str | None = None                      # write() raised or timed out (the memory goes on)
    failed: str | None = None                     # no item was extracted (the task LLM failed, or its
                                                  # reply held no object with a field of the item): `item`
                                                  # is all defaults


@dataclass
class Answer:
    answer: str
    query: dict                                   # the Query the agent formulated
    retrieved: str                                # what read() returned
    warnings: list[str] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    error: str | None = None                      # read() raised or timed out; answered from no memory


def llm_config(config: str | None = None, *, base_url: str | None = None, model: str | None = None,
               api_key_env: str | None = None, offline_roles: tuple[str, ...] = (),
               overrides: tuple[str, ...] = (), cache_dir: str | None = None, no_cache: bool = False):
    """The LLM configuration `mstar evolve` would use with these options (--config FILE,
    --base-url, --model, --api-key-env, --offline-role, --llm KEY=VALUE, --cache-dir, --no-cache):
    offline unless a file, an endpoint or a model says otherwise. Pass it as `llm=`."""
    from mstar.llm.settings import resolve_llm_config
    return resolve_llm_config(config, base_url=base_url, model=model, api_key_env=api_key_env,
                              offline_roles=offline_roles, overrides=overrides, cache_dir=cache_dir,
                              no_cache=no_cache)


def as_router(llm: Any) -> Any:
    """An LLMConfig becomes a router (one for both roles); anything else is returned as it is."""
    from mstar.config import LLMConfig
    if isinstance(llm, LLMConfig):
        from mstar.llm.router import LLMRouter
        from mstar.llm.types import LLMError
        try:
            return LLMRouter.from_config(llm)
        except LLMError as exc:
            raise MemoryProgramError(str(exc)) from None
    return llm


def _as_llm_fn(llm: Any, role: str, model: str | None) -> LLMFn:
    if isinstance(llm, str):
        if llm != "offline":
            raise MemoryProgramError(f"llm={llm!r}: the only string accepted is 'offline'")
        from mstar.llm.offline_backend import OfflineBackend
        backend = OfflineBackend(role)
        return lambda messages: backend.complete(messages).text
    if hasattr(llm, "text") and hasattr(llm, "call") and hasattr(llm, "describe"):  # an LLMRouter
        return lambda messages: llm.text(role, messages)
    chat = getattr(getattr(llm, "chat", None), "completions", None)
    if chat is not None and hasattr(chat, "create"):  # an OpenAI-compatible client
        if not model:
            raise MemoryProgramError("an OpenAI client needs model='...'")

        def call(messages: list[dict]) -> str:
            resp = chat.create(model=model, messages=messages)
            return resp.choices[0].message.content or ""
        return call
    if callable(llm):
        def wrapped(messages: list[dict]) -> str:
            reply = llm(messages)
            return reply.text if hasattr(reply, "text") else str(reply)
        return wrapped
    raise MemoryProgramError(f"llm must be a callable, an OpenAI client, an LLMRouter or 'offline'; "
                             f"got {type(llm).__name__}")


class SandboxedProgram:
    """One memory program with one (initially empty) knowledge base in a sandbox worker
    (`mstar.api.MemoryProgram` is this, plus `open` for a memory kept in a store)."""

    def __init__(self, source: str, *, llm: Any = "offline", toolkit_llm: Any = None,
                 model: str | None = None, sandbox: SandboxConfig | None = None,
                 limits: SandboxLimits | None = None, name: str = "program"):
        self.name = name
        self.sandbox = sandbox or SandboxConfig()
        llm = as_router(llm)
        toolkit_llm = as_router(toolkit_llm)
        self._task_llm = _as_llm_fn(llm, "task", model)
        self._toolkit_llm = _as_llm_fn(toolkit_llm if toolkit_llm is not None else llm, "toolkit", model)
        self._session = ProgramSession(source, allowed_imports=self.sandbox.allowed_imports,
                                       limits=limits or sandbox_limits(self.sandbox), llm=self._toolkit_llm)
        try:
            self.info = self._session.start()  # SandboxError: the program failed a gate or its __init__
        except BaseException:
            self._session.close()
            raise
        self.constants: dict[str, str] = self.info.constants

    @classmethod
    def load(cls, path: str | Path, **kwargs: Any) -> "SandboxedProgram":
        """Load a program file (e.g. written by `mstar export`); see the class for kwargs."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"memory program file {path} does not exist")
        return cls(path.read_text(encoding="utf-8"), name=path.stem, **kwargs)

    @property
    def alive(self) -> bool:
        return self._session.alive()

    @property
    def worker_pid(self) -> int | None:
        """The sandbox worker's process id (not this process)."""
        return self._session.pid

    def _check_alive(self) -> None:
        if not self._session.alive():
            raise MemoryProgramError(f"memory program {self.name!r}: its sandbox worker is gone "
                                     f"({self._session.worker_output()[-300:] or 'closed'}); load it again")

    def _llm(self, fn: LLMFn, messages: list[dict]) -> tuple[str, str | None]:
        try:
            return fn(messages), None
        except Exception as exc:  # the same tolerance as during evaluation: note it and go on
            return "", f"{type(exc).__name__}: {exc}"

    def ingest(self, text: str) -> Ingested:
        """Extract a KnowledgeItem from `text` with the task LLM and write it to the memory."""
        return self.write_extracted(self.extract(text), text)

    def extract(self, text: str) -> Ingested:
        """The KnowledgeItem the task LLM extracts from `text` (nothing is written yet)."""
        self._check_alive()
        msgs = agent.build_extraction_messages(self.constants["INSTRUCTION_KNOWLEDGE_ITEM"], text,
                                               self.info.knowledge_item_schema)
        reply, err = self._llm(self._task_llm, msgs)
        obj, warn = agent.parse_json_object(reply) if err is None else (None, f"task LLM failed: {err}")
        item, warns = agent.fill_fields(obj, self.info.knowledge_item_schema)
        failed = warn if obj is None else None
        names = [f["name"] for f in self.info.knowledge_item_schema if isinstance(f, dict) and "name" in f]
        if obj is not None and names and not set(obj) & set(names):
            failed = f"the reply held none of the KnowledgeItem's fields ({', '.join(names)})"
        return Ingested(item, ([warn] if warn else []) + warns, failed=failed)

    def write_extracted(self, out: Ingested, text: str) -> Ingested:
        """write() an extracted item (`extract`); a write() that raised is noted in `out.error`,
        one that took the worker down raises MemoryProgramError."""
        self._check_alive()
        try:
            out.logs = self._session.write(out.item, text).logs
        except SandboxError as exc:
            out.error = str(exc)
            self._check_alive()
        return out

    def ask_detailed(self, question: str, answer: bool = True) -> Answer:
        """Formulate a Query, read() the memory, answer from what it returned (`answer=False`:
        stop after the read; `Answer.answer` stays empty)."""
        result = self.formulate(question)
        self.read_into(result)
        return self.answer_into(result, question) if answer else result

    def formulate(self, question: str) -> Answer:
        """The Query the task LLM formulates for `question` (nothing is read yet)."""
        self._check_alive()
        msgs = agent.build_query_messages(self.constants["INSTRUCTION_QUERY"], question, self.info.query_schema)
        reply, err = self._llm(self._task_llm, msgs)
        obj, warn = agent.parse_json_object(reply) if err is None else (None, f"task LLM failed: {err}")
        query, warns = agent.fill_fields(obj, self.info.query_schema)
        return Answer("", query, "", ([warn] if warn else []) + warns)

    def read_into(self, result: Answer) -> Answer:
        """read() the formulated query; a read() that raised is noted in `result.error`, one that
        took the worker down raises MemoryProgramError."""
        self._check_alive()
        try:
            op = self._session.read(result.query)
            result.retrieved, result.logs = op.output or "", op.logs
        except SandboxError as exc:
            result.error = str(exc)
            self._check_alive()
        return result

    def answer_into(self, result: Answer, question: str) -> Answer:
        """The task LLM's answer from what read() returned."""
        a_msgs = agent.build_answer_messages(self.constants["ALWAYS_ON_KNOWLEDGE"], result.retrieved, question,
                                             self.constants["INSTRUCTION_RESPONSE"])
        reply, err = self._llm(self._task_llm, a_msgs)
        if err is not None:
            result.warnings.append(f"answer failed: {err}")
        result.answer = agent.clean_answer(reply)
        return result

    def ask(self, question: str) -> str:
        return self.ask_detailed(question).answer

    def close(self) -> None:
        """Stop the worker; the knowledge base goes with it. Idempotent."""
        self._session.close()

    def __enter__(self) -> "SandboxedProgram":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

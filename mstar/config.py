"""The run configuration: one frozen dataclass tree, resolved once at start.

Nothing below the CLI reads the environment on its own: the CLI resolves
flags + environment into a `RunConfig`, writes it to the run folder and passes
it down explicitly. Secrets never enter the config -- only the *name* of the
environment variable that holds an API key.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from mstar.contract import DEFAULT_ALLOWED_IMPORTS

ROLES = ("task", "reflector", "toolkit", "judge")


@dataclass(frozen=True)
class RoleConfig:
    """How one LLM role is served."""

    backend: str = "offline"          # "offline" or "openai" (any OpenAI-compatible server)
    model: str = "offline"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float | None = None
    max_tokens: int | None = None
    timeout_s: float = 120.0
    max_retries: int = 3


@dataclass(frozen=True)
class LLMConfig:
    task: RoleConfig = RoleConfig()
    reflector: RoleConfig = RoleConfig()
    toolkit: RoleConfig = RoleConfig()
    judge: RoleConfig = RoleConfig()

    def role(self, name: str) -> RoleConfig:
        if name not in ROLES:
            raise KeyError(f"unknown LLM role {name!r}; roles are {', '.join(ROLES)}")
        return getattr(self, name)


@dataclass(frozen=True)
class EvolutionConfig:
    """Paper Table 7 defaults."""

    iterations: int = 20
    tau: float = 0.15                  # softmax temperature for parent selection
    static_size: int = 25              # static validation set (k-means, one per cluster)
    rotating_size: int = 5             # rotating minibatch per iteration
    failures_per_iteration: int = 2    # failed cases shown to the reflector
    train_ratio: int = 5               # training episodes = ratio x validation items
    compile_fix_attempts: int = 3      # k
    seed: int = 0
    workers: int = 8                   # concurrent task-agent calls within one evaluation
    mode: str = "all"                  # ablation (paper Table 2): "all", "instructions" or "code"
    prompt_budget_tokens: int = 60_000 # reflection prompt budget; optional sections are cut to fit


@dataclass(frozen=True)
class SandboxConfig:
    allowed_imports: tuple[str, ...] = tuple(DEFAULT_ALLOWED_IMPORTS)
    call_timeout_s: float = 60.0
    read_max_chars: int = 3000
    memory_mb: int = 1024
    llm_calls_per_op: int = 1


@dataclass(frozen=True)
class RunConfig:
    name: str
    task: str = "sample"
    data: str | None = None
    runs_dir: str = "runs"
    seeds: tuple[str, ...] = ("vector_search", "llm_summarizer", "experience_learner")
    evolution: EvolutionConfig = EvolutionConfig()
    sandbox: SandboxConfig = SandboxConfig()
    llm: LLMConfig = LLMConfig()

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunConfig":
        llm = data.get("llm", {})
        rebuilt = dict(data)
        rebuilt["llm"] = LLMConfig(**{r: RoleConfig(**llm[r]) for r in ROLES if r in llm})
        rebuilt["evolution"] = EvolutionConfig(**data.get("evolution", {}))
        sb = dict(data.get("sandbox", {}))
        if "allowed_imports" in sb:
            sb["allowed_imports"] = tuple(sb["allowed_imports"])
        rebuilt["sandbox"] = SandboxConfig(**sb)
        if "seeds" in rebuilt:
            rebuilt["seeds"] = tuple(rebuilt["seeds"])
        return cls(**rebuilt)

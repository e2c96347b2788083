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

from mstar.program import DEFAULT_ALLOWED_IMPORTS

ROLES = ("task", "reflector", "toolkit", "judge")


@dataclass(frozen=True)
class RoleConfig:
    """How one LLM role is served (see mstar/llm/settings.py for the config file)."""

    backend: str = "offline"          # "offline", "openai" (any OpenAI-compatible server) or "command"
    model: str = "offline"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"   # the variable's NAME; the key itself is never stored
    temperature: float | None = None
    max_tokens: int | None = None
    reasoning_effort: str | None = None   # "low" / "medium" / "high" for reasoning models
    concurrency: int = 64             # calls of this role in flight at once (the official engine: 64)
    timeout_s: float = 120.0
    max_retries: int = 3              # retries on 429 / 5xx / timeouts / connection errors
    backoff_s: float = 1.0            # first retry waits about this long, doubling after
    command: str | None = None        # backend "command": prompt on stdin, completion on stdout
    cache: str = "auto"               # "reuse", "replay", "off"; auto: replay for the reflector,
                                      # reuse for the others, off for the offline backend
    rpm: float | None = None          # pace this role's endpoint below a known limit: requests ...
    tpm: float | None = None          # ... and tokens per minute (roles on one endpoint share it)


@dataclass(frozen=True)
class LLMConfig:
    task: RoleConfig = RoleConfig()
    reflector: RoleConfig = RoleConfig()
    toolkit: RoleConfig = RoleConfig()
    judge: RoleConfig = RoleConfig()
    cache_dir: str | None = ".mstar-cache"    # response cache shared by runs; None = no cache
    max_usd: float | None = None              # hard budgets, checked at iteration boundaries
    max_tokens: int | None = None
    prices: dict = dataclasses.field(default_factory=dict)  # model -> {input, output, cached_input} USD/1M
    max_in_flight: int = 64                   # calls in flight at once, all roles and endpoints together
    rate_limit_patience_s: float = 600.0      # an endpoint that answers only 429 this long stops the run

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
    train_ratio: int | None = None     # training episodes = ratio x static items; 0 = every episode;
                                       # None = the task's own default (LoCoMo: 0), else 5
    compile_fix_attempts: int = 3      # k
    seed: int = 0
    workers: int = 64                  # task-agent calls one evaluation keeps in flight (role limits apply too)
    mode: str = "all"                  # ablation (paper Table 2): "all", "instructions" or "code"
    prompt_budget_tokens: int = 60_000 # reflection prompt budget; optional sections are cut to fit
    embed_model: str = "auto"          # subset-selection embeddings: "auto" (all-MiniLM-L6-v2 if the
                                       # [embed] extra is installed, else hashing), "hashing", or a
                                       # sentence-transformers model name / local path
    embed_cache_dir: str | None = None # on-disk embedding cache (the CLI fills in its default)
    selection: str = "softmax"         # parent selection: "softmax" (paper), "max", "latest" (Table 2)
    parallel: int = 1                  # iterations in flight at once (1 = the paper's loop, reproducible)
    rotating: str = "fresh"            # "fresh": the parent is evaluated on a new rotating batch (paper);
                                       # "reuse": its static-set cases are reused (the official code)
    prefetch: bool = True              # with "fresh", the next batch is evaluated ahead for the likely next
                                       # parents (mstar/iteration/rotating_prefetch.py; needs the response cache)
    guess_worth: float = 4000.0        # ... each guess sent only when the seconds it is likely to save, at this
                                       # many prompt tokens a second, outweigh the tokens it is likely to waste
    keep_sessions: int = 8             # ingested knowledge bases kept alive for the next evaluation
    outage_threshold: float = 0.2      # failed share of an evaluation's LLM calls that stops the run
    executor: str = "local"            # "local" or "ray"
    ray_address: str | None = None     # with executor "ray": "auto", "HOST:PORT", or None = a local Ray
    runtime_fix_rounds: int = 3        # a child that fails at run time in its evaluation is sent back to
                                       # the reflector with the error, up to this many times (paper Fig. 2)
    split_seed: int = 42               # the static set and episodes depend on this, not on `seed`
                                       # (the paper fixes the split and varies the evolution)
    confirm_top: int = 3               # before the test the best programs by static score race on
                                       # paired evidence (mstar/final/champion.py), buying at most ...
    confirm_size: int = 200            # ... this many more validation items (0 = no confirmation),
    confirm_rounds: int = 10           # ... in at most this many batches (1 = one sample),
    confirm_budget: float | None = 0.1 # ... on at most this share of the tokens the run asked before
                                       # (mstar/final/race_budget.py; None: no limit)
    pick: str = "confirmed"            # the champion: "confirmed" (the race's leader) or "static"
    test_both: bool = False            # also test the other rule's choice (a comparison, not the run's need)
    prompts: str = "mstar"             # prompt wording: "mstar" (the project's) or "paper" (Appendix G/H)
    patience: int | None = None        # stop after this many iterations without a significant gain
                                       # over the best program (strategies/stopping.py); None = never


@dataclass(frozen=True)
class SandboxConfig:
    allowed_imports: tuple[str, ...] = tuple(DEFAULT_ALLOWED_IMPORTS)
    call_timeout_s: float = 60.0
    read_max_chars: int = 3000
    memory_mb: int = 1024
    llm_calls_per_op: int = 1
    parallel_reads: int = 32           # reads of one program in flight at once (sandbox.protocol)


@dataclass(frozen=True)
class RunConfig:
    name: str
    task: str = "sample"
    data: str | None = None
    theme: str | None = None           # keep one theme of a rubric task (e.g. emergency_referrals)
    metric: str | None = None          # score with this metric instead of the task's (e.g. llm_judge)
    task_options: dict = dataclasses.field(default_factory=dict)  # a loader's own options, e.g.
                                       # the sample's size and sample_seed, ALFWorld's split
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
        rebuilt["llm"] = LLMConfig(**{k: (RoleConfig(**v) if k in ROLES else v) for k, v in llm.items()})
        rebuilt["evolution"] = EvolutionConfig(**data.get("evolution", {}))
        sb = dict(data.get("sandbox", {}))
        if "allowed_imports" in sb:
            sb["allowed_imports"] = tuple(sb["allowed_imports"])
        rebuilt["sandbox"] = SandboxConfig(**sb)
        if "seeds" in rebuilt:
            rebuilt["seeds"] = tuple(rebuilt["seeds"])
        return cls(**rebuilt)

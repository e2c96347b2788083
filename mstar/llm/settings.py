"""The LLM part of the configuration: a TOML file, command-line overrides, validation.

    [llm]
    cache_dir = ".mstar-cache"       # response cache shared by runs ("" = none)
    max_usd = 5.0                    # hard budgets (also --max-usd / --max-tokens)
    max_tokens = 2_000_000
    max_in_flight = 64               # calls out at once, all roles together (--max-in-flight)
    rate_limit_patience_s = 600      # only 429s this long: the run stops, resumable

    [llm.defaults]                   # every role starts from these ...
    backend = "openai"               # (a table that names a model or base_url means "openai")
    base_url = "http://localhost:8000/v1"
    model = "qwen2.5-7b-instruct"

    [llm.reflector]                  # ... and a role's own table overrides them
    model = "o4-mini"
    reasoning_effort = "medium"
    concurrency = 1

    [llm.task]
    rpm = 500                        # pace below a known limit (--rpm / --tpm set it for every role)

    [llm.prices."o4-mini"]           # USD per million tokens
    input = 1.10
    output = 4.40
    cached_input = 0.275

Precedence, lowest first: built-in defaults, the file, the flags --base-url /
--model / --reflector-model / --api-key-env / --offline-role, then each
`--llm role.key=value`, then --max-usd / --max-tokens / --cache-dir / --no-cache /
--max-in-flight / --rpm / --tpm / --rate-limit-patience.
A role whose tables name a `model` (other than "offline") or a `base_url` but no `backend` is
served by "openai", as --model and --base-url would serve it.
Keys are never read from a file: a role names the environment variable that
holds its key (`api_key_env`), and only that name is written to a run. A variable named
(--api-key-env, or api_key_env in the file) must be set; without one a role with a base_url
sends no key (local servers need none), and OPENAI_API_KEY is read when it is set.
"""
from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Mapping, Sequence

from mstar.config import ROLES, LLMConfig, RoleConfig
from mstar.llm.prices import price_from_dict
from mstar.llm.types import LLMError

ROLE_KEYS = tuple(f.name for f in dataclasses.fields(RoleConfig))
TOP_KEYS = ("cache_dir", "max_usd", "max_tokens", "prices", "defaults", "max_in_flight",
            "rate_limit_patience_s") + ROLES
SECRET_KEYS = re.compile(r"^(api[_-]?key|key|secret|token|password|bearer)$", re.I)
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SCHEME = re.compile(r"^https?://", re.I)


class ConfigError(ValueError, LLMError):
    """A configuration that cannot be used; the message names the key and the fix.
    (Also an LLMError, so commands that report LLM set-up errors report this one too.)"""


def load_config_file(path: str | Path) -> dict:
    """The [llm] table of a TOML config file (a copy, safe to modify)."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {p} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {p} is not valid TOML: {exc}{_table_at(p, str(exc))}") from None
    unknown = sorted(set(data) - {"llm"})
    if unknown:
        raise ConfigError(f"config file {p}: unknown table(s) {unknown}; this file configures [llm] "
                          "(roles, cache, budgets, prices)")
    table = data.get("llm", {})
    if not isinstance(table, dict):
        raise ConfigError(f"config file {p}: 'llm' must be a table")
    return _copy(table)


_AT_LINE = re.compile(r"at line (\d+)")
_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _table_at(path: Path, message: str) -> str:
    """", in table [llm.reflector]" for the line a TOML error names (the last header above it)."""
    m = _AT_LINE.search(message)
    if not m:
        return ""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    table = None
    for line in lines[: int(m.group(1))]:
        h = _HEADER.match(line)
        if h:
            table = h.group(1)
    return f", in table [{table}]" if table else ", before the first table (top level)"


def _copy(table: dict) -> dict:
    return {k: _copy(v) if isinstance(v, dict) else v for k, v in table.items()}


def parse_value(raw: str) -> Any:
    """A TOML value when it parses as one (0.2, 16, true, "x"), else the plain string."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def apply_override(table: dict, assignment: str) -> None:
    """`--llm reflector.model=o4-mini`, `--llm defaults.concurrency=8`, `--llm max_usd=3`."""
    if "=" not in assignment:
        raise ConfigError(f"--llm {assignment!r}: expected KEY=VALUE, e.g. reflector.model=gpt-4.1")
    path, raw = assignment.split("=", 1)
    keys = _dotted_keys(path)
    if not all(keys):
        raise ConfigError(f"--llm {assignment!r}: empty key")
    node = table
    for k in keys[:-1]:
        node = node.setdefault(k, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--llm {assignment!r}: {k!r} is not a table")
    node[keys[-1]] = parse_value(raw.strip())


def _dotted_keys(path: str) -> list[str]:
    """`prices."qwen2.5-7b".input` -> ['prices', 'qwen2.5-7b', 'input']: TOML's dotted keys, so
    that a model name with dots can be quoted (split on every dot, it made a table per dot)."""
    try:
        node, keys = tomllib.loads(f"{path} = 0"), []
        while isinstance(node, dict) and len(node) == 1:
            (key, node), = node.items()
            keys.append(key)
        return keys
    except tomllib.TOMLDecodeError:
        return [k.strip() for k in path.strip().split(".")]


def llm_config_from_table(table: dict) -> LLMConfig:
    """Validate the [llm] table and build the frozen config from it."""
    unknown = sorted(set(table) - set(TOP_KEYS))
    if unknown:
        raise ConfigError(f"[llm]: unknown key(s) {unknown}; known: {', '.join(TOP_KEYS)}")
    defaults = _role_table(table.get("defaults", {}), "defaults")
    roles = {}
    for role in ROLES:
        own = _role_table(table.get(role, {}), role)
        merged = {**defaults, **own, "backend": _backend(defaults, own)}
        # An error names the table the value was written in, not the role it reached.
        roles[role] = _check_role(RoleConfig(**merged), lambda key, own=own, role=role:
                                  role if key in own or key not in defaults else "defaults")
    prices = table.get("prices", {})
    if not isinstance(prices, dict):
        raise ConfigError("[llm.prices] must be a table of models")
    for model, p in prices.items():
        if not isinstance(p, dict):
            raise ConfigError(f"[llm.prices.{model!r}] must be a table with input and output")
        try:
            price_from_dict(model, p)
        except ValueError as exc:
            raise ConfigError(f"[llm.prices]: {exc}") from None
    cache_dir = table.get("cache_dir", LLMConfig.cache_dir)
    max_usd, max_tokens = table.get("max_usd"), table.get("max_tokens")
    if max_usd is not None and (isinstance(max_usd, bool) or not isinstance(max_usd, (int, float)) or max_usd <= 0):
        raise ConfigError(f"max_usd must be a positive number of dollars, got {max_usd!r}")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0):
        raise ConfigError(f"max_tokens must be a positive whole number, got {max_tokens!r}")
    in_flight = table.get("max_in_flight", LLMConfig.max_in_flight)
    if isinstance(in_flight, bool) or not isinstance(in_flight, int) or in_flight < 1:
        raise ConfigError(f"max_in_flight must be a whole number >= 1, got {in_flight!r}")
    patience = table.get("rate_limit_patience_s", LLMConfig.rate_limit_patience_s)
    if isinstance(patience, bool) or not isinstance(patience, (int, float)) or not patience > 0:
        raise ConfigError(f"rate_limit_patience_s must be a positive number of seconds, got {patience!r}")
    return LLMConfig(**roles, cache_dir=cache_dir or None, max_usd=float(max_usd) if max_usd is not None else None,
                     max_tokens=max_tokens, prices={m: dict(p) for m, p in prices.items()},
                     max_in_flight=in_flight, rate_limit_patience_s=float(patience))


def _role_table(t: Any, where: str) -> dict:
    if not isinstance(t, dict):
        raise ConfigError(f"[llm.{where}] must be a table")
    for k in t:
        if SECRET_KEYS.match(k):
            raise ConfigError(f"[llm.{where}] {k}: keys are never read from a config file; put the key in an "
                              "environment variable and name that variable with api_key_env")
    unknown = sorted(set(t) - set(ROLE_KEYS))
    if unknown:
        raise ConfigError(f"[llm.{where}]: unknown key(s) {unknown}; known: {', '.join(ROLE_KEYS)}")
    return t


def _backend(defaults: dict, own: dict) -> str:
    """The role's backend as written, else "openai" when its tables name a model or an endpoint
    (as --model and --base-url do: a file with both but no backend line ran offline, silently)."""
    merged = {**defaults, **own}
    if "backend" in merged:
        return merged["backend"]
    named = "base_url" in merged or merged.get("model", "offline") != "offline"
    return "openai" if named else RoleConfig.backend


def _check_role(rc: RoleConfig, table_of) -> RoleConfig:
    def bad(key, why):
        return ConfigError(f"[llm.{table_of(key)}] {key} = {getattr(rc, key)!r}: {why}")

    if rc.backend not in ("offline", "openai", "command"):
        raise bad("backend", "use offline, openai or command")
    if not isinstance(rc.api_key_env, str) or not ENV_NAME.match(rc.api_key_env):
        raise bad("api_key_env", "must be the NAME of an environment variable (e.g. OPENAI_API_KEY), not a key")
    for key in ("concurrency", "max_retries"):
        v = getattr(rc, key)
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if key == "concurrency" else 0):
            raise bad(key, "must be a whole number" + (" >= 1" if key == "concurrency" else " >= 0"))
    for key in ("timeout_s", "backoff_s"):
        v = getattr(rc, key)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or (key == "timeout_s" and v == 0):
            raise bad(key, "must be a positive number of seconds")
    if rc.temperature is not None and (isinstance(rc.temperature, bool) or not isinstance(rc.temperature, (int, float))):
        raise bad("temperature", "must be a number")
    if rc.max_tokens is not None and (isinstance(rc.max_tokens, bool) or not isinstance(rc.max_tokens, int)
                                      or rc.max_tokens < 1):
        raise bad("max_tokens", "must be a whole number >= 1")
    if rc.cache not in ("auto", "reuse", "replay", "off"):
        raise bad("cache", "use auto, reuse, replay or off")
    for key in ("rpm", "tpm"):
        v = getattr(rc, key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0):
            raise bad(key, "must be a positive number per minute")
    if rc.backend == "command" and not (isinstance(rc.command, str) and rc.command.strip()):
        raise bad("command", "backend 'command' needs the command line that serves the role")
    if rc.base_url is not None and not (isinstance(rc.base_url, str) and SCHEME.match(rc.base_url)):
        raise bad("base_url", f"the URL needs http:// or https://, e.g. http://{rc.base_url}")
    return rc


def resolve_llm_config(config_file: str | None = None, *, base_url: str | None = None, model: str | None = None,
                       reflector_model: str | None = None, api_key_env: str | None = None,
                       offline_roles: Sequence[str] = (), overrides: Sequence[str] = (),
                       max_usd: float | None = None, max_tokens: int | None = None,
                       cache_dir: str | None = None, no_cache: bool = False, max_in_flight: int | None = None,
                       rpm: float | None = None, tpm: float | None = None,
                       rate_limit_patience_s: float | None = None, env: Mapping[str, str] | None = None
                       ) -> LLMConfig:
    """Everything the command line says about the LLM roles, as one frozen config. `env`: where
    the key variables are looked up (default os.environ)."""
    if base_url and not SCHEME.match(base_url):   # else it fails its retries as "nothing answers there"
        raise ConfigError(f"--base-url {base_url}: the URL needs http:// or https://, e.g. http://{base_url}")
    table = load_config_file(config_file) if config_file else {}
    if base_url or model:
        # The quick path: one endpoint (or OpenAI) for every role not kept offline.
        for role in ROLES:
            rt = table.setdefault(role, {})
            rt["backend"] = "openai"
            if base_url:
                rt["base_url"] = base_url
            if model and role != "reflector":
                rt["model"] = model
            elif role == "reflector" and reflector_model:
                rt["model"] = reflector_model
            elif role == "reflector" and model and "model" not in rt:
                rt["model"] = model      # --model covers the reflector unless the file names its own
            rt.setdefault("model", table.get("defaults", {}).get("model", "gpt-4o-mini"))
    elif reflector_model:
        # Without --base-url/--model it only means something when the file serves the reflector.
        if _backend(table.get("defaults", {}), table.get("reflector", {})) != "offline":
            table.setdefault("reflector", {})["model"] = reflector_model
    if api_key_env:   # with a file too: a flag wins over the file
        for role in ROLES:
            table.setdefault(role, {})["api_key_env"] = api_key_env
    for role in offline_roles:
        table[role] = {"backend": "offline", "model": "offline"}
    for assignment in overrides:
        apply_override(table, assignment)
    if max_usd is not None:
        table["max_usd"] = max_usd
    if max_tokens is not None:
        table["max_tokens"] = max_tokens
    if cache_dir is not None:
        table["cache_dir"] = cache_dir
    if no_cache:
        table["cache_dir"] = None
    if max_in_flight is not None:
        table["max_in_flight"] = max_in_flight
    if rate_limit_patience_s is not None:
        table["rate_limit_patience_s"] = rate_limit_patience_s
    for key, value in (("rpm", rpm), ("tpm", tpm)):
        if value is not None:   # every role: roles that share an endpoint share its pace
            for role in ROLES:
                table.setdefault(role, {})[key] = value
    try:
        cfg = llm_config_from_table(table)
    except ConfigError as exc:
        if not config_file:
            raise
        also = " (with the --llm overrides)" if overrides else ""
        raise ConfigError(f"config file {config_file}{also}: {exc}") from None
    _check_keys(cfg, table, api_key_env, os.environ if env is None else env)
    return cfg


def _check_keys(cfg: LLMConfig, table: dict, flag: str | None, env: Mapping[str, str]) -> None:
    """A key variable named on purpose must be set. (Unnamed, a role with a base_url sends no key,
    for local servers; named and unset, the placeholder key met a 401 that blamed the key.)"""
    for role in ROLES:
        rc, own, defaults = cfg.role(role), table.get(role, {}), table.get("defaults", {})
        if rc.backend != "openai" or env.get(rc.api_key_env) or "api_key_env" not in {**defaults, **own}:
            continue
        named_by = "--api-key-env" if rc.api_key_env == flag else \
            f"api_key_env in [llm.{role if 'api_key_env' in own else 'defaults'}]"
        raise ConfigError(f"{rc.api_key_env} is not set: export the key in it, or drop {named_by} "
                          "for a server that needs no key")

"""The LLM options every command that calls a model shares (evolve, eval, baselines, serve,
memory) and `mstar.evolve` takes as keywords (base_url=, model=, llm_overrides=[...], ...): which
backend and model serve each role, the config file and overrides, the response cache, and how
calls meet an endpoint (--max-in-flight, --rpm / --tpm, --rate-limit-patience).
mstar/llm/settings.py turns them into one frozen LLMConfig."""
from __future__ import annotations

import argparse
import os

from mstar.config import ROLES, LLMConfig


def add_llm_args(p: argparse.ArgumentParser) -> None:
    """Which backend and model serve each role, and how calls meet the endpoints."""
    p.add_argument("--base-url", default=os.environ.get("MSTAR_BASE_URL"),
                   help="OpenAI-compatible endpoint for every role, http:// or https:// (env MSTAR_BASE_URL); "
                        "without it, without --model and without a --config file that names a model, the "
                        "offline backend serves all roles")
    p.add_argument("--model", default=os.environ.get("MSTAR_MODEL"),
                   help="model for the task, toolkit and judge roles (env MSTAR_MODEL)")
    p.add_argument("--reflector-model", default=os.environ.get("MSTAR_REFLECTOR_MODEL"),
                   help="model for the reflector role (default: --model)")
    p.add_argument("--api-key-env", default=None, metavar="NAME",
                   help="environment variable that holds the API key; one named here must be set (default "
                        "OPENAI_API_KEY, which a --base-url server that needs no key may go without)")
    p.add_argument("--offline-role", action="append", default=[], choices=ROLES,
                   help="serve this role with the offline backend even when an endpoint is set (repeatable)")
    p.add_argument("--config", default=None, metavar="FILE",
                   help="TOML file with the LLM roles, cache, budgets and prices (see README)")
    p.add_argument("--llm", dest="llm_overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override one LLM setting, e.g. reflector.model=o4-mini, task.concurrency=32, "
                        "defaults.timeout_s=60, or a model's price: 'prices.MODEL={input=0.2,output=0.6}' "
                        "(USD per million tokens; quote a name with dots: prices.\"qwen2.5-7b\"=...) (repeatable)")
    p.add_argument("--cache-dir", default=None, help="response cache folder, shared by runs (default .mstar-cache)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the response cache")
    p.add_argument("--max-in-flight", type=int, default=None, metavar="N",
                   help="LLM calls in flight at once, all roles and endpoints together (default 64)")
    p.add_argument("--rpm", type=float, default=None, metavar="N",
                   help="pace each endpoint below N requests per minute (a known rate limit; 429s are "
                        "handled without it)")
    p.add_argument("--tpm", type=float, default=None, metavar="N", help="... and below N tokens per minute")
    p.add_argument("--rate-limit-patience", type=float, default=None, metavar="S",
                   help="stop the run (resumable) when an endpoint has answered only 429 for S seconds "
                        "(default 600)")


def resolve_llm(args) -> LLMConfig:
    """Offline unless a config file, an endpoint or a model says otherwise (mstar/llm/settings.py);
    secrets stay in the environment."""
    from mstar.llm.settings import resolve_llm_config
    return resolve_llm_config(
        getattr(args, "config", None), base_url=args.base_url, model=args.model,
        reflector_model=args.reflector_model, api_key_env=args.api_key_env, offline_roles=args.offline_role,
        overrides=getattr(args, "llm_overrides", None) or [], max_usd=getattr(args, "max_usd", None),
        max_tokens=getattr(args, "max_tokens", None), cache_dir=getattr(args, "cache_dir", None),
        no_cache=getattr(args, "no_cache", False), max_in_flight=getattr(args, "max_in_flight", None),
        rpm=getattr(args, "rpm", None), tpm=getattr(args, "tpm", None),
        rate_limit_patience_s=getattr(args, "rate_limit_patience", None))


def check_llm_numbers(args) -> str | None:
    """The LLM pacing flags (shared by every command that takes add_llm_args)."""
    value = getattr(args, "max_in_flight", None)
    if value is not None and value < 1:
        return f"--max-in-flight {value}: give 1 or more calls in flight"
    for flag, what in (("rpm", "requests"), ("tpm", "tokens"), ("rate_limit_patience", "seconds")):
        value = getattr(args, flag, None)
        if value is not None and not value > 0:   # also NaN
            unit = "seconds" if what == "seconds" else f"{what} per minute"
            return f"--{flag.replace('_', '-')} {value}: give a number of {unit} above 0"
    return None


def paced_line(cfg) -> str:
    """The '; paced below N requests/min' part of the start-up line, for the roles' --rpm / --tpm."""
    rpm = {cfg.llm.role(r).rpm for r in ROLES} - {None}
    tpm = {cfg.llm.role(r).tpm for r in ROLES} - {None}
    return "".join(f"; paced below {min(v):g} {unit}/min" for v, unit in ((rpm, "requests"), (tpm, "tokens")) if v)

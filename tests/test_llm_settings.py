"""The LLM configuration: TOML file, overrides and flags, validation, and what reaches config.json."""
import argparse

import pytest

from mstar.commands.evolve import add_evolve_args, resolve_config
from mstar.config import RunConfig
from mstar.llm.router import LLMRouter
from mstar.llm.settings import ConfigError, apply_override, load_config_file, resolve_llm_config

FILE = """
[llm]
max_usd = 4.5
cache_dir = "my-cache"

[llm.defaults]
backend = "openai"
base_url = "http://localhost:9/v1"
model = "gpt-4o-mini"
concurrency = 8
timeout_s = 30

[llm.reflector]
model = "o4-mini"
reasoning_effort = "medium"
max_tokens = 16000
concurrency = 1
api_key_env = "REFLECTOR_KEY"

[llm.judge]
backend = "offline"
model = "offline"

[llm.prices."my-model"]
input = 0.5
output = 1.5
"""


def write(tmp_path, text, name="mstar.toml"):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_file_defaults_role_tables_and_prices(tmp_path):
    cfg = resolve_llm_config(write(tmp_path, FILE))
    assert cfg.task.backend == "openai" and cfg.task.model == "gpt-4o-mini" and cfg.task.concurrency == 8
    r = cfg.reflector
    assert (r.model, r.reasoning_effort, r.max_tokens, r.concurrency, r.timeout_s) == ("o4-mini", "medium", 16000, 1, 30)
    assert r.api_key_env == "REFLECTOR_KEY" and r.base_url == "http://localhost:9/v1"
    assert cfg.judge.backend == "offline"
    assert cfg.max_usd == 4.5 and cfg.cache_dir == "my-cache"
    assert cfg.prices == {"my-model": {"input": 0.5, "output": 1.5}}


def test_flags_and_overrides_win_over_the_file(tmp_path):
    cfg = resolve_llm_config(write(tmp_path, FILE), model="gpt-4.1-mini", offline_roles=["toolkit"],
                             overrides=["reflector.temperature=0.7", "task.concurrency=32", "defaults.timeout_s=5"],
                             max_tokens=1000, no_cache=True)
    assert cfg.task.model == "gpt-4.1-mini" and cfg.task.concurrency == 32 and cfg.task.timeout_s == 5
    assert cfg.reflector.model == "o4-mini"        # the file names the reflector's own model
    assert cfg.reflector.temperature == 0.7 and cfg.toolkit.backend == "offline"
    assert cfg.max_tokens == 1000 and cfg.cache_dir is None


def test_quick_path_without_a_file_matches_the_old_flags():
    cfg = resolve_llm_config(None, base_url="http://h/v1", model="qwen", reflector_model="big", api_key_env="K")
    assert all(cfg.role(r).backend == "openai" and cfg.role(r).base_url == "http://h/v1" for r in
               ("task", "reflector", "toolkit", "judge"))
    assert cfg.task.model == "qwen" and cfg.reflector.model == "big" and cfg.judge.api_key_env == "K"
    assert resolve_llm_config(None, model="qwen").reflector.model == "qwen"
    assert resolve_llm_config(None).task.backend == "offline"


@pytest.mark.parametrize("text,message", [
    ('[llm.task]\napi_key = "sk-123"', "never read from a config file"),
    ('[llm.task]\napi_key_env = "sk-proj-abc123"', "NAME of an environment variable"),
    ('[llm.task]\nmodle = "x"', "unknown key"),
    ('[llm.critic]\nmodel = "x"', "unknown key"),
    ('[evolution]\niterations = 3', "unknown table"),
    ('[llm.task]\nconcurrency = 0', "concurrency"),
    ('[llm.task]\nbackend = "anthropic"', "use offline, openai or command"),
    ('[llm.task]\nbackend = "command"', "needs the command line"),
    ('[llm]\nmax_usd = -1', "max_usd"),
    ('[llm.prices.m]\ninput = 1', "missing"),
    ('[llm\nbroken', "not valid TOML"),
])
def test_bad_config_is_named(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        resolve_llm_config(write(tmp_path, text))


def test_missing_file_and_bad_override_are_named(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config_file(tmp_path / "nope.toml")
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        apply_override({}, "reflector.model")
    t = {}
    apply_override(t, "reflector.command=python my agent.py --flag")
    apply_override(t, "task.max_tokens=256")
    assert t == {"reflector": {"command": "python my agent.py --flag"}, "task": {"max_tokens": 256}}


def test_config_json_keeps_the_variable_name_not_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("REFLECTOR_KEY", "sk-secret-value-123")
    p = argparse.ArgumentParser()
    add_evolve_args(p)
    args = p.parse_args(["--config", write(tmp_path, FILE), "--out", str(tmp_path / "run"), "--max-usd", "2"])
    cfg = resolve_config(args)
    blob = repr(cfg.to_dict())
    assert "REFLECTOR_KEY" in blob and "sk-secret" not in blob
    assert RunConfig.from_dict(cfg.to_dict()) == cfg          # a run's config.json reads back (resume)
    assert cfg.llm.max_usd == 2.0


def test_max_usd_needs_a_price_for_every_paid_model(tmp_path):
    with pytest.raises(Exception, match="needs a price for model 'local-llama'"):
        LLMRouter.from_config(resolve_llm_config(None, base_url="http://h/v1", model="local-llama", max_usd=1.0,
                                                 no_cache=True), env={})
    cfg = resolve_llm_config(None, base_url="http://h/v1", model="local-llama", max_usd=1.0, no_cache=True,
                             overrides=["prices.local-llama.input=0", "prices.local-llama.output=0"])
    assert LLMRouter.from_config(cfg, env={}).ledger.budget.max_usd == 1.0

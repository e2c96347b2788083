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


def test_file_defaults_role_tables_and_prices(tmp_path, monkeypatch):
    monkeypatch.setenv("REFLECTOR_KEY", "k")      # the file names it: it must be set
    cfg = resolve_llm_config(write(tmp_path, FILE))
    assert cfg.task.backend == "openai" and cfg.task.model == "gpt-4o-mini" and cfg.task.concurrency == 8
    r = cfg.reflector
    assert (r.model, r.reasoning_effort, r.max_tokens, r.concurrency, r.timeout_s) == ("o4-mini", "medium", 16000, 1, 30)
    assert r.api_key_env == "REFLECTOR_KEY" and r.base_url == "http://localhost:9/v1"
    assert cfg.judge.backend == "offline"
    assert cfg.max_usd == 4.5 and cfg.cache_dir == "my-cache"
    assert cfg.prices == {"my-model": {"input": 0.5, "output": 1.5}}


def test_flags_and_overrides_win_over_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("REFLECTOR_KEY", "k")
    cfg = resolve_llm_config(write(tmp_path, FILE), model="gpt-4.1-mini", offline_roles=["toolkit"],
                             overrides=["reflector.temperature=0.7", "task.concurrency=32", "defaults.timeout_s=5"],
                             max_tokens=1000, no_cache=True)
    assert cfg.task.model == "gpt-4.1-mini" and cfg.task.concurrency == 32 and cfg.task.timeout_s == 5
    assert cfg.reflector.model == "o4-mini"        # the file names the reflector's own model
    assert cfg.reflector.temperature == 0.7 and cfg.toolkit.backend == "offline"
    assert cfg.max_tokens == 1000 and cfg.cache_dir is None


def test_quick_path_without_a_file_matches_the_old_flags():
    cfg = resolve_llm_config(None, base_url="http://h/v1", model="qwen", reflector_model="big", api_key_env="K",
                             env={"K": "k"})
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


# ------------------------------------------------------------------ what a newcomer writes first
ENDPOINT_FILE = """
[llm.defaults]
model = "qwen2.5-7b-instruct"
base_url = "http://127.0.0.1:9/v1"
"""


def test_a_file_that_names_a_model_and_endpoint_serves_them_as_the_flags_would(tmp_path):
    # No backend line: it ran offline, silently, while the offline note said "give --model".
    cfg = resolve_llm_config(write(tmp_path, ENDPOINT_FILE))
    flags = resolve_llm_config(None, base_url="http://127.0.0.1:9/v1", model="qwen2.5-7b-instruct")
    for role in ("task", "reflector", "toolkit", "judge"):
        assert (cfg.role(role).backend, cfg.role(role).model, cfg.role(role).base_url) == \
            (flags.role(role).backend, flags.role(role).model, flags.role(role).base_url)
    assert cfg.task.backend == "openai"
    kept = resolve_llm_config(write(tmp_path, ENDPOINT_FILE + '[llm.judge]\nbackend = "offline"\n'))
    assert kept.judge.backend == "offline" and kept.task.backend == "openai"
    only_reflector = resolve_llm_config(write(tmp_path, '[llm.reflector]\nmodel = "o4-mini"\n'))
    assert only_reflector.reflector.backend == "openai" and only_reflector.task.backend == "offline"
    # --reflector-model alone reaches a reflector the file serves without saying "openai"
    assert resolve_llm_config(write(tmp_path, ENDPOINT_FILE), reflector_model="big").reflector.model == "big"


@pytest.mark.parametrize("table,key,value", [
    ("defaults", "concurrency", '"sixteen"'), ("defaults", "timeout_s", '"120s"'), ("task", "max_retries", "-1"),
])
def test_a_bad_value_is_reported_in_the_table_it_was_written_in(tmp_path, table, key, value):
    path = write(tmp_path, f'[llm.{table}]\nbackend = "openai"\n{key} = {value}\n')
    with pytest.raises(ConfigError) as info:
        resolve_llm_config(path)
    assert f"[llm.{table}] {key} = " in str(info.value)
    assert (f"[llm.task] {key}" not in str(info.value)) == (table == "defaults")


def test_a_named_key_variable_must_be_set(tmp_path):
    with pytest.raises(ConfigError) as info:
        resolve_llm_config(None, base_url="http://127.0.0.1:9/v1", model="m", api_key_env="TOGETHER_API_KEY",
                           env={})
    assert str(info.value).startswith("TOGETHER_API_KEY is not set:") and "--api-key-env" in str(info.value)
    with pytest.raises(ConfigError, match=r"^OPENAI_API_KEY is not set: .*api_key_env in \[llm.defaults\]"):
        resolve_llm_config(write(tmp_path, ENDPOINT_FILE + 'api_key_env = "OPENAI_API_KEY"\n'), env={})
    # A local server needs no key when none was named; a named one that is set, or offline roles, pass.
    assert resolve_llm_config(None, base_url="http://127.0.0.1:9/v1", model="m", env={}).task.backend == "openai"
    assert resolve_llm_config(None, base_url="http://h/v1", model="m", api_key_env="K", env={"K": "k"})
    assert resolve_llm_config(None, api_key_env="K", env={}).task.backend == "offline"
    # The flag reaches roles a file serves too (it was dropped without --base-url / --model).
    assert resolve_llm_config(write(tmp_path, ENDPOINT_FILE), api_key_env="K", env={"K": "k"}).judge.api_key_env == "K"


def test_a_base_url_without_a_scheme_is_refused_at_once(tmp_path):
    with pytest.raises(ConfigError, match=r"^--base-url localhost:18431: the URL needs http:// or https://, "
                                          r"e.g. http://localhost:18431$"):
        resolve_llm_config(None, base_url="localhost:18431", model="m")
    with pytest.raises(ConfigError, match=r"\[llm.defaults\] base_url = 'localhost:9/v1': the URL needs http://"):
        resolve_llm_config(write(tmp_path, '[llm.defaults]\nbase_url = "localhost:9/v1"\n'))
    assert resolve_llm_config(None, base_url="HTTPS://h/v1", model="m").task.base_url == "HTTPS://h/v1"


def test_a_price_on_the_command_line_for_a_model_name_with_dots(tmp_path):
    with pytest.raises(Exception) as info:
        LLMRouter.from_config(resolve_llm_config(None, base_url="http://h/v1", model="qwen2.5-7b", max_usd=1.0,
                                                 no_cache=True), env={})
    message = str(info.value)
    suggested = message.split("--llm '")[1].split("'")[0]    # the override the error suggests, as written
    assert "--config file" in message and suggested == 'prices."qwen2.5-7b"={input=0.2,output=0.6}'
    cfg = resolve_llm_config(None, base_url="http://h/v1", model="qwen2.5-7b", max_usd=1.0, no_cache=True,
                             overrides=[suggested])
    assert cfg.prices == {"qwen2.5-7b": {"input": 0.2, "output": 0.6}}
    assert LLMRouter.from_config(cfg, env={}).ledger.budget.max_usd == 1.0

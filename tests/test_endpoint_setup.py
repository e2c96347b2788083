"""What a newcomer meets first when pointing mstar at an endpoint: a config file without a backend
line, a key variable that is not set, a base URL without its scheme, a model with no price, and
what `mstar lineage` and `mstar eval` say of a run. Against the project's fake server (the real
`openai` client on loopback)."""
from __future__ import annotations

import json
import time

import pytest

from failure_helpers import SMALL, endpoint, error_lines
from mstar.cli import main
from mstar.library.exits import _mark_interrupted
from mstar.run.store import RunStore
from mstar.testing.fake_server import FakeOpenAIServer, HTTPErrorReply, offline_responder


def deny(status, message):
    def respond(model, messages):
        raise HTTPErrorReply(status, message)
    return respond


@pytest.fixture(scope="module")
def server():
    with FakeOpenAIServer(offline_responder()) as srv:
        yield srv


@pytest.fixture(scope="module")
def stopped_run(server, tmp_path_factory):
    """A run on the fake server under a model with no price, with no key in the environment (a
    local server needs none), stopped by its --max-tokens after one iteration."""
    tmp = tmp_path_factory.mktemp("stopped")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("OPENAI_API_KEY", raising=False)
        rc = main(["evolve", *SMALL, "--iterations", "2", "--max-tokens", "20000", "--out", str(tmp / "run"),
                   "--quiet", *endpoint(server.base_url, tmp / "cache", model="qwen-local")])
    assert rc == 0
    return tmp / "run"


def test_a_config_file_with_a_model_and_base_url_serves_them(server, tmp_path, capsys):
    config = tmp_path / "mstar.toml"
    config.write_text(f'[llm.defaults]\nmodel = "qwen-local"\nbase_url = "{server.base_url}"\n')
    before = len(server.requests)
    rc = main(["evolve", *SMALL, "--iterations", "0", "--config", str(config), "--no-cache",
               "--out", str(tmp_path / "run")])
    out = capsys.readouterr().out
    assert rc == 0
    assert f"llm     task       openai:qwen-local @ {server.base_url}" in out
    assert "offline" not in out and len(server.requests) > before     # the endpoint answered, not a stand-in


def test_a_named_key_variable_that_is_not_set_is_one_line_before_anything_runs(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TOGETHER_API_KEY", raising=False)
    with FakeOpenAIServer(deny(401, "Invalid authentication")) as srv:
        rc = main(["evolve", *SMALL, "--out", str(tmp_path / "run"), "--api-key-env", "TOGETHER_API_KEY",
                   *endpoint(srv.base_url, None)])
        requests = list(srv.requests)
    lines = error_lines(capsys.readouterr().err)
    assert rc == 2 and len(lines) == 1, lines
    assert lines[0].startswith("mstar: TOGETHER_API_KEY is not set")
    assert requests == [] and not (tmp_path / "run").exists()


def test_a_401_after_no_key_was_sent_says_the_variable_is_not_set(tmp_path, capsys, monkeypatch):
    # No variable named, OPENAI_API_KEY unset: the placeholder goes to a server that wants a key.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeOpenAIServer(deny(401, "Invalid authentication")) as srv:
        rc = main(["evolve", *SMALL, "--out", str(tmp_path / "run"), *endpoint(srv.base_url, None)])
    [line] = error_lines(capsys.readouterr().err)
    assert rc == 3 and "authentication failed -- $OPENAI_API_KEY is not set, so no key was sent" in line
    assert "check the key" not in line


def test_a_base_url_without_a_scheme_is_refused_at_once(tmp_path, capsys):
    start = time.monotonic()
    rc = main(["evolve", *SMALL, "--out", str(tmp_path / "run"), "--base-url", "localhost:18431", "--model", "q"])
    [line] = error_lines(capsys.readouterr().err)
    assert rc == 2 and time.monotonic() - start < 5 and not (tmp_path / "run").exists()
    assert line == "mstar: --base-url localhost:18431: the URL needs http:// or https://, e.g. http://localhost:18431"


def test_a_stopped_run_says_once_how_it_goes_on_and_a_resume_warns_of_a_price_once(stopped_run, capsys):
    assert main(["lineage", str(stopped_run)]) == 0
    out = capsys.readouterr().out
    assert out.count("mstar resume") == 1 and f"`mstar resume {stopped_run} --max-tokens LARGER` continues it" in out
    _mark_interrupted(RunStore(stopped_run), "Ctrl-C")      # as a Ctrl-C leaves a run
    assert main(["lineage", str(stopped_run)]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("stopped"))
    assert line.endswith(f"interrupted (Ctrl-C); `mstar resume {stopped_run}` continues it")
    assert line.count("mstar resume") == 1
    assert main(["report", str(stopped_run)]) == 0
    page = (stopped_run / "report.html").read_text()
    assert page.count("continues it") == 1 and f"(mstar resume {stopped_run} continues it)" in page
    capsys.readouterr()

    assert main(["resume", str(stopped_run), "--max-tokens", "10000000", "--quiet"]) == 0
    warnings = [l for l in capsys.readouterr().err.splitlines() if "no price for model" in l]
    assert len(warnings) == 1, warnings            # the preflight's router and the run's said it each
    assert "--llm 'prices.qwen-local={input=0.2,output=0.6}'" in warnings[0] and "--config file" in warnings[0]


def test_eval_of_a_run_says_who_served_it_and_what_differs_from_the_run(stopped_run, server, capsys):
    # The run: --size 0.3 on the fake server. Here: offline, and another sample seed.
    rc = main(["eval", str(stopped_run), "--task", "sample", "--size", "0.3", "--sample-seed", "1",
               "--split", "validation"])
    out, err = capsys.readouterr()
    assert rc == 0
    assert "llm     task       offline:offline-task" in out and "llm     judge      offline:offline-judge" in out
    [warning] = [l for l in err.splitlines() if l.strip()]
    assert warning.startswith(f"mstar: warning: not the conditions of run {stopped_run}: ")
    assert "--sample-seed 1 (the run: not given)" in warning
    assert "task, toolkit, judge roles offline (the run: openai:qwen-local)" in warning

    rc = main(["eval", str(stopped_run), "--task", "sample", "--size", "0.3", "--split", "validation", "--json",
               *endpoint(server.base_url, None, model="qwen-local")])
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert rc == 0 and "warning" not in err and data["differs_from_run"] == []
    assert data["models"]["task"] == {"backend": "openai", "model": "qwen-local", "base_url": server.base_url}
    assert set(data["models"]) == {"task", "toolkit", "judge"}

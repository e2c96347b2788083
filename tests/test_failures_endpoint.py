"""Issue 13, errors no retry can fix: a wrong key (401), an unknown model (404, or a server that
says so with a 500), a key revoked while the run goes. Each stops the run at once with one line
naming the role, model, base URL and what to fix, an exit code that is not 0, and -- when the
preflight catches it -- before any run folder or seed evaluation exists."""
import json
import re
from collections import Counter
import threading
from pathlib import Path

import pytest

from failure_helpers import SMALL, endpoint, error_lines, events, temp_files, usage, wait_for
from mstar.cli import main
from mstar.llm.preflight import PROMPT
from mstar.run.resume import load_state
from mstar.run.store import RunStore
from mstar.testing.fake_server import FakeOpenAIServer, Faults, HTTPErrorReply, offline_responder, role_of
from run_helpers import unwrapped


def deny(status, message):
    def respond(model, messages):
        raise HTTPErrorReply(status, message)
    return respond


def test_a_wrong_key_stops_before_the_run_folder_with_one_line(tmp_path, capsys):
    with FakeOpenAIServer(deny(401, "Incorrect API key provided: sk-wrong")) as srv:
        rc = main(["evolve", *SMALL, "--iterations", "2", "--out", str(tmp_path / "run"),
                   *endpoint(srv.base_url, tmp_path / "cache")])
        requests = list(srv.requests)
    out, err = capsys.readouterr()
    assert rc == 3
    lines = error_lines(err)
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith("mstar: role 'task' (gpt-test at " + srv.base_url + ")")
    assert "authentication failed" in line and "$OPENAI_API_KEY" in line and "Incorrect API key" in line
    assert "Traceback" not in out + err
    assert not (tmp_path / "run").exists()           # no folder, no seed evaluation
    # All four roles send the same request to the same endpoint: one call checked them all, no retry.
    assert len(requests) == 1 and requests[0]["messages"] == PROMPT


def test_a_model_the_server_does_not_know_stops_with_the_names_it_serves(tmp_path, capsys):
    with FakeOpenAIServer(offline_responder(), models=["qwen-7b"]) as srv:
        rc = main(["evolve", *SMALL, "--iterations", "1", "--out", str(tmp_path / "run"),
                   *endpoint(srv.base_url, None, model="qwen-7bb")])
    err = capsys.readouterr().err
    assert rc == 3 and not (tmp_path / "run").exists()
    [line] = error_lines(err)
    assert "role 'task' (qwen-7bb at" in line and "not found -- check the model name and base URL" in line
    assert "unknown model 'qwen-7bb'; this server serves: qwen-7b" in line


def test_a_server_that_answers_every_request_with_500_unknown_model_is_not_retried_into_a_run(tmp_path, capsys):
    # The row: each call retried 4x, two seeds scored 0.000, exit 0. Now the preflight's
    # retries run out in a second and the run never begins.
    with FakeOpenAIServer(deny(500, "unknown model 'gpt-tset'")) as srv:
        rc = main(["evolve", *SMALL, "--iterations", "1", "--out", str(tmp_path / "run"),
                   *endpoint(srv.base_url, None, model="gpt-tset")])
        requests = len(srv.requests)
    err = capsys.readouterr().err
    assert rc == 3 and not (tmp_path / "run").exists()
    [line] = error_lines(err)
    assert "HTTP 500 (unknown model 'gpt-tset')" in line and "gave up after 4 attempt(s)" in line
    assert "check the model name" in line
    assert requests == 4


def test_roles_with_their_own_settings_are_checked_each_and_the_failing_one_is_named(tmp_path, capsys):
    def respond(model, messages):
        if model == "refl-big":
            raise HTTPErrorReply(403, "this key may not use refl-big")
        return offline_responder()(model, messages)

    with FakeOpenAIServer(respond) as srv:
        rc = main(["evolve", *SMALL, "--iterations", "1", "--out", str(tmp_path / "run"),
                   *endpoint(srv.base_url, None), "--reflector-model", "refl-big"])
        models = sorted(r["model"] for r in srv.requests)
    err = capsys.readouterr().err
    assert rc == 3
    [line] = error_lines(err)
    assert line.startswith("mstar: role 'reflector' (refl-big at") and "may not use refl-big" in line
    assert models == ["gpt-test", "refl-big"]       # task, toolkit and judge share one check


def test_no_preflight_skips_the_check_and_a_wrong_key_then_stops_at_the_first_call(tmp_path, capsys):
    with FakeOpenAIServer(deny(401, "Incorrect API key provided")) as srv:
        rc = main(["evolve", *SMALL, "--iterations", "2", "--out", str(tmp_path / "run"), "--no-preflight",
                   *endpoint(srv.base_url, tmp_path / "cache")])
        prompts = [r["messages"] for r in srv.requests]
    out, err = capsys.readouterr()
    assert PROMPT not in prompts
    assert rc == 3 and "Traceback" not in out + err
    assert "authentication failed" in out + err
    assert len(prompts) <= 16 * 2                    # nothing was retried: at most what was in flight
    assert all(not r["retries"] for r in usage(tmp_path / "run"))


def test_a_key_revoked_during_the_run_stops_it_resumably_with_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    revoked = threading.Event()
    base = offline_responder()

    def respond(model, messages):
        if revoked.is_set():
            raise HTTPErrorReply(401, "API key revoked")
        return base(model, messages)

    def revoke_after_iteration_1():
        wait_for(lambda: (run / "lineage.jsonl").exists() and '"iteration"' in (run / "lineage.jsonl").read_text())
        revoked.set()

    with FakeOpenAIServer(respond) as srv:
        threading.Thread(target=revoke_after_iteration_1, daemon=True).start()
        rc = main(["evolve", *SMALL, "--iterations", "4", "--out", str(run), *endpoint(srv.base_url, tmp_path / "c")])
    out, err = capsys.readouterr()
    assert rc == 3 and "Traceback" not in out + err
    stopped = [l for l in unwrapped(out).splitlines() if l.startswith("stopped ")]
    assert len(stopped) == 1 and "rejected the requests" in stopped[0] and "API key revoked" in stopped[0]
    assert f"mstar resume {run}" in out
    ev = events(run)
    assert ev[-1]["event"] == "stopped" and ev[-1]["kind"] == "endpoint"
    assert not any(e["event"] == "test" for e in ev)
    assert not any(e["event"] == "iteration" and e["iteration"] > 1 for e in ev)   # nothing scored from 401s
    state = load_state(RunStore(run))
    assert not state.finished and state.next_iteration == 2
    assert json.loads((run / "summary.json").read_text())["test_score"] is None
    assert temp_files(run) == []


def test_the_fake_server_serves_any_model_name_reading_the_role_from_the_prompt(tmp_path):
    task = [{"role": "user", "content": "<task>answer</task>\n<question>q</question>"}]
    judge = [{"role": "user", "content": "<task>judge_answer</task>"}]
    fix = [{"role": "user", "content": "<task>compile_fix</task>\n<broken_program>x</broken_program>"}]
    assert [role_of("any-name", m) for m in (task, judge, fix)] == ["task", "judge", "reflector"]
    assert role_of("any-name", [{"role": "user", "content": "summarise: Maya adopted a cat"}]) == "toolkit"
    assert role_of("offline-reflector", [{"role": "user", "content": "free text"}]) == "reflector"
    # A whole run with one model name for every role: no call fails for want of the right name.
    with FakeOpenAIServer(offline_responder(), faults=Faults()) as srv:
        run = tmp_path / "run"
        assert main(["evolve", *SMALL, "--iterations", "1", "--out", str(run), "--quiet",
                     *endpoint(srv.base_url, tmp_path / "c", model="whatever-7b")]) == 0
    assert not any(r["error"] for r in usage(run))
    assert {r["model"] for r in usage(run)} == {"whatever-7b"}


@pytest.mark.parametrize("snapshot,role", [
    ("reflection_prompt", "reflector"), ("paper_reflection_prompt", "reflector"),
    ("paper_compile_fix_prompt", "reflector"), ("paper_extraction_prompt", "task"), ("paper_query_prompt", "task"),
    ("paper_answer_prompt", "task"), ("paper_answer_judge_prompt", "judge"), ("paper_rubric_judge_prompt", "judge")])
def test_the_fake_server_reads_the_role_from_either_prompt_wording(snapshot, role):
    text = (Path(__file__).parent / "snapshots" / f"{snapshot}.txt").read_text()
    parts = re.split(r"^=== (\w+)\n", text, flags=re.M)
    messages = [{"role": parts[i], "content": parts[i + 1]} for i in range(1, len(parts) - 1, 2)] \
        or [{"role": "user", "content": text}]
    assert role_of("any-model", messages) == role


def test_a_reflector_command_that_does_not_exist_is_caught_by_the_preflight(tmp_path, capsys):
    rc = main(["evolve", *SMALL, "--iterations", "1", "--out", str(tmp_path / "run"),
               "--llm", "reflector.backend=command", "--llm", "reflector.command=/no/such/agent --print"])
    assert rc == 3 and not (tmp_path / "run").exists()
    [line] = error_lines(capsys.readouterr().err)
    assert line == ("mstar: role 'reflector': command '/no/such/agent' not found -- check reflector.command "
                    "(the program must be on PATH or a path to an executable)")


def test_the_preflight_asks_for_a_capped_completion():
    # Issue 41: a model that does not answer "ok" (a base model) wrote 604 tokens for the check.
    from mstar.config import LLMConfig, RoleConfig
    from mstar.llm.preflight import MAX_TOKENS
    from mstar.llm.router import LLMRouter

    def rambling(model, messages):
        return "Connection check: reply with the single word ok. " * 50      # never says just "ok"
    with FakeOpenAIServer(rambling) as srv:
        def role(**kw):
            return RoleConfig(backend="openai", base_url=srv.base_url, model="base", max_retries=0, **kw)
        cfg = LLMConfig(task=role(), toolkit=role(max_tokens=8), reflector=role(reasoning_effort="low"),
                        judge=role(max_tokens=4000), cache_dir=None)
        checks = LLMRouter.from_config(cfg, env={}).preflight()
        bodies = list(srv.requests)
    assert all(c.ok for c in checks) and len(bodies) == 4
    caps = Counter((b.get("max_tokens"), b.get("max_completion_tokens")) for b in bodies if b["messages"] == PROMPT)
    # the cap, or the role's own when lower; a reasoning model's in max_completion_tokens
    assert caps == Counter([(MAX_TOKENS, None), (8, None), (None, MAX_TOKENS), (MAX_TOKENS, None)])
    assert MAX_TOKENS <= 16

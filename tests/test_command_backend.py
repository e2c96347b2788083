"""A role served by an external program (prompt on stdin, completion on stdout), through the router."""
import sys
import time

import pytest

from mstar.config import LLMConfig, RoleConfig
from mstar.llm.command_backend import CommandBackend, render_prompt
from mstar.llm.router import LLMRouter
from mstar.llm.types import EmptyCompletionError, LLMError

MSG = [{"role": "user", "content": "shout this"}]


def script(tmp_path, body, name="model.py"):
    p = tmp_path / name
    p.write_text("import sys\n" + body)
    return f"{sys.executable} {p}"


def test_prompt_goes_in_on_stdin_and_the_completion_comes_out(tmp_path):
    cmd = script(tmp_path, "text = sys.stdin.read()\nprint(text.upper())\n")
    cfg = LLMConfig(reflector=RoleConfig(backend="command", command=cmd, model="shouter"), cache_dir=None)
    router = LLMRouter.from_config(cfg)
    assert router.text("reflector", MSG) == "SHOUT THIS"
    rec = router.records[-1]
    assert (rec.backend, rec.model, rec.error) == ("command", "shouter", None) and rec.prompt_tokens > 0
    assert router.describe()["reflector"].startswith("command:shouter @ ")


def test_conversations_get_a_header_per_message():
    text = render_prompt([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    assert text == "### system\nbe brief\n\n### user\nhi"


def test_non_zero_exit_names_the_command_and_its_stderr(tmp_path):
    cmd = script(tmp_path, "sys.stderr.write('model weights not found\\n')\nsys.exit(3)\n")
    with pytest.raises(LLMError, match=r"exited with status 3: model weights not found"):
        CommandBackend("reflector", cmd).complete(MSG)


def test_empty_output_is_an_empty_completion(tmp_path):
    cmd = script(tmp_path, "sys.stdin.read()\n")
    with pytest.raises(EmptyCompletionError, match="wrote nothing"):
        CommandBackend("task", cmd).complete(MSG)


def test_timeout_kills_the_command_and_its_children(tmp_path):
    marker = tmp_path / "child-alive"
    child = tmp_path / "child.py"
    child.write_text(f"import time\ntime.sleep(1.5)\nopen({str(marker)!r}, 'w').close()\n")
    body = f"import subprocess, time\nsubprocess.Popen([sys.executable, {str(child)!r}])\ntime.sleep(30)\n"
    cfg = LLMConfig(task=RoleConfig(backend="command", command=script(tmp_path, body), timeout_s=0.5,
                                    max_retries=1, backoff_s=0.0), cache_dir=None)
    router = LLMRouter.from_config(cfg)
    t0 = time.perf_counter()
    with pytest.raises(LLMError, match="timed out after 0.5s"):
        router.text("task", MSG)
    assert time.perf_counter() - t0 < 5
    assert router.records[-1].retries == 1           # a timeout is retried like a slow server
    time.sleep(2.0)
    assert not marker.exists()                       # the whole process group was killed


def test_missing_program_and_missing_command_are_clear(tmp_path):
    with pytest.raises(LLMError, match="cannot start command"):
        CommandBackend("task", str(tmp_path / "no-such-program")).complete(MSG)
    with pytest.raises(LLMError, match="needs a command"):
        CommandBackend("task", None)

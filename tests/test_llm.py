"""LLM layer: routing, the ledger, and the real openai client against the local fake server."""
import pytest

from mstar.config import LLMConfig, RoleConfig
from mstar.fake_server import FakeOpenAIServer, scripted_responder
from mstar.llm.openai_backend import OpenAIBackend
from mstar.llm.router import LLMRouter
from mstar.llm.types import ChatResponse, LLMError

MSG = [{"role": "user", "content": "hello there"}]


class Echo:
    name, model = "test", "echo"

    def complete(self, messages):
        return ChatResponse(text=messages[-1]["content"].upper(), model="echo", backend="test",
                            prompt_tokens=3, completion_tokens=2)


class Broken:
    name, model = "test", "broken"

    def complete(self, messages):
        raise RuntimeError("boom")


def test_router_records_every_call_per_role():
    router = LLMRouter({"task": Echo(), "reflector": Echo(), "toolkit": Echo(), "judge": Broken()})
    assert router.text("task", MSG) == "HELLO THERE"
    router.text("task", MSG)
    with pytest.raises(LLMError, match="boom"):
        router.text("judge", MSG)
    totals = router.totals()
    assert totals["task"] == {"calls": 2, "prompt_tokens": 6, "completion_tokens": 4, "errors": 0}
    assert totals["judge"]["errors"] == 1
    assert router.since(1)["calls"] == 2


def test_router_requires_every_role():
    with pytest.raises(ValueError, match="reflector"):
        LLMRouter({"task": Echo(), "toolkit": Echo(), "judge": Echo()})


def test_openai_backend_against_fake_server_reports_usage():
    with FakeOpenAIServer(scripted_responder(["first reply", "second reply"])) as srv:
        cfg = RoleConfig(backend="openai", model="m-test", base_url=srv.base_url, max_retries=0)
        backend = OpenAIBackend("task", cfg, env={})
        r1 = backend.complete(MSG)
        r2 = backend.complete(MSG)
    assert (r1.text, r2.text) == ("first reply", "second reply")
    assert r1.prompt_tokens > 0 and r1.completion_tokens > 0
    assert srv.requests[0]["model"] == "m-test"
    assert srv.requests[0]["messages"] == MSG


def test_openai_backend_empty_completion_is_an_error():
    with FakeOpenAIServer(scripted_responder(["   "])) as srv:
        backend = OpenAIBackend("task", RoleConfig(backend="openai", model="m", base_url=srv.base_url,
                                                   max_retries=0), env={})
        with pytest.raises(LLMError, match="empty completion"):
            backend.complete(MSG)


def test_openai_backend_server_error_surfaces_after_retries():
    with FakeOpenAIServer(scripted_responder([])) as srv:  # script exhausted -> HTTP 500
        backend = OpenAIBackend("task", RoleConfig(backend="openai", model="m", base_url=srv.base_url,
                                                   max_retries=1, timeout_s=5), env={})
        with pytest.raises(LLMError, match="call failed after retries"):
            backend.complete(MSG)
        assert len(srv.requests) == 2  # first try + one retry


def test_missing_key_without_base_url_is_a_clear_error():
    with pytest.raises(LLMError, match="MY_KEY"):
        OpenAIBackend("reflector", RoleConfig(backend="openai", model="m", api_key_env="MY_KEY"), env={})


def test_router_from_config_offline_by_default():
    router = LLMRouter.from_config(LLMConfig())
    assert set(router.describe()) == {"task", "reflector", "toolkit", "judge"}
    assert all(v.startswith("offline:") for v in router.describe().values())

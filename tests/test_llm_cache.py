"""The persistent response cache: keys, what is (never) stored, replay vs reuse, and several
processes writing one cache file at once."""
import subprocess
import sys
import textwrap

import pytest

from mstar.testing.fake_server import FakeOpenAIServer, Faults, scripted_responder
from mstar.config import RoleConfig
from mstar.llm.cache import ResponseCache, request_key
from mstar.llm.offline_backend import OfflineBackend
from mstar.llm.openai_backend import OpenAIBackend
from mstar.llm.retry import RetryPolicy
from mstar.llm.router import LLMRouter, RolePolicy
from mstar.llm.types import ChatResponse, LLMError

WHO = {"backend": "openai", "model": "m", "base_url": "http://x/v1", "command": None}
MSG = [{"role": "user", "content": "<task>extract_knowledge_item</task>\nsome text"}]


def test_key_depends_on_what_decides_the_reply_only():
    k = request_key(WHO, MSG, {"temperature": 0.0})
    assert k == request_key(dict(WHO), [dict(MSG[0])], {"temperature": 0.0})
    assert k != request_key({**WHO, "model": "m2"}, MSG, {"temperature": 0.0})
    assert k != request_key({**WHO, "base_url": "http://y/v1"}, MSG, {"temperature": 0.0})
    assert k != request_key(WHO, MSG, {"temperature": 0.7})
    assert k != request_key(WHO, [{"role": "user", "content": "other"}], {"temperature": 0.0})
    assert request_key(WHO, MSG, {"temperature": None}) == request_key(WHO, MSG, {})
    assert request_key(WHO, MSG, {}, occurrence=1) != request_key(WHO, MSG, {}, occurrence=0)


def test_hits_return_the_full_response_and_bad_replies_are_never_stored(tmp_path):
    cache = ResponseCache(tmp_path / "c")
    good = ChatResponse("a reply", "m", "openai", prompt_tokens=12, completion_tokens=3, finish_reason="stop",
                        cached_tokens=4)
    assert cache.put("k1", good)
    assert not cache.put("k2", ChatResponse("half a rep", "m", "openai", finish_reason="length"))
    assert not cache.put("k3", ChatResponse("   ", "m", "openai"))
    again = ResponseCache(tmp_path / "c")              # persistent: a new process sees it
    hit = again.get("k1")
    assert (hit.text, hit.prompt_tokens, hit.completion_tokens, hit.cached_tokens) == ("a reply", 12, 3, 4)
    assert again.get("k2") is None and again.get("k3") is None and len(again) == 1


def test_unreadable_cache_file_is_a_clear_error(tmp_path):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "responses.sqlite").write_bytes(b"this is not a database" * 100)
    with pytest.raises(LLMError, match="cannot open the response cache.*--no-cache"):
        ResponseCache(tmp_path / "c")


def _router(srv, cache, mode, max_retries=0):
    backend = OpenAIBackend("task", RoleConfig(backend="openai", model="m", base_url=srv.base_url), env={})
    others = {r: OfflineBackend(r) for r in ("reflector", "toolkit", "judge")}
    return LLMRouter({"task": backend, **others}, cache=cache,
                     policies={"task": RolePolicy(cache=mode, retry=RetryPolicy(max_retries, 0.0))})


def test_reuse_mode_answers_repeats_from_the_cache_and_never_caches_failures(tmp_path):
    cache = ResponseCache(tmp_path / "c")
    with FakeOpenAIServer(scripted_responder(["first", "second", "third"]), faults=Faults(script=["empty"])) as srv:
        router = _router(srv, cache, "reuse")
        with pytest.raises(LLMError, match="empty"):
            router.text("task", MSG)                    # a failure: not stored
        assert router.text("task", MSG) == "second"     # asked again: goes to the server
        assert router.text("task", MSG) == "second"     # now a hit
        assert len(srv.requests) == 2
    recs = router.records
    assert [r.cache_hit for r in recs] == [False, False, True]
    assert recs[2].cost_usd == 0 and recs[2].prompt_tokens == recs[1].prompt_tokens
    t = router.totals()["task"]
    assert t["cache_hits"] == 1 and t["saved_tokens"] == recs[1].prompt_tokens + recs[1].completion_tokens


def test_replay_mode_gives_fresh_answers_within_a_run_and_replays_them_in_the_next(tmp_path):
    cache = ResponseCache(tmp_path / "c")
    with FakeOpenAIServer(scripted_responder(["one", "two"])) as srv:
        first = _router(srv, cache, "replay")
        assert [first.text("task", MSG), first.text("task", MSG)] == ["one", "two"]
        second = _router(srv, cache, "replay")          # a new run (process) replays both
        assert [second.text("task", MSG), second.text("task", MSG)] == ["one", "two"]
        assert len(srv.requests) == 2


def test_a_resumed_run_restores_its_replay_counters(tmp_path):
    """A crash after a completed iteration that asked prompt P once: the resumed process, told
    what that iteration asked (the iteration event's replay_keys), gets P's *second* reply for
    its next P -- as the uninterrupted run did -- not the first one again."""
    cache = ResponseCache(tmp_path / "c")
    with FakeOpenAIServer(scripted_responder(["one", "two", "three"])) as srv:
        uninterrupted = _router(srv, cache, "replay")
        mark = uninterrupted.replay_mark()
        assert uninterrupted.text("task", MSG) == "one"          # iteration 1
        completed = uninterrupted.replay_since(mark)
        assert len(completed) == 1
        assert uninterrupted.text("task", MSG) == "two"          # iteration 2
        resumed = _router(srv, cache, "replay")
        resumed.restore_replay(completed)                        # iteration 1 was on disk
        assert resumed.text("task", MSG) == "two"                # iteration 2, redone: same reply
        forgetful = _router(srv, cache, "replay")
        assert forgetful.text("task", MSG) == "one"              # what a resume without them got
        assert len(srv.requests) == 2                            # every redo came from the cache


def test_many_processes_share_one_cache_file(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from mstar.llm.cache import ResponseCache
        from mstar.llm.types import ChatResponse
        me = int(sys.argv[1])
        cache = ResponseCache({str(tmp_path / 'shared')!r})
        for i in range(150):
            key = f"k{{i}}"          # every process writes the same keys, and reads them back
            cache.put(key, ChatResponse(f"reply {{i}} from {{me}}", "m", "openai"))
            hit = cache.get(key)
            assert hit is not None and hit.text.startswith(f"reply {{i}} from "), hit
        assert not cache.errors, cache.errors
        print("ok")
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, str(n)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for n in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-800:] for o in outs]
    cache = ResponseCache(tmp_path / "shared")
    assert len(cache) == 150
    # the first writer of a key won, and every process read one consistent answer
    assert all(cache.get(f"k{i}").text.startswith(f"reply {i} from ") for i in range(150))

"""`mstar serve` shared by several clients, driven by the official MCP SDK's own client over
streamable HTTP: clients of an access file see only their namespaces, a namespace whose LLM
endpoint holds its replies queues only its own calls, and Host/Origin are checked on every bind
(127.0.0.2 too) against DNS rebinding. The access file's and the host rule's refusals are
checked without a server at the end."""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="needs the [serve] extra (the MCP SDK): pip install -e '.[serve]'")

from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp_helpers import HttpServer, http_session, quiet_env, recall, remember  # noqa: E402
from mstar.memory.access import Access, AccessError  # noqa: E402
from mstar.memory.hosts import HostCheck, HostNameError, allowed_name  # noqa: E402
from mstar.memory.log import read_log  # noqa: E402
from mstar.testing.fake_server import FakeOpenAIServer, offline_responder  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "seeds" / "vector_search.py"


def sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def post(url: str, headers: dict) -> tuple[int, str]:
    """An MCP initialize request with these headers: (status, body)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream", **headers})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read(2000).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", "replace")


def logged(store: Path, namespace: str) -> list[str]:
    return [r.text for r in read_log(store / "namespaces" / namespace / "log.jsonl")]


# --------------------------------------------------------------------------- point 1: access


def test_two_clients_with_two_namespace_tokens_cannot_read_each_others_namespace(tmp_path):
    alice_token, bob_token = "alice-" + os.urandom(12).hex(), "bob-" + os.urandom(12).hex()
    access = tmp_path / "access.toml"
    access.write_text(f'''
[clients.alice]
token_sha256 = "{sha256(alice_token)}"
namespaces = ["alice"]

[clients.bob]
token_env = "MSTAR_TEST_BOB_TOKEN"
namespaces = ["bob", "team-*"]
''')
    store = tmp_path / "mem"
    with HttpServer(SEED, store, "--access", str(access), env=quiet_env(MSTAR_TEST_BOB_TOKEN=bob_token)) as server:
        assert any("2 clients of" in line for line in server.lines)
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": f"Bearer {sha256(alice_token)}"}):
            assert post(server.url, headers)[0] == 401

        async def clients():
            async with http_session(server.url, {"Authorization": f"Bearer {alice_token}"}) as alice, \
                    http_session(server.url, {"Authorization": f"Bearer {bob_token}"}) as bob:
                assert (await remember(alice, "Alice's door code is 4512", "alice"))["seq"] == 1
                assert (await remember(bob, "Bob's locker is number 77", "bob"))["seq"] == 1
                assert (await remember(bob, "The team meets on Fridays", "team-core"))["seq"] == 1
                assert "4512" in (await recall(alice, "What is Alice's door code?", "alice"))["retrieved"]
                assert "77" in (await recall(bob, "What is Bob's locker number?", "bob"))["retrieved"]
                refusals = []
                for session, namespace in ((alice, "bob"), (bob, "alice"), (alice, "team-core"), (alice, None)):
                    for tool, args in (("recall", {"question": "What is the door code?"}),
                                       ("recall", {"question": "What is the locker number?", "answer": True}),
                                       ("remember", {"text": "planted by the other client"})):
                        call = {**args, **({"namespace": namespace} if namespace else {})}
                        result = await session.call_tool(tool, call)
                        assert result.is_error, (tool, call, result.structured_content)
                        refusals.append(result.content[0].text)
                return refusals

        refusals = asyncio.run(clients())
    assert len(refusals) == 12
    assert all("refused: client" in text and "4512" not in text and "77" not in text for text in refusals)
    assert "namespace 'bob' refused: client 'alice' may use only alice" in refusals[0]
    assert "namespace 'alice' refused: client 'bob' may use only bob, team-*" in refusals[3]
    assert "namespace 'default' refused" in refusals[-1]       # no namespace given: the default one
    # nothing was written where a client may not write, and no namespace was made for a refusal
    assert sorted(p.name for p in (store / "namespaces").iterdir()) == ["alice", "bob", "team-core"]
    assert logged(store, "alice") == ["Alice's door code is 4512"]
    assert logged(store, "bob") == ["Bob's locker is number 77"]


def test_an_access_file_is_checked_before_serving_with_one_line(tmp_path, capsys, monkeypatch):
    from mstar.cli import main

    good = f'[clients.a]\ntoken_sha256 = "{sha256("t")}"\nnamespaces = ["a"]\n'
    cases = {
        "": "no clients",
        '[clients.a]\ntoken_sha256 = "abc"\nnamespaces = ["a"]\n': "token_sha256 must be 64 hex digits",
        '[clients.a]\ntoken_env = "MSTAR_TEST_UNSET_TOKEN"\nnamespaces = ["a"]\n': "$MSTAR_TEST_UNSET_TOKEN, which is not set",
        f'[clients.a]\ntoken_sha256 = "{sha256("t")}"\nnamespace = ["a"]\n': "unknown key(s) ['namespace']",
        f'[clients.a]\ntoken_sha256 = "{sha256("t")}"\nnamespaces = ["../b"]\n': 'namespace "../b" is not a namespace name',
        f'[clients.a]\ntoken_sha256 = "{sha256("t")}"\nnamespaces = ["a\\n"]\n': 'namespace "a\\n" is not a namespace name',
        good + f'[clients.b]\ntoken_sha256 = "{sha256("t")}"\nnamespaces = ["b"]\n': "have the same token",
        "[clients.a\n": "not valid TOML",
    }
    monkeypatch.delenv("MSTAR_TEST_UNSET_TOKEN", raising=False)
    for i, (text, expected) in enumerate(cases.items()):
        path = tmp_path / f"access{i}.toml"
        path.write_text(text)
        with pytest.raises(AccessError) as refused:
            Access.load(path)
        assert expected in str(refused.value) and str(path) in str(refused.value) and "\n" not in str(refused.value)
    path = tmp_path / "good.toml"
    path.write_text(good)
    client = Access.load(path).client_for("Bearer t")
    assert client is not None and client.may_use("a") and not client.may_use("a2") and not client.may_use("b")
    # the command: refused before any store is made
    monkeypatch.setenv("MSTAR_SERVE_TOKEN", "single")
    argv = ["serve", str(SEED), "--store", str(tmp_path / "mem"), "--transport", "http", "--access", str(path)]
    assert main(argv) == 2
    assert "give either --access (a token per client) or $MSTAR_SERVE_TOKEN" in capsys.readouterr().err
    monkeypatch.delenv("MSTAR_SERVE_TOKEN")
    assert main(argv[:-1] + [str(tmp_path / "access1.toml")]) == 2
    assert capsys.readouterr().err.strip().endswith("token_sha256 must be 64 hex digits (printf %s \"$TOKEN\" | sha256sum)")
    assert main(["serve", str(SEED), "--store", str(tmp_path / "mem"), "--access", str(path)]) == 2
    assert "--access is for --transport http" in capsys.readouterr().err
    assert not (tmp_path / "mem").exists()


# --------------------------------------------------------------------------- point 2: fairness

HOLD = "HOLD-ME"


class HeldEndpoint:
    """The offline models behind the fake server, except that a prompt with HOLD in it is held
    until `release` is set: an LLM endpoint that is slow for one namespace's questions only."""

    def __init__(self) -> None:
        self.inner = offline_responder()
        self.release = threading.Event()
        self.cond = threading.Condition()
        self.held = self.most_held = 0

    def __call__(self, model: str, messages: list[dict]):
        if HOLD in json.dumps(messages):
            with self.cond:
                self.held += 1
                self.most_held = max(self.most_held, self.held)
                self.cond.notify_all()
            try:
                self.release.wait(300)
            finally:
                with self.cond:
                    self.held -= 1
        return self.inner(model, messages)

    def wait_held(self, n: int, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.held >= n, timeout)


@contextlib.asynccontextmanager
async def counted_session(url: str, started: list):
    """An SDK client session whose tool calls' HTTP responses are counted as they start: the server
    answers a tool call's POST with its event stream's headers once it has taken the call in."""
    import httpx2

    async def on_response(response) -> None:
        if b"tools/call" in response.request.content:
            started.append(response.status_code)

    async with httpx2.AsyncClient(timeout=httpx2.Timeout(60.0, read=300.0),
                                  event_hooks={"response": [on_response]}) as client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


STALLED = 45
PER_NAMESPACE = 8           # the default of --namespace-calls (mstar.memory.fairness)


def test_with_45_stalled_calls_in_one_namespace_another_namespace_answers_at_once(tmp_path):
    """45 recalls in namespace 'slow' wait on an endpoint that holds their replies (more than the
    SDK's 40 threads); a recall in 'fast' is answered meanwhile, about as fast as before the stall,
    while every held call is still held. Released, all 45 are answered; the endpoint never saw
    more than the per-namespace bound of them at once."""
    endpoint = HeldEndpoint()
    store = tmp_path / "mem"
    with FakeOpenAIServer(endpoint) as fake:
        env = quiet_env(OPENAI_API_KEY="sk-test-key")
        with HttpServer(SEED, store, "--base-url", fake.base_url, "--model", "mem-model", "--no-cache",
                        env=env) as server:
            async def scenario():
                started: list[str] = []
                async with counted_session(server.url, started) as slow, http_session(server.url) as fast:
                    await remember(slow, "The slow namespace keeps the tide table", "slow")
                    await remember(fast, "The fast namespace's password is swordfish", "fast")
                    timings = []
                    for _ in range(3):
                        t0 = time.monotonic()
                        got = await recall(fast, "What is the fast namespace's password?", "fast")
                        timings.append(time.monotonic() - t0)
                        assert "swordfish" in got["retrieved"]
                    before = sorted(timings)[1]
                    posts = len(started)
                    stalled = [asyncio.create_task(slow.call_tool(
                        "recall", {"question": f"{HOLD} {i}: when is high tide?", "namespace": "slow"}))
                        for i in range(STALLED)]
                    # every stalled call is in the server, and the endpoint holds what it was sent
                    while len(started) < posts + STALLED:
                        await asyncio.sleep(0.01)
                    assert await asyncio.to_thread(endpoint.wait_held, PER_NAMESPACE, 60)
                    # A moment for a server without the bound to take more (the SDK's pool: 40 threads);
                    # the assertions below hold however long this took.
                    await asyncio.to_thread(endpoint.wait_held, STALLED, 2.0)
                    t0 = time.monotonic()
                    during = await asyncio.wait_for(
                        recall(fast, "What is the fast namespace's password?", "fast"), 30)
                    waited = time.monotonic() - t0
                    still_held = endpoint.held
                    assert not any(task.done() for task in stalled)
                    endpoint.release.set()
                    results = await asyncio.gather(*stalled)
                    return before, waited, during, still_held, results

            try:
                before, waited, during, still_held, results = asyncio.run(scenario())
            finally:
                endpoint.release.set()
    assert "swordfish" in during["retrieved"]
    assert still_held == PER_NAMESPACE                     # the stalled calls were still stalled
    assert waited < max(1.0, 10 * before), (waited, before)
    assert len(results) == STALLED and not any(r.is_error for r in results)
    assert endpoint.most_held == PER_NAMESPACE             # one namespace never held more threads than its bound
    print(f"recall in another namespace: {before * 1000:.0f} ms before the stall, {waited * 1000:.0f} ms during it")


def test_the_fairness_bounds_are_checked_before_serving(tmp_path, capsys):
    from mstar.cli import main

    base = ["serve", str(SEED), "--store", str(tmp_path / "mem")]
    assert main(base + ["--namespace-calls", "0"]) == 2
    assert capsys.readouterr().err.strip() == "mstar: --namespace-calls 0: give 1 or more"
    assert main(base + ["--namespace-calls", "8", "--threads", "8"]) == 2
    assert "--threads 8 must be more than --namespace-calls 8" in capsys.readouterr().err
    assert main(base + ["--transport", "http", "--allow-host", "http://memory.lan"]) == 2
    assert "--allow-host 'http://memory.lan': give a host name" in capsys.readouterr().err
    assert not (tmp_path / "mem").exists()


# --------------------------------------------------------------------------- point 3: Host and Origin


def test_a_foreign_host_on_127_0_0_2_is_refused(tmp_path):
    """127.0.0.2 is loopback (no token needed) but not one of the SDK's three names: a rebound
    request (Host and Origin of the attacker's name) is refused and makes no session or namespace;
    the bound address works."""
    store = tmp_path / "mem"
    with HttpServer(SEED, store, "--host", "127.0.0.2") as server:
        assert server.url.startswith("http://127.0.0.2:")
        port = server.url.split(":")[2].split("/")[0]
        status, body = post(server.url, {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"})
        assert status == 421 and "is not this server's" in body and "--allow-host" in body
        assert post(server.url, {"Host": "evil.example"})[0] == 421
        status, body = post(server.url, {"Origin": "http://evil.example"})
        assert status == 403 and "Origin 'http://evil.example' is not allowed" in body
        assert post(server.url, {"Origin": "null"})[0] == 403
        assert post(server.url, {"Origin": f"http://127.0.0.2:{port}"})[0] == 200
        assert post(server.url, {"Host": f"localhost:{port}"})[0] == 200

        async def own_client():
            async with http_session(server.url) as session:
                return await remember(session, "the door code is 4512", "alice")
        assert asyncio.run(own_client())["seq"] == 1
    assert [p.name for p in (store / "namespaces").iterdir()] == ["alice"]


def test_the_host_rule_for_each_kind_of_bind():
    one = HostCheck("127.0.0.2")
    assert [one.header_ok(h) for h in ("127.0.0.2:8765", "localhost:1", "127.0.0.1:8765", "evil.example:8765",
                                       "127.0.0.2:x", "", "[::1]:8765")] == [True, True, False, False, False, False, False]
    assert [one.origin_ok(o) for o in (None, "http://127.0.0.2:9", "https://localhost", "http://evil.example",
                                       "null", "file://127.0.0.2", "http://127.0.0.2:port")] == \
        [True, True, True, False, False, False, False]
    wildcard = HostCheck("0.0.0.0", ["Memory.Example.COM."])
    assert [wildcard.header_ok(h) for h in ("10.0.0.5:8765", "[fe80::1]:1", "memory.example.com:443",
                                            "localhost", "evil.example", "memory.example.com.evil.example")] == \
        [True, True, True, True, False, False]
    lan = HostCheck("192.168.1.20", ["memory.lan"])
    assert [lan.header_ok(h) for h in ("192.168.1.20:8765", "memory.lan", "localhost:8765", "10.0.0.5")] == \
        [True, True, False, False]
    assert HostCheck("::1").header_ok("[::1]:8765") and not HostCheck("::1").header_ok("[::2]:8765")
    for bad in ("http://memory.lan", "memory.lan:80", "a b", "-a"):
        with pytest.raises(HostNameError, match="--allow-host"):
            allowed_name(bad)

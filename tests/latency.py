"""Timeouts for tests that tell a hang from a reply, measured on this machine now.

A test that injects hangs needs a client timeout that every normal reply beats and every hang
outlasts. A fixed 1.5 s assumed normal replies take milliseconds; on a busy machine (a newcomer's
2 cores running the suite beside other work) one took longer and counted as a third hang.
`hang_timeout` measures how long normal replies of the fake server take through the real openai
client here, and gives a timeout far above the slowest (and never below a floor), so the
verdict does not depend on the load; a hang is then set to outlast it."""
from __future__ import annotations

import time

import openai

from mstar.testing.fake_server import FakeOpenAIServer, scripted_responder

MARGIN = 50      # a timeout this many times the slowest measured reply
SAMPLES = 8


def slowest_reply(samples: int = SAMPLES) -> float:
    """Seconds the slowest of `samples` normal chat completions took, through the openai client."""
    with FakeOpenAIServer(scripted_responder(["ok"] * (samples + 1))) as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="test", max_retries=0, timeout=60)
        took = []
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "warm-up"}])
        for _ in range(samples):
            t0 = time.perf_counter()
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            took.append(time.perf_counter() - t0)
        client.close()
    return max(took)


def hang_timeout(floor: float) -> tuple[float, float]:
    """(client timeout, hang length): the timeout MARGIN times the slowest normal reply measured
    now, at least `floor`; a hang lasts twice the timeout, so no client waits it out."""
    timeout = round(max(floor, MARGIN * slowest_reply()), 2)
    return timeout, 2 * timeout

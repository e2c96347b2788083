"""The worker's intake: the main thread takes whole batches of frames from the pipe
(sandbox/worker/channel.py) and hands reads to threads it does not wait for (readers.py)."""
from __future__ import annotations

import os
import threading
import time

import pytest

from sandbox.protocol import encode_frame
from sandbox.worker.channel import WorkerChannel
from sandbox.worker.readers import ReadPool


def test_frames_that_arrive_together_are_each_taken_and_replies_go_to_their_reads():
    r, w = os.pipe()
    channel = WorkerChannel(r, os.open(os.devnull, os.O_WRONLY))
    got: list[dict] = []

    def threaded_read():   # a read on a pool thread, waiting for its LLM reply
        channel.enter(7, threaded=True)
        try:
            got.append(channel.ask([{"role": "user", "content": "q"}]))
        finally:
            channel.leave()
    reader = threading.Thread(target=threaded_read)
    reader.start()
    time.sleep(0.05)   # its mailbox is open
    # One write: a request, the read's reply, a reply for an op that is gone, a request, and the
    # first half of a third request.
    third = encode_frame({"op": "read", "id": 9})
    os.write(w, encode_frame({"op": "read", "id": 8}) + encode_frame({"op": "llm_reply", "id": 7, "text": "a"})
             + encode_frame({"op": "llm_reply", "id": 99, "text": "late"}) + encode_frame({"op": "write", "id": 10})
             + third[:5])
    assert channel.next_request() == {"op": "read", "id": 8}
    assert channel.next_request() == {"op": "write", "id": 10}
    reader.join(5)
    assert got == [{"op": "llm_reply", "id": 7, "text": "a"}]
    os.write(w, third[5:])
    assert channel.next_request() == {"op": "read", "id": 9}
    os.close(w)
    with pytest.raises(EOFError):
        channel.next_request()
    os.close(r)


def test_the_pool_grows_to_its_size_reuses_idle_threads_and_queues_the_rest():
    release, lock = threading.Event(), threading.Lock()
    running, peak, done = [0], [0], []

    def run(i):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        release.wait(5)
        with lock:
            running[0] -= 1
            done.append(i)
    pool = ReadPool(3, run)
    t0 = time.monotonic()
    for i in range(5):
        pool.submit(i)
    assert time.monotonic() - t0 < 0.5       # submit never waits for a thread to come up
    time.sleep(0.2)
    assert pool.threads == 3 and peak[0] == 3 and not done
    release.set()
    deadline = time.monotonic() + 5
    while len(done) < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(done) == [0, 1, 2, 3, 4]
    time.sleep(0.05)
    for i in range(5, 8):
        pool.submit(i)
    while len(done) < 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(done) == list(range(8)) and pool.threads == 3   # the same three threads

"""Issue 28: endpoints as they are -- the shared limiter's rate state (pure, on a given clock), its
threaded gate (priority order, patience) and its header parsing."""
import threading
import time

import pytest

from mstar.llm.limiter import (EndpointLimiter, RateLimitedError, endpoint_key, limit_named, parse_duration,
                               parse_limit_hints)
from mstar.llm.pacer import BURST_S, DECREASE, NO_HINT_PAUSE_S, LimitHints, Pacer


# ------------------------------------------------------------------ the pacer, on a given clock
def test_an_endpoint_that_never_says_no_is_never_paced():
    p = Pacer()
    assert all(p.wait(t * 0.001) == 0 for t in range(5000))
    assert p.rate is None and p.cuts == 0


def test_a_rare_429_delays_only_the_call_it_refused():
    p = Pacer()
    for i in range(50):
        assert p.wait(i * 0.01) == 0
    assert p.limited_now(0.6, sent_at=0.49, retry_after=2.0) == 2.0    # 1 of 50: this call waits alone
    assert p.wait(0.61) == 0 and p.rate is None and p.cuts == 0


def test_429s_past_a_tenth_of_the_answers_pause_everyone_and_pace_below_what_was_taken():
    p = Pacer()
    for i in range(20):                      # 20 requests go out in the first 0.2 s ...
        assert p.wait(i * 0.01) == 0
    p.served(0.3)
    assert p.limited_now(0.40, sent_at=0.19, retry_after=2.0) == 2.0   # 1 of 20: alone
    assert p.limited_now(0.41, sent_at=0.18, retry_after=2.0) == 0.0   # 2 of 20: a tenth -- limited
    assert p.wait(0.5) == pytest.approx(1.91)          # the shared pause, for any caller
    # paced at DECREASE x what the endpoint took over the window (18 not refused in 5 s)
    assert p.rate == pytest.approx(DECREASE * 18 / 5.0)
    assert p.wait(2.41) == 0                           # the pause is over: one request goes ...
    assert p.wait(2.41) == pytest.approx(1 / p.rate)   # ... and the next waits its spacing: no burst after a cut


def test_a_429_for_a_request_sent_before_the_last_cut_does_not_cut_again():
    p = Pacer()
    for i in range(20):
        p.wait(i * 0.01)
    for k in range(2):
        p.limited_now(1.0, sent_at=0.1, retry_after=0.0)
    rate = p.rate
    assert rate is not None and p.cuts == 1
    p.limited_now(1.1, sent_at=0.15, retry_after=0.0)   # in flight when the cut came
    assert p.rate == rate and p.cuts == 1 and p.limited == 3
    p.wait(1.2)
    p.limited_now(1.5, sent_at=1.2, retry_after=0.0)   # sent after the cut: news
    assert p.rate < rate and p.cuts == 2


def test_without_retry_after_one_refused_burst_is_one_back_off_step():
    # Issue 41: an endpoint that sends no Retry-After. 20 requests sent together are refused
    # together: one answer, one step of the pause -- not twenty doublings (a minute, nothing in flight).
    p = Pacer()
    for i in range(20):
        assert p.wait(i * 0.01) == 0
    for i in range(20):
        p.limited_now(0.5 + i * 0.001, sent_at=i * 0.01, retry_after=None)
    assert p.not_before == pytest.approx(0.519 + NO_HINT_PAUSE_S)
    # A request sent after that pause, refused again: the pause was too short -- the next step.
    assert p.wait(p.not_before) == 0
    p.limited_now(2.0, sent_at=1.52, retry_after=None)
    p.limited_now(2.01, sent_at=1.52, retry_after=None)    # the same round trip: no further step
    assert p.not_before == pytest.approx(2.01 + 2 * NO_HINT_PAUSE_S)
    # A reply: the endpoint takes requests again, the pause starts over.
    p.served(4.5)
    p.limited_now(5.0, sent_at=4.6, retry_after=None)
    assert p.not_before == pytest.approx(5.0 + NO_HINT_PAUSE_S)


def test_refusals_that_go_on_at_any_pace_do_not_spiral_it_down_to_nothing():
    # An endpoint that takes 200 requests a second for six seconds, then refuses one in four
    # whatever the pace.
    p, t, n = Pacer(), 0.0, 0
    while t < 120.0:
        delay = p.wait(t)
        if delay > 0:
            t += delay
            continue
        n += 1
        if t > 6.0 and n % 4 == 0:
            p.limited_now(t + 0.01, sent_at=t, retry_after=0.0)
        else:
            p.served(t + 0.3)
        t += 0.005
    assert p.cuts > 3                                  # it was taken for a limit ...
    assert p.rate >= 0.25 * 200 * 0.75 * 0.9          # ... but kept a quarter of what was taken (3 in 4)


def test_the_rate_grows_back_only_while_callers_wait_on_it():
    p = Pacer()
    for i in range(10):
        p.wait(i * 0.1)
    p.limited_now(1.0, sent_at=0.9, retry_after=0.0)      # 1 in 10: limited
    cut = p.rate
    assert cut is not None
    p.served(2.0)
    p.served(12.0)                   # ten seconds with no caller held back: no growth
    assert p.rate == pytest.approx(cut)
    t = 12.0
    while p.wait(t) == 0:            # demand above the pace
        pass
    p.served(22.0)
    assert p.rate > cut


def test_rpm_is_a_ceiling_and_headers_lower_it():
    p = Pacer(rpm=600)
    assert p.rate == pytest.approx(10.0)
    sent = sum(p.wait(i / 1000) == 0 for i in range(3000))   # three seconds of eager callers
    assert sent <= 10 * (3 + BURST_S) + 1
    p.served(3.0, LimitHints(limit_requests=300))
    assert p.rate == pytest.approx(5.0)
    p.served(3.1, LimitHints(remaining_requests=0, reset_requests_s=4.0))
    assert p.wait(3.2) == pytest.approx(3.9)


def test_tpm_paces_tokens_and_is_corrected_by_the_real_count():
    p = Pacer(tpm=6000)                      # 100 tokens a second
    assert p.wait(0.0, tokens=100) == 0
    assert p.wait(0.0, tokens=100) == 0      # one second of burst
    assert p.wait(0.0, tokens=100) == pytest.approx(1.0)
    p.served(0.5, token_error=200)           # the replies were 200 tokens longer than estimated
    assert p.wait(0.5, tokens=100) == pytest.approx(2.5)


def test_a_429_that_names_the_tokens_limit_paces_tokens_and_leaves_requests_alone():
    p = Pacer()
    for i in range(10):
        p.wait(i * 0.1, tokens=1000)
    p.limited_now(1.0, sent_at=0.9, retry_after=0.0, which="tokens", tokens=1000)   # 1 in 10: limited
    assert p.rate is None                                   # requests stay unpaced
    assert p.token_rate == pytest.approx(DECREASE * 9000 / 5.0)
    p.limited_now(1.1, sent_at=1.05, retry_after=0.0, which=None, tokens=1000)   # names neither: both
    assert p.rate is not None


@pytest.mark.parametrize("message,which", [
    ("Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000", "tokens"),
    ("Rate limit reached for gpt-4o in organization org-x on requests per min (RPM): Limit 500", "requests"),
    ("Requests to the ChatCompletions_Create Operation have exceeded token rate limit", "tokens"),
    ("Too many requests", None), ("", None)])
def test_which_limit_a_429_names(message, which):
    assert limit_named(message) == which


@pytest.mark.parametrize("bad", [0, -5, float("nan")])
def test_a_pace_that_is_not_positive_is_refused(bad):
    with pytest.raises(ValueError, match="--rpm must be a positive number"):
        Pacer(rpm=bad)


# ------------------------------------------------------------------ headers
@pytest.mark.parametrize("raw,secs", [("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5),
                                      ("0.5", 0.5), ("", None), ("soon", None), ("5x", None), ("12", 12.0)])
def test_durations_in_the_forms_providers_send(raw, secs):
    assert parse_duration(raw) == (pytest.approx(secs) if secs is not None else None)


def test_limit_hints_from_headers():
    h = parse_limit_hints({"x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "0",
                           "x-ratelimit-reset-requests": "120ms", "x-ratelimit-limit-tokens": "oops"})
    assert h == LimitHints(limit_requests=500.0, remaining_requests=0.0, reset_requests_s=0.12)
    assert parse_limit_hints({"content-type": "application/json"}) is None


def test_endpoint_key_tells_keys_apart_without_holding_them():
    a, b = endpoint_key("http://h/v1", "sk-one"), endpoint_key("http://h/v1", "sk-two")
    assert a != b and "sk-one" not in a and a.startswith("http://h/v1#")
    assert endpoint_key(None, "k").startswith("https://api.openai.com/v1#")


# ------------------------------------------------------------------ the threaded gate
def _until(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.002)


def test_waiting_callers_get_their_permits_by_priority_then_arrival():
    now = [100.0]                                # a clock that moves only when the test says so
    lim = EndpointLimiter("ep", rpm=60 * 20, clock=lambda: now[0])   # 20 a second: 50 ms apart
    for _ in range(21):                          # the burst: one second's worth, and one more
        lim.acquire()
    order, threads = [], []

    def ask(name, prio):
        lim.acquire(prio)
        order.append(name)

    for k, (name, prio) in enumerate([("normal-1", 1), ("last", 2), ("normal-2", 1), ("first", 0)], 1):
        threads.append(threading.Thread(target=ask, args=(name, prio)))
        threads[-1].start()
        _until(lambda: len(lim._queue) == k)     # queued in this order
    for k in range(1, 5):
        now[0] += 0.05                           # one spacing later: one permit
        lim.released()                           # wake the waiters to look at the clock again
        _until(lambda: len(order) == k)
    for th in threads:
        th.join(5)
    assert order == ["first", "normal-1", "normal-2", "last"]
    assert lim.status()["held_calls"] == 4


def test_an_endpoint_that_only_refuses_runs_out_of_patience_for_every_caller():
    lim = EndpointLimiter("http://h/v1#abc", patience_s=0.3)
    sent = lim.acquire()
    lim.refused(sent, retry_after=1.5)            # pauses everyone for longer than the patience
    errors = []

    def ask():
        try:
            lim.acquire()
        except RateLimitedError as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    t0 = time.monotonic()
    for th in threads:
        th.start()
    for th in threads:
        th.join(5)
    assert len(errors) == 4 and time.monotonic() - t0 < 2
    assert errors[0].startswith("rate limited: http://h/v1 has answered 429") and "#abc" not in errors[0]
    lim.served()                                  # a reply: patience starts over
    assert lim.acquire(tokens=0) > 0


def test_patience_must_be_positive():
    with pytest.raises(ValueError, match="patience"):
        EndpointLimiter("ep", patience_s=0)


def test_the_rate_shown_is_the_replies_of_the_last_minute_not_the_pace():
    # Issue 41: the progress line said "throttled to 918/min" under a 600/min limit (the pace the
    # pacer probed at) and 0/min while a pause held everyone (the pacer's 5 s window).
    now = [0.0]
    lim = EndpointLimiter("ep", rpm=1200, clock=lambda: now[0])
    for k in range(300):                          # 300 replies over a minute: 300/min served
        now[0] = k * 0.2
        lim.acquire()
        lim.served()
    st = lim.status()
    assert st["pace_rpm"] == 1200.0 and st["answered_rpm"] == pytest.approx(300, abs=1)
    now[0] += 10.0                                # ten seconds with nothing answered (a pause)
    st = lim.status()
    assert st["served_rpm"] == 0 and st["answered_rpm"] == pytest.approx(250, abs=1)   # 250 in the last minute
    fresh = EndpointLimiter("ep", clock=lambda: now[0])
    start = now[0]
    for k in range(20):                           # 20 replies in the first 10 s: 120/min so far
        now[0] = start + (k + 1) * 0.5
        fresh.served()
    assert fresh.status()["answered_rpm"] == pytest.approx(120)

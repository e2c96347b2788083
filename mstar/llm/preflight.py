"""The check a run makes before it spends anything: one cheap call to each role served by an
endpoint (`LLMRouter.preflight`, `mstar evolve` / `mstar resume` without --no-preflight).

A wrong key, a model the server does not know, a base URL that points nowhere: each would
otherwise surface only after the seeds were evaluated (or, worse, be scored as wrong answers).
Roles that send the same request to the same endpoint with the same key share one call. The
call bypasses the response cache (a cached reply proves nothing about the key), is retried like
any other call on transient faults, and goes to the ledger as kind "preflight". Its completion is
capped at MAX_TOKENS (or the role's own max_tokens, if lower). An empty or truncated reply still
passes: the server accepted the request. Offline roles need no check; a
role served by a command is checked for its program only (its calls may be slow and paid).
"""
from __future__ import annotations

import inspect
import json
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from mstar.llm.retry import retry_delay
from mstar.llm.types import EmptyCompletionError, FatalLLMError, LLMError, TransientLLMError, UsageRecord

PROMPT = [{"role": "user", "content": "Connection check: reply with the single word ok."}]
# The check needs one word, not an answer: a model that does not say "ok" (a base model behind
# llama.cpp) would otherwise write up to its role's max_tokens -- 604 tokens, minutes on a CPU.
MAX_TOKENS = 16

# What to fix when every attempt failed the same transient way, by the error's kind.
ADVICE = {
    "timeout": "the server does not answer in time: check that it is up, or raise timeout_s",
    "connection": "nothing answers there: check that the server is up and the base URL is right",
    "rate_limit": "the server refuses every request as over its rate limit: check the account's quota",
    "server_error": "the server fails on every request: check the model name and the server's logs",
    "malformed": "the server's replies are not OpenAI chat completions: check the base URL",
}


@dataclass
class RoleCheck:
    role: str
    model: str
    where: str                  # base URL or command; "" for the default endpoint
    ok: bool
    seconds: float = 0.0
    attempts: int = 0
    message: str | None = None  # one line: what failed and what to fix
    fatal: bool = False         # no retry helped or could help (a key, a model, a request)
    skipped: str | None = None  # why no call was made (offline role)

    def line(self) -> str:
        if self.skipped:
            return f"{self.role:<10} {self.skipped}"
        if self.ok:
            return f"{self.role:<10} ok ({self.model}, {self.seconds:.1f}s)"
        return f"{self.role:<10} FAILED: {self.message}"


def _group_key(backend) -> str:
    params = backend.request_params() if hasattr(backend, "request_params") else {}
    cfg = getattr(backend, "_cfg", None)
    return json.dumps([backend.name, backend.model, getattr(backend, "base_url", None),
                       getattr(cfg, "api_key_env", None), params], sort_keys=True, default=str)


def check_roles(router, roles=None) -> list[RoleCheck]:
    """One check per distinct endpoint request, run at once; a RoleCheck per role, in order."""
    from mstar.config import ROLES

    roles = list(roles or ROLES)
    out: dict[str, RoleCheck] = {}
    groups: dict[str, list[str]] = {}
    for role in roles:
        b = router.backend(role)
        if b.name == "offline":
            out[role] = RoleCheck(role, b.model, "", True, skipped="offline (no check needed)")
        elif b.name == "command":
            out[role] = _check_command(role, b)
        else:
            groups.setdefault(_group_key(b), []).append(role)
    results: dict[str, RoleCheck] = {}

    def run(members: list[str]) -> None:
        results[members[0]] = _check_endpoint(router, members[0])

    threads = [threading.Thread(target=run, args=(m,), daemon=True, name="preflight") for m in groups.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for members in groups.values():
        first = results[members[0]]
        for role in members:
            out[role] = first if role == members[0] else RoleCheck(
                role, first.model, first.where, first.ok, first.seconds, first.attempts,
                first.message.replace(f"role {members[0]!r}", f"role {role!r}", 1) if first.message else None,
                first.fatal)
    return [out[r] for r in roles]


def _check_command(role: str, backend) -> RoleCheck:
    exe = backend.argv[0]
    found = shutil.which(exe) or (Path(exe).is_file() and exe)
    where = " ".join(backend.argv)
    if found:
        return RoleCheck(role, backend.model, where, True, skipped=f"command {exe!r} found (not called)")
    return RoleCheck(role, backend.model, where, False, message=(
        f"role {role!r}: command {exe!r} not found -- check {role}.command (the program must be on PATH "
        "or a path to an executable)"), fatal=True)


def _complete_capped(backend):
    """The check's call, its completion capped at MAX_TOKENS where the backend takes a cap."""
    if "max_tokens" in inspect.signature(backend.complete).parameters:
        return backend.complete(PROMPT, max_tokens=MAX_TOKENS)
    return backend.complete(PROMPT)


def _check_endpoint(router, role: str) -> RoleCheck:
    backend, policy = router.backend(role), router.policy(role)
    where = getattr(backend, "base_url", None) or ""
    t0 = time.perf_counter()
    errors: list[str] = []
    kinds: list[str] = []
    resp, fatal, answered = None, None, False
    for attempt in range(policy.retry.max_retries + 1):
        retry_after = None
        try:
            resp = _complete_capped(backend)
            answered = True
            break
        except EmptyCompletionError:
            answered = True             # the server took the request: key, model and URL are fine
            break
        except TransientLLMError as exc:
            errors.append(str(exc))
            kinds.append(exc.kind)
            retry_after = exc.retry_after
            router.attempt_failed(role, exc.kind, str(exc))
        except LLMError as exc:
            errors.append(str(exc))
            fatal = exc
            router.attempt_failed(role, type(exc).__name__, str(exc))
            break
        except Exception as exc:  # noqa: BLE001 -- an unexpected client error: report it, do not crash
            errors.append(f"role {role!r}: {type(exc).__name__}: {exc}")
            fatal = exc
            break
        if attempt < policy.retry.max_retries:
            time.sleep(retry_delay(policy.retry, attempt + 1, retry_after))
    seconds = time.perf_counter() - t0
    ok = answered
    message = None
    if fatal is not None:
        message = errors[-1]
        if not isinstance(fatal, FatalLLMError) and " -- " not in message:
            message += " -- check the role's settings and the server"
    elif not ok:
        advice = ADVICE.get(kinds[-1], "check that the server is up and the base URL and model are right")
        message = f"{errors[-1]}; gave up after {len(errors)} attempt(s) -- {advice}"
    router.ledger.add(UsageRecord(
        role, backend.model, backend.name, resp.prompt_tokens if resp else 0,
        resp.completion_tokens if resp else 0, round(seconds, 4), error=message,
        retries=len(errors) if ok else max(0, len(errors) - 1), attempt_errors=list(errors), kind="preflight",
        finish_reason=resp.finish_reason if resp else None, scope="preflight",
        cached_tokens=resp.cached_tokens if resp else 0))
    return RoleCheck(role, backend.model, where, ok, round(seconds, 2), len(errors) + (1 if resp else 0),
                     message, fatal=fatal is not None)

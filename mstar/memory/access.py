"""Who may use which namespace: `mstar serve --access FILE`, a token per client and the namespaces
it may use, so one served memory can hold several users' or agents' namespaces without any of
them reading another's.

The file (TOML; it names tokens only by their SHA-256 or by an environment variable, so it holds
no secret and may be kept with the rest of a deployment's configuration):

    [clients.alice]
    token_sha256 = "<64 hex digits: printf %s "$TOKEN" | sha256sum>"
    namespaces = ["alice"]

    [clients.agents]
    token_env = "MSTAR_TOKEN_AGENTS"          # the token itself, in the server's environment
    namespaces = ["agent-*", "shared"]         # a trailing * : every name that starts so; "*" : all

Every HTTP request carries `Authorization: Bearer <token>` of one client, or gets 401 (AccessGuard);
every tool call names a namespace the client may use, or is refused with one line naming the
client and its namespaces (Access.check). The single-token mode ($MSTAR_SERVE_TOKEN: one client,
every namespace) stays for one user; stdio has no clients (the host that launched it is the user).
Tokens are compared by their SHA-256, each against every client, in constant time.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from mstar.memory.store import NAMESPACE_RE, StoreError

_HEX64 = re.compile(r"[0-9a-f]{64}")
_CLIENT_KEYS = {"token_sha256", "token_env", "namespaces"}


class AccessError(ValueError):
    """An access file that cannot be used; the message names the file, the client and the problem."""


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Client:
    name: str
    digest: str                          # SHA-256 of its token, hex
    namespaces: tuple[str, ...]          # exact names, "prefix*", or "*"

    def may_use(self, namespace: str) -> bool:
        for allowed in self.namespaces:
            if allowed == namespace or allowed == "*" or (
                    allowed.endswith("*") and namespace.startswith(allowed[:-1])):
                return True
        return False


@dataclass(frozen=True)
class Access:
    clients: tuple[Client, ...]
    source: str = ""                     # the file it was read from

    @classmethod
    def load(cls, path: str | Path, environ: Mapping[str, str] | None = None) -> "Access":
        """The clients of an access file; AccessError with one line for anything wrong in it."""
        environ = os.environ if environ is None else environ
        path = Path(path)
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise AccessError(f"--access {path}: cannot be read ({exc.strerror or exc})") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise AccessError(f"--access {path}: not valid TOML ({' '.join(str(exc).split())})") from None
        extra = set(table) - {"clients"}
        if extra:
            raise AccessError(f"--access {path}: unknown table(s) {sorted(extra)}; the file holds [clients.NAME] tables")
        clients_table = table.get("clients")
        if not isinstance(clients_table, dict) or not clients_table:
            raise AccessError(f"--access {path}: no clients; add a [clients.NAME] table with token_sha256 (or "
                              "token_env) and namespaces")
        clients = tuple(_client(path, name, spec, environ) for name, spec in clients_table.items())
        seen: dict[str, str] = {}
        for client in clients:
            if client.digest in seen:
                raise AccessError(f"--access {path}: clients {seen[client.digest]!r} and {client.name!r} have the same "
                                  "token; give each client a token of its own")
            seen[client.digest] = client.name
        return cls(clients, str(path))

    def client_for(self, authorization: str | None) -> Client | None:
        """The client whose token an `Authorization: Bearer <token>` value carries, else None."""
        if not authorization or not authorization.startswith("Bearer "):
            return None
        digest = token_digest(authorization[len("Bearer "):]).encode()
        found = None
        for client in self.clients:         # every client compared: the time says nothing about which matched
            if hmac.compare_digest(digest, client.digest.encode()):
                found = client
        return found

    def check(self, headers: Mapping[str, str] | None, namespace: str) -> Client:
        """The client of a tool call (its request's headers) if it may use `namespace`; otherwise
        StoreError with one line. A call without headers (no HTTP request) is refused too."""
        authorization = None
        if headers is not None:
            authorization = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
        client = self.client_for(authorization)
        if client is None:
            raise StoreError("this call carries no token of a client (Authorization: Bearer <token>)")
        if not client.may_use(namespace):
            raise StoreError(f"namespace {namespace!r} refused: client {client.name!r} may use only "
                             f"{', '.join(client.namespaces)}")
        return client

    def visible(self, client: Client, namespaces: list[str]) -> list[str]:
        """The namespaces of a list (a store's, say) that `client` may see."""
        return [ns for ns in namespaces if client.may_use(ns)]


def _client(path: Path, name: Any, spec: Any, environ: Mapping[str, str]) -> Client:
    where = f"--access {path}: client {name!r}"
    if not isinstance(spec, dict):
        raise AccessError(f"{where}: must be a table ([clients.{name}])")
    unknown = set(spec) - _CLIENT_KEYS
    if unknown:
        raise AccessError(f"{where}: unknown key(s) {sorted(unknown)}; a client has token_sha256 or token_env, "
                          "and namespaces")
    if ("token_sha256" in spec) == ("token_env" in spec):
        raise AccessError(f"{where}: give exactly one of token_sha256 (the token's SHA-256, hex) and token_env "
                          "(an environment variable holding the token)")
    if "token_sha256" in spec:
        digest = spec["token_sha256"]
        if not isinstance(digest, str) or not _HEX64.fullmatch(digest.lower()):
            raise AccessError(f"{where}: token_sha256 must be 64 hex digits (printf %s \"$TOKEN\" | sha256sum)")
        digest = digest.lower()
    else:
        var = spec["token_env"]
        token = environ.get(var) if isinstance(var, str) else None
        if not token:
            raise AccessError(f"{where}: token_env names ${var}, which is not set (or empty) in the server's "
                              "environment")
        digest = token_digest(token)
    namespaces = spec.get("namespaces")
    if not isinstance(namespaces, list) or not namespaces or not all(isinstance(n, str) for n in namespaces):
        raise AccessError(f"{where}: namespaces must be a list of names, e.g. namespaces = [\"alice\"]")
    for pattern in namespaces:
        stem = pattern[:-1] if pattern.endswith("*") else pattern
        if pattern != "*" and not (NAMESPACE_RE.fullmatch(stem) or (pattern.endswith("*") and not stem)):
            raise AccessError(f"{where}: namespace {json.dumps(pattern)} is not a namespace name, a prefix "
                              "followed by *, or \"*\"")
    return Client(str(name), digest, tuple(namespaces))


async def send_unauthorized(send: Any, reason: str) -> None:
    """A 401 whose body is a JSON-RPC error: the SDK's client shows its message (a bare 401 reaches
    it as "Server returned an error response"). Both guards answer so (server.BearerGuard too)."""
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
        "code": -32001, "message": f"401 Unauthorized: {reason}"}}).encode("utf-8")
    await send({"type": "http.response.start", "status": 401,
                "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class AccessGuard:
    """ASGI middleware: every HTTP request carries the token of one of the file's clients, or gets 401.
    (Which namespaces it may use is checked per tool call: Access.check.)"""

    def __init__(self, app: Any, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            given = next((v for k, v in scope.get("headers", []) if k.lower() == b"authorization"), b"")
            if self.access.client_for(given.decode("latin-1")) is None:
                reason = "unknown bearer token" if given else "no bearer token (send Authorization: Bearer <token>)"
                await send_unauthorized(send, f"{reason} (this server takes the tokens of its access file)")
                return
        await self.app(scope, receive, send)

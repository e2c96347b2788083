"""Host and Origin checks against DNS rebinding, for every address `mstar serve` binds over HTTP.

A DNS rebinding attack points a name the attacker controls (`evil.example`) at the server's
address; a browser that loaded the attacker's page then sends it requests with
`Host: evil.example` and `Origin: http://evil.example`, and without a token (loopback) gets
answers. The SDK checks Host and Origin only when bound to 127.0.0.1, localhost or ::1, so a
server on 127.0.0.2 (still loopback, still no token) or 0.0.0.0 answered them. This check runs
for every bind, the SDK's own switched off (it would refuse the names given with --allow-host):

  Host    must name the server itself: the address it is bound to (any port); on a wildcard bind
          (0.0.0.0, ::) any IP address -- a request to an IP literal involves no DNS, so it cannot
          be a rebinding; `localhost` on a loopback or wildcard bind; and the names given with
          `--allow-host` (a DNS name clients use, a reverse proxy's name).
  Origin  absent (agents and SDK clients send none), or http(s) on a host the Host rule allows
          (any port: a local web client runs on a port of its own). `Origin: null` is refused.

A refused request gets one JSON line and no session: 421 for the Host, 403 for the Origin.
"""
from __future__ import annotations

import ipaddress
import json
import re
from typing import Any, Iterable
from urllib.parse import urlsplit

# What --allow-host takes: a DNS name (letters, digits, '-', dots between labels) or an IP address.
_NAME_RE = re.compile(r"(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*")


class HostNameError(ValueError):
    """An --allow-host value that is not a host name or address (the message says which)."""


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def allowed_name(name: str) -> str:
    """An --allow-host value, normalised (lower case, no trailing dot); HostNameError if it is not one."""
    given = name
    name = name.strip().lower().removesuffix(".")
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if _ip(name) is None and not _NAME_RE.fullmatch(name):
        raise HostNameError(f"--allow-host {given!r}: give a host name (like memory.example.com) or an IP "
                            "address, without scheme or port")
    return str(_ip(name)) if _ip(name) is not None else name


def split_host(value: str) -> str | None:
    """The host part of a Host header value ("name:port", "[v6]:port", "name"), lower case; None when
    it is not one."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or (value[end + 1:] and not re.fullmatch(r":\d{1,5}", value[end + 1:])):
            return None
        inner = value[1:end]
        return str(_ip(inner)) if isinstance(_ip(inner), ipaddress.IPv6Address) else None
    host, _, port = value.partition(":")
    if port and not port.isdigit() or not host:
        return None
    return host.removesuffix(".")


class HostCheck:
    """Which Host and Origin values a server bound to `bound` answers."""

    def __init__(self, bound: str, allow_hosts: Iterable[str] = ()) -> None:
        address = _ip(bound.strip("[]"))
        self.wildcard = address is not None and address.is_unspecified
        self.loopback = bound == "localhost" or (address is not None and address.is_loopback)
        self.addresses = {str(address)} if address is not None and not self.wildcard else set()
        self.names = {allowed_name(n) for n in allow_hosts}
        if self.loopback or self.wildcard:
            self.names.add("localhost")

    def host_ok(self, host: str | None) -> bool:
        """Whether a host (without port, lower case) names this server."""
        if not host:
            return False
        address = _ip(host)
        if address is not None:
            return self.wildcard or str(address) in self.addresses or str(address) in self.names
        return host in self.names

    def header_ok(self, value: str | None) -> bool:
        """The Host header's rule."""
        return value is not None and self.host_ok(split_host(value))

    def origin_ok(self, origin: str | None) -> bool:
        """The Origin header's rule (absent is fine)."""
        if origin is None:
            return True
        try:
            parts = urlsplit(origin.strip())
            hostname = parts.hostname
            parts.port                                   # noqa: B018 -- raises on a port that is not a number
        except ValueError:
            return False
        return parts.scheme in ("http", "https") and self.host_ok(hostname.removesuffix(".") if hostname else None)

    def describe(self) -> str:
        shown = sorted(self.addresses) + sorted(self.names)
        return ("any IP address, " if self.wildcard else "") + ", ".join(shown)


class HostGuard:
    """ASGI middleware: HTTP requests whose Host or Origin fails `check` get 421 / 403 (the server
    serves no websockets)."""

    def __init__(self, app: Any, check: HostCheck) -> None:
        self.app = app
        self.check = check

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            headers: dict[bytes, list[str]] = {}
            for key, value in scope.get("headers", []):
                headers.setdefault(key.lower(), []).append(value.decode("latin-1"))
            hosts, origins = headers.get(b"host", []), headers.get(b"origin", [])
            # Two Host (or Origin) headers are refused: which one a proxy or the SDK would read is unknown.
            if len(hosts) != 1 or not self.check.header_ok(hosts[0]):
                shown = hosts[0] if len(hosts) == 1 else hosts
                return await _refuse(send, 421, f"Host {shown!r} is not this server's (it answers to "
                                     f"{self.check.describe()}; add a name with --allow-host)")
            if len(origins) > 1 or not self.check.origin_ok(origins[0] if origins else None):
                shown = origins[0] if len(origins) == 1 else origins
                return await _refuse(send, 403, f"Origin {shown!r} is not allowed (allowed: absent, or http(s) on "
                                     f"{self.check.describe()}; add a name with --allow-host)")
        await self.app(scope, receive, send)


async def _refuse(send: Any, status: int, message: str) -> None:
    body = (json.dumps({"error": message}) + "\n").encode("utf-8")
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def sdk_check_off() -> Any:
    """The SDK's transport settings with its own Host/Origin check off (HostGuard replaces it; the
    SDK still checks the Content-Type of POSTs)."""
    from mcp.server.transport_security import TransportSecuritySettings
    return TransportSecuritySettings(enable_dns_rebinding_protection=False)

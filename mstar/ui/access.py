"""Who may read the runs: loopback by default; any other address needs a token.

The UI shows prompts, answers, programs and spend, so it is not for the network at large:
  - bound to a loopback address without a token, every request must name a loopback host in its
    Host header (localhost, 127.x, [::1]). A web page elsewhere that points its own name at
    127.0.0.1 (DNS rebinding) sends its own name there, and is refused;
  - bound to any other address, a token is required (given with --token, else generated and
    printed once) and checked on every request, static files included: as a bearer header,
    a `token` query parameter, or the cookie the first page sets after a `?token=` link, which
    the page's own requests (and its live stream: EventSource cannot send headers) then carry.
Tokens are compared in constant time.
"""
from __future__ import annotations

import hmac
import ipaddress
import secrets
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie

COOKIE = "mstar_ui_token"
LOOPBACK_NAMES = ("localhost", "localhost.", "ip6-localhost")


def is_loopback(host: str) -> bool:
    """A loopback name or address (127.0.0.0/8, ::1), with or without brackets."""
    host = host.strip().strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(header: str) -> str:
    """The host of a Host header, without its port: "[::1]:8787" -> "::1", "a:80" -> "a"."""
    header = header.strip()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def new_token() -> str:
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class Verdict:
    ok: bool
    status: int = 200
    reason: str = ""
    set_cookie: bool = False        # the token came in the query: remember it in a cookie


@dataclass(frozen=True)
class Access:
    token: str | None               # None: no token (loopback only)
    loopback: bool                  # the server is bound to a loopback address

    def __post_init__(self):
        if not self.loopback and not self.token:
            raise ValueError("a server on a non-loopback address needs a token")

    def check(self, headers, query: dict[str, list[str]]) -> Verdict:
        """Verdict for one request from its headers and parsed query string."""
        if self.token is None:
            host = headers.get("Host") or ""
            if not is_loopback(host_name(host)):
                return Verdict(False, 403, f"Host {host!r} is not a loopback name: this server answers only "
                                           "http://127.0.0.1 or http://localhost")
            return Verdict(True)
        given = query.get("token", [None])[0]
        if given is not None and self._same(given):
            return Verdict(True, set_cookie=True)
        auth = headers.get("Authorization") or ""
        if auth.startswith("Bearer ") and self._same(auth[7:].strip()):
            return Verdict(True)
        if self._same(_cookie(headers.get("Cookie") or "")):
            return Verdict(True)
        return Verdict(False, 401, "a token is required: open the address `mstar ui` printed (it ends in ?token=...)")

    def _same(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), str(self.token).encode())

    def cookie_header(self) -> str:
        return f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"


def _cookie(header: str) -> str | None:
    try:
        jar = SimpleCookie(header)
    except CookieError:
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None

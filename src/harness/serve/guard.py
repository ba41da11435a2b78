"""What a browser may make the server do: the Host a request names, its Origin, its body's type.

A server without keys trusts whatever reaches its loopback port, and a browser reaches that
port for every web page its user visits. Two attacks follow, and each leaves a mark in a header
that :class:`RequestGuard` checks on every request, before any route runs:

- *Cross-site requests.* A page on ``https://evil.example`` posts a turn to
  ``http://127.0.0.1:8000``. Sent as ``text/plain`` (or as a form) it is a "simple" request,
  which the browser sends without asking the server first (no CORS preflight): the page cannot
  read the answer, but the turn runs. Such a request names its page in ``Origin``, and its body
  cannot be JSON: a page may send ``Content-Type: application/json`` to another origin only
  after a preflight this server never grants. So a body must be declared JSON, and an
  ``Origin`` must be the server's own.
- *DNS rebinding.* ``evil.example`` resolves to the attacker, then to 127.0.0.1: the browser
  takes the server for the attacker's own origin and lets the page read every answer. Only the
  ``Host`` header still says ``evil.example``, so a request must name a host the server answers
  to: a loopback name or address, or one the operator allowed.

With API keys the keys are the boundary (a page does not have the key), and the same checks
make a key in a browser tab useless to other pages. ``Host`` is then checked against the names
the operator gave (``ServeConfig.allowed_hosts``); without any, a keyed server answers every
name, as it must behind names it cannot know. ``docs/serve.md`` (trust boundary) has the rules.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from starlette.types import ASGIApp, Receive, Scope, Send

from harness.serve.config import host_name
from harness.serve.http import error_response, is_loopback

__all__ = ["RequestGuard", "allowed_hosts_for"]

_AUTHORITY: Final = re.compile(
    r"(?P<host>\[[0-9a-f:.]+\]|[a-z0-9._-]+)(?::(?P<port>[1-9][0-9]{0,4}))?"
)
"""A ``Host`` header (or an origin's host and port): a name or address, an optional port."""
_ORIGIN: Final = re.compile(r"(?P<scheme>https?)://(?P<authority>[^/?#]*)")
_JSON: Final = re.compile(r"application/(?:json|[a-z0-9!#$&^_.+-]+\+json)")
"""The media types of a JSON body (``application/json``, ``application/problem+json``...);
a page may send none of them to another origin without a preflight."""
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_WITH_BODY: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_HOST_FREE: Final = frozenset({"/healthz", "/health"})
"""Paths any Host may reach: a load balancer probes a backend by its address, and ``ok`` is
all there is to read."""
_SHOWN: Final = 80


def allowed_hosts_for(
    listen: str, extra: Sequence[str] = (), *, keyed: bool
) -> tuple[str, ...] | None:
    """The ``ServeConfig.allowed_hosts`` of a server listening on ``listen`` (``--host``).

    Host names are checked without keys always, and with keys when the operator named the
    server (``--host`` a name, or loopback) or listed names (``--allowed-host``). A keyed server
    on an address (``0.0.0.0``, a LAN address) with no list answers every name: clients reach
    it by names and addresses the operator has not said (None).
    """
    names = list(extra)
    try:
        address = ipaddress.ip_address(listen.strip("[]"))
    except ValueError:
        address = None
    if address is None or not address.is_unspecified:
        names.append(listen)  # what a client that uses the --host value sends
    checked = not keyed or bool(extra) or address is None or address.is_loopback
    return tuple(names) if checked else None


@dataclass(frozen=True, slots=True)
class _Authority:
    host: str
    port: int | None

    @classmethod
    def parse(cls, value: str) -> _Authority | None:
        """A ``Host`` header's name and port; None when it is not one."""
        match = _AUTHORITY.fullmatch(value.lower())
        if match is None:
            return None
        try:
            host = host_name(match["host"])
        except ValueError:
            return None
        if match["host"].startswith("[") != (":" in host):
            return None  # an IPv6 address is bracketed, and nothing else is
        port = match["port"]
        return cls(host, int(port) if port is not None else None)

    def port_or(self, scheme: str) -> int:
        return self.port if self.port is not None else _DEFAULT_PORTS[scheme]


def _loopback(host: str) -> bool:
    return host == "localhost" or host.endswith(".localhost") or is_loopback(host)


class RequestGuard:
    """Refuses, before any route, a request a browser was made to send for another page.

    In order: a ``Host`` the server does not answer to (421 ``host_not_allowed``), an
    ``Origin`` other than the server's own or a listed one (403 ``origin_not_allowed``), a
    body that is not declared JSON (415 ``unsupported_media_type``).

    Args:
        app: The application behind it.
        allowed_hosts: Host names or addresses a request may name besides the loopback ones
            (``localhost``, ``*.localhost``, 127.0.0.0/8, ``[::1]``), on any port; None lets
            every name through.
        cors_origins: Other pages' origins let through (``ServeConfig.cors_origins``, in
            :func:`~harness.serve.config.web_origin`'s spelling). An ``Origin`` must be one of
            them byte for byte, as a browser sends it: CORS answers exactly those strings, so
            a looser match here would run requests whose answers the page cannot read.
    """

    def __init__(
        self,
        app: ASGIApp,
        allowed_hosts: Iterable[str] | None,
        cors_origins: Iterable[str] = (),
    ) -> None:
        self.app = app
        self.hosts = (
            None if allowed_hosts is None else frozenset(host_name(h) for h in allowed_hosts)
        )
        self.origins = frozenset(cors_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = self.refusal(scope)
            if refusal is not None:
                status, code, message = refusal
                await error_response(status, code, message)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def refusal(self, scope: Scope) -> tuple[int, str, str] | None:
        """Why the request is refused (status, code, message); None when it may go on."""
        headers: dict[bytes, list[str]] = {}
        for name, value in scope["headers"]:
            headers.setdefault(name.lower(), []).append(value.decode("latin-1"))
        hosts = headers.get(b"host", [])
        authority = _Authority.parse(hosts[0]) if len(hosts) == 1 else None
        if not self._host_allowed(authority, scope["path"]):
            return 421, "host_not_allowed", self._host_message(scope, hosts)
        origins = headers.get(b"origin", [])
        listed = len(origins) == 1 and origins[0] in self.origins
        if origins and not listed and not self._own_origin(origins, authority, scope["scheme"]):
            message = (
                f"refused a request sent by the web page at {origins[0][:_SHOWN]!r}: this "
                "server answers only its own page, the origins given with --cors-origin, and "
                "clients that send no Origin header"
            )
            return 403, "origin_not_allowed", message
        types = headers.get(b"content-type", [])
        if scope["method"] in _WITH_BODY and (types or _has_body(headers)) and not _json(types):
            got = repr(types[0][:_SHOWN]) if types else "none"
            message = (
                "a request body must be JSON, sent with 'Content-Type: application/json' "
                f"(the request's content type: {got})"
            )
            return 415, "unsupported_media_type", message
        return None

    def _host_allowed(self, authority: _Authority | None, path: str) -> bool:
        if self.hosts is None or path in _HOST_FREE:
            return True
        return authority is not None and (_loopback(authority.host) or authority.host in self.hosts)

    @staticmethod
    def _own_origin(origins: list[str], authority: _Authority | None, scheme: str) -> bool:
        """Whether the request's ``Origin`` is the origin the request was sent to.

        The host and port are the ``Host`` header's; the scheme is the request's, or https in
        front of a plain-http server (a proxy that terminates TLS and does not say so).
        """
        if len(origins) != 1 or authority is None:
            return False
        match = _ORIGIN.fullmatch(origins[0].lower())
        if match is None or match["scheme"] not in (scheme, "https"):
            return False
        origin = _Authority.parse(match["authority"])
        if origin is None:
            return False
        return (origin.host, origin.port_or(match["scheme"])) == (
            authority.host,
            authority.port_or(match["scheme"]),
        )

    def _host_message(self, scope: Scope, hosts: list[str]) -> str:
        server = scope.get("server")
        port = f":{server[1]}" if server and server[1] else ""
        named = f"host {hosts[0][:_SHOWN]!r}" if len(hosts) == 1 else "no single host"
        return (
            f"the request names {named}, which this server does not answer to; open it at "
            f"http://127.0.0.1{port}/, or start it with --allowed-host NAME "
            "(ServeConfig(allowed_hosts=...)) to answer that name"
        )


def _json(types: list[str]) -> bool:
    """Whether the one content type declared is JSON's (its parameters, a charset, aside)."""
    return len(types) == 1 and bool(_JSON.fullmatch(types[0].split(";")[0].strip().lower()))


def _has_body(headers: dict[bytes, list[str]]) -> bool:
    if b"transfer-encoding" in headers:
        return True
    for length in headers.get(b"content-length", []):
        try:
            if int(length) > 0:
                return True
        except ValueError:
            return True  # not a length: assume the worst (the server refuses it anyway)
    return False

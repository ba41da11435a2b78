"""What the operator sets for a served agent: who may call it and how much a request may take."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from harness.errors import ConfigError
from harness.serve.keys import ApiKeys

if TYPE_CHECKING:
    from harness.serve.limits import UserLimits

__all__ = ["DEFAULT_SERVE", "ServeConfig", "host_name", "web_origin"]

_LABEL: Final = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?")
_WEB_ORIGIN: Final = re.compile(
    r"(?P<scheme>[A-Za-z]+)://(?P<host>\[[0-9A-Fa-f:.]+\]|[^/:?#\[\]@\\]+)"
    r"(?::(?P<port>[0-9]{1,5}))?/?"
)
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def host_name(value: str) -> str:
    """A host name or an IP address (IPv6 with or without brackets) as Host is compared.

    Lowercase, an address in its short form, so that every spelling of one host is one entry.

    Raises:
        ValueError: It is neither (a URL, a port, a wildcard, a blank).
    """
    name = value.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        return ipaddress.ip_address(name).compressed
    except ValueError:
        pass
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        msg = (
            f"{value[:80]!r} is not a host name or an IP address (give a name such as "
            "agent.example.com, without a scheme, port or wildcard)"
        )
        raise ValueError(msg)
    return name


def web_origin(value: str) -> str:
    """A web page's origin as a browser sends it in ``Origin``: ``scheme://host[:port]``.

    Lowercase, the default port left out, an IPv6 address bracketed in its short form: the one
    spelling a browser uses, which the server then compares byte for byte.

    Raises:
        ValueError: It is not an http or https origin (a path, a wildcard, userinfo, a port
            out of range, ``null``).
    """
    shown = value[:80]
    match = _WEB_ORIGIN.fullmatch(value.strip())
    scheme = match["scheme"].lower() if match else ""
    if match is None or scheme not in _DEFAULT_PORTS:
        msg = (
            f"{shown!r} is not a web origin: give scheme://host[:port], such as "
            "https://app.example.com or http://localhost:3000 (no path, no wildcard)"
        )
        raise ValueError(msg)
    try:
        host = host_name(match["host"])
    except ValueError:
        msg = f"{shown!r} is not a web origin: its host is not a host name or an IP address"
        raise ValueError(msg) from None
    if ":" in host:
        host = f"[{host}]"
    port = match["port"]
    if port is not None and not 0 < int(port) < 65536:
        raise ValueError(f"{shown!r} is not a web origin: its port is out of range")
    if port is None or int(port) == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{int(port)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServeConfig:
    """Limits and keys of :func:`~harness.serve.create_app`.

    Args:
        keys: The API keys and their users; None serves one local user (no user id) and
            answers only requests from loopback addresses.
        max_body_bytes: The largest request body; a larger one gets 413.
        max_header_bytes: The most all of a request's headers may hold; more gets 431.
        max_input_chars: The longest new turn (the text the model is given); longer: 413.
        body_timeout: Seconds to receive a whole body; a slower client gets 408.
        session_wait: Seconds a request waits while another turn runs on its session, in this
            process or another worker; then 409 ``session_busy``.
        turn_timeout: Seconds a turn may run; then it is interrupted (its completed steps are
            saved) and the request gets 504, or a ``error`` event on a stream.
        flush_wait: After ``turn.completed``, a turn's event stream waits this long for the
            turn's memory flush and reports it (``memory.flushed``); 0 ends the stream at once.
        ping_seconds: A streamed response sends an SSE comment after this much silence, so
            proxies keep the connection and a gone client is noticed.
        max_history: The most messages ``GET /v1/sessions/{id}`` returns (the newest).
        allowed_hosts: The host names (or addresses) a request's ``Host`` may name besides the
            loopback ones, which are always allowed (``localhost``, ``*.localhost``,
            127.0.0.0/8, ``[::1]``, on any port); anything else gets 421. None (the default)
            allows no others without keys, and every name with keys. A server reached by a
            name (behind a proxy, a tunnel, DNS) lists it; ``docs/serve.md`` says why.
        cors_origins: Web origins (``https://app.example.com``) whose pages may call the
            server from a browser: CORS answers them, and the request guard lets them through.
            Every other page stays refused. Checked and normalized here (:func:`web_origin`).
        metrics_open: ``GET /metrics`` answers without a key (for a scraper on a private
            network); by default it needs any valid key on a keyed server.
        limits: What each user (each key) may use: requests per minute, turns at once,
            tokens and cost a day (:mod:`harness.serve.limits`). None: no limits.
        engine: A durable engine, ``temporal://HOST:PORT[/NAMESPACE][?task_queue=Q]``: each
            turn runs as a workflow that any server of the engine's queue continues when its
            own dies (:mod:`harness.serve.engine`, ``docs/durable-execution.md``); the served
            agent must be made with ``durable=True``. None (the default) runs turns here.
    """

    keys: ApiKeys | None = None
    max_body_bytes: int = 1_000_000
    max_header_bytes: int = 16_384
    max_input_chars: int = 100_000
    body_timeout: float = 30.0
    session_wait: float = 5.0
    turn_timeout: float = 600.0
    flush_wait: float = 30.0
    ping_seconds: float = 15.0
    max_history: int = 1_000
    allowed_hosts: tuple[str, ...] | None = None
    cors_origins: tuple[str, ...] = ()
    metrics_open: bool = False
    limits: UserLimits | None = None
    engine: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.cors_origins, str):
            raise ConfigError("cors_origins is a tuple of origins, not one string")
        try:
            origins = tuple(dict.fromkeys(web_origin(origin) for origin in self.cors_origins))
        except ValueError as exc:
            raise ConfigError(f"CORS origin {exc}") from None
        object.__setattr__(self, "cors_origins", origins)
        if self.allowed_hosts is None:
            return
        if isinstance(self.allowed_hosts, str):
            raise ConfigError("allowed_hosts is a tuple of host names, not one string")
        try:
            names = tuple(host_name(name) for name in self.allowed_hosts)
        except ValueError as exc:
            raise ConfigError(f"allowed host {exc}") from None
        object.__setattr__(self, "allowed_hosts", names)  # frozen: normalized once, here


DEFAULT_SERVE: Final = ServeConfig()

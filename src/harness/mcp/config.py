"""Which MCP servers an agent uses: :class:`MCPServerConfig` and the operator's ``tools.json``.

A ``tools.json`` file lists servers the agent connects to, in the format other MCP clients use,
plus per-server ``allow``/``deny`` lists::

    {
      "mcpServers": {
        "calc":   {"command": "python", "args": ["calc_server.py"], "env": {"KEY": "${CALC_KEY}"},
                   "deny": ["reset"]},
        "search": {"url": "http://127.0.0.1:8000/mcp",
                   "headers": {"Authorization": "Bearer ${SEARCH_TOKEN}"},
                   "allow": ["query"], "startupTimeout": 10, "callTimeout": 60}
      }
    }

A server has either ``command`` (with optional ``args``, ``env`` and ``cwd``: a process spoken to
over stdio) or ``url`` (with optional ``headers``: streamable HTTP), never both. An optional
``type`` (``"stdio"``, ``"streamableHttp"``/``"http"``) is accepted for compatibility and must
agree. ``allow`` keeps only the named tools of that server, ``deny`` drops the named ones
(deny wins). ``startupTimeout`` (seconds, default 20) bounds connecting and listing tools;
``callTimeout`` (seconds, default 300) bounds one tool call. ``${NAME}`` in ``command``,
``args``, ``env``, ``cwd``, ``url`` and ``headers`` is replaced by the environment variable
``NAME`` of the harness process, so secrets stay out of the file; ``$${`` writes a literal
``${``. Unknown keys are errors, so a typo (``"alow"``) does not silently open every tool.

The tool of a server ``calc`` named ``add`` reaches the model as ``calc__add``.

**Trust.** A server's ``command`` runs a program on this machine, so the file comes only from
the operator: a path given in Python (``HarnessAgent(mcp_config=...)``) or on the command line
(``--mcp-config``), read from the local disk and refused when it lies inside the workspace,
whose files the agent writes (through its file tools, ``execute`` or the sandbox). A
``tools.json`` in the workspace is never read (see ``docs/security.md``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from harness.errors import ConfigError

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_STARTUP_TIMEOUT",
    "TOOLS_FILE",
    "MCPServerConfig",
    "load_mcp_config",
    "merge_servers",
    "parse_tools_json",
]

TOOLS_FILE: Final = "tools.json"
"""The usual name of a file that lists MCP servers."""

DEFAULT_STARTUP_TIMEOUT: Final = 20.0
"""Seconds a server gets to start, connect and list its tools before it is given up on."""

DEFAULT_CALL_TIMEOUT: Final = 300.0
"""Seconds one tool call may take before the model is told it timed out."""

TOOL_SEPARATOR: Final = "__"
"""Joins a server's name and its tool's name into the name the model sees."""

_SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,48}")
_ENV_REF = re.compile(r"\$(\$?)\{([^}]*)\}")
_KEYS: Final = frozenset(
    {
        "type",
        "command",
        "args",
        "env",
        "cwd",
        "url",
        "headers",
        "allow",
        "deny",
        "startupTimeout",
        "callTimeout",
    }
)
_STDIO_TYPES: Final = frozenset({"stdio"})
_HTTP_TYPES: Final = frozenset({"streamableHttp", "streamable-http", "streamable_http", "http"})


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPServerConfig:
    """One MCP server: how to reach it and which of its tools the agent may use.

    Args:
        name: The server's name; its tools reach the model as ``<name>__<tool>``. Letters,
            digits, ``_`` and ``-``, at most 48 characters.
        command: The program that runs the server (stdio transport).
        args: Its arguments.
        env: Environment variables for it, over the SDK's safe default set (``PATH``,
            ``HOME``, ...): the harness's own environment is not passed on wholesale.
        cwd: Its working directory (the harness's when None).
        url: The server's streamable HTTP endpoint, e.g. ``http://127.0.0.1:8000/mcp``.
        headers: HTTP headers sent with every request (e.g. ``Authorization``).
        allow: Only these tools of the server (by the server's own names); None allows all.
        deny: Never these tools; deny wins over allow.
        startup_timeout: Seconds to start, connect and list tools before giving up.
        call_timeout: Seconds one tool call may take; None waits as long as it takes.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    allow: tuple[str, ...] | None = None
    deny: tuple[str, ...] = ()
    startup_timeout: float = DEFAULT_STARTUP_TIMEOUT
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT

    def __post_init__(self) -> None:
        if not _SERVER_NAME.fullmatch(self.name):
            msg = (
                f"MCP server name {self.name!r} must be 1-48 letters, digits, '_' or '-' "
                "(it prefixes the names of its tools)"
            )
            raise ValueError(msg)
        if (self.command is None) == (self.url is None):
            msg = (
                f"MCP server {self.name!r} needs exactly one of command (a process over stdio) "
                f"or url (streamable HTTP); got {'both' if self.command else 'neither'}"
            )
            raise ValueError(msg)
        if self.command is not None and not self.command.strip():
            msg = f"MCP server {self.name!r}: command is empty"
            raise ValueError(msg)
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            msg = f"MCP server {self.name!r}: url {self.url!r} must start with http:// or https://"
            raise ValueError(msg)
        if self.url is None and self.headers:
            msg = f"MCP server {self.name!r}: headers are for url servers, not command servers"
            raise ValueError(msg)
        if self.command is None and (self.args or self.env or self.cwd):
            msg = f"MCP server {self.name!r}: args, env and cwd are for command servers"
            raise ValueError(msg)
        if not self.startup_timeout > 0:
            msg = (
                f"MCP server {self.name!r}: startup_timeout must be > 0, got {self.startup_timeout}"
            )
            raise ValueError(msg)
        if self.call_timeout is not None and not self.call_timeout > 0:
            msg = f"MCP server {self.name!r}: call_timeout must be > 0, got {self.call_timeout}"
            raise ValueError(msg)
        # Lists are accepted from Python callers; stored as tuples so the config stays a value.
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "deny", tuple(self.deny))
        if self.allow is not None:
            object.__setattr__(self, "allow", tuple(self.allow))

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """``"stdio"`` for a command, ``"http"`` for a url."""
        return "stdio" if self.command is not None else "http"

    def allows(self, tool: str) -> bool:
        """Whether the server's tool ``tool`` is offered to the model (deny wins over allow)."""
        if tool in self.deny:
            return False
        return self.allow is None or tool in self.allow

    def tool_name(self, tool: str) -> str:
        """The name the model sees for the server's tool ``tool``."""
        return f"{self.name}{TOOL_SEPARATOR}{tool}"


def parse_tools_json(
    text: str, *, source: str = TOOLS_FILE, environ: Mapping[str, str] | None = None
) -> list[MCPServerConfig]:
    """The MCP servers of a ``tools.json`` text (see the module docstring for the format).

    Args:
        text: The file's content; blank text means no servers.
        source: The file's path, for error messages.
        environ: Where ``${NAME}`` references are looked up; ``os.environ`` by default.

    Raises:
        ConfigError: The text is not JSON, or a server entry is malformed; the message names the
            file, the entry and the problem.
    """
    if not text.strip():
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        msg = f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        raise ConfigError(msg) from exc
    if not isinstance(data, dict):
        msg = f'{source} must hold a JSON object like {{"mcpServers": {{...}}}}'
        raise ConfigError(msg)
    servers = data.get("mcpServers", {})
    if not isinstance(servers, dict):
        msg = f'{source}: "mcpServers" must be an object of server name to server settings'
        raise ConfigError(msg)
    env = os.environ if environ is None else environ
    return [_server(name, entry, source, env) for name, entry in servers.items()]


def load_mcp_config(path: Path) -> list[MCPServerConfig]:
    """The MCP servers of the operator's ``tools.json`` at ``path``.

    Blocking (it reads the file): call it from a worker thread in async code.

    Raises:
        ConfigError: The file is missing, unreadable or malformed (the message names it).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        msg = f"no MCP configuration at {path}: give the path of a tools.json file"
        raise ConfigError(msg) from None
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"cannot read the MCP configuration {path}: {exc}"
        raise ConfigError(msg) from None
    return parse_tools_json(text, source=str(path))


def _server(name: str, entry: Any, source: str, environ: Mapping[str, str]) -> MCPServerConfig:
    where = f"{source}: mcpServers.{name}"
    if not isinstance(entry, dict):
        msg = f'{where} must be an object with "command" or "url"'
        raise ConfigError(msg)
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        msg = f"{where} has unknown keys {unknown}; known keys are {sorted(_KEYS)}"
        raise ConfigError(msg)
    kind = entry.get("type")
    if kind is not None:
        expected = "command" if kind in _STDIO_TYPES else "url" if kind in _HTTP_TYPES else None
        if expected is None:
            msg = f'{where}: "type" {kind!r} is not "stdio" or "streamableHttp"'
            raise ConfigError(msg)
        if expected not in entry:
            msg = f'{where}: "type" {kind!r} needs "{expected}"'
            raise ConfigError(msg)

    def text(key: str) -> str | None:
        value = entry.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            msg = f'{where}: "{key}" must be a string, got {type(value).__name__}'
            raise ConfigError(msg)
        return _expand(value, f"{where}.{key}", environ)

    def strings(key: str) -> tuple[str, ...] | None:
        value = entry.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            msg = f'{where}: "{key}" must be a list of strings'
            raise ConfigError(msg)
        return tuple(value)

    def mapping(key: str) -> dict[str, str]:
        value = entry.get(key, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            msg = f'{where}: "{key}" must be an object of string values'
            raise ConfigError(msg)
        return {k: _expand(v, f"{where}.{key}.{k}", environ) for k, v in value.items()}

    def seconds(key: str, default: float) -> float:
        value = entry.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            msg = f'{where}: "{key}" must be a positive number of seconds, got {value!r}'
            raise ConfigError(msg)
        return float(value)

    args = strings("args") or ()
    try:
        return MCPServerConfig(
            name=name,
            command=text("command"),
            args=tuple(_expand(arg, f"{where}.args", environ) for arg in args),
            env=mapping("env"),
            cwd=text("cwd"),
            url=text("url"),
            headers=mapping("headers"),
            allow=strings("allow"),
            deny=strings("deny") or (),
            startup_timeout=seconds("startupTimeout", DEFAULT_STARTUP_TIMEOUT),
            call_timeout=seconds("callTimeout", DEFAULT_CALL_TIMEOUT),
        )
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from exc


def _expand(value: str, where: str, environ: Mapping[str, str]) -> str:
    """Replace ``${NAME}`` with the environment variable; ``$${`` stays a literal ``${``."""

    def substitute(match: re.Match[str]) -> str:
        escaped, name = match.group(1), match.group(2)
        if escaped:
            return "${" + name + "}"
        if name not in environ:
            msg = (
                f"{where} refers to ${{{name}}}, but the environment variable {name} is not "
                "set; set it or write the value in the file"
            )
            raise ConfigError(msg)
        return environ[name]

    return _ENV_REF.sub(substitute, value)


def merge_servers(
    configured: Sequence[MCPServerConfig], from_file: Sequence[MCPServerConfig], source: str
) -> list[MCPServerConfig]:
    """The servers given in code, then those of ``tools.json``; a name used twice is an error.

    Raises:
        ConfigError: Both name the same server.
    """
    names = {server.name for server in configured}
    for server in from_file:
        if server.name in names:
            msg = (
                f"MCP server {server.name!r} is configured both in {source} and in code; "
                "rename or remove one of them"
            )
            raise ConfigError(msg)
    return [*configured, *from_file]

"""The tools of several MCP servers as kernel :class:`~harness.kernel.Tool` objects.

:class:`MCPToolset` starts every configured server at once, lists each one's tools, keeps those
its ``allow``/``deny`` lists let through, and describes each to the model under the name
``<server>__<tool>`` with the server's own description and input schema. Calling such a tool
sends ``tools/call`` to its server and returns the text of the result; an error result, a
timeout or a dead server raises inside the tool, which the toolkit turns into an ``is_error``
result the model can read and act on.

A server that cannot start is reported once, as a warning naming it and the reason, and the
agent goes on without its tools: one broken server must not take the agent down.

The schema comes from the server, not from a Python signature, so these tools take their
arguments as one JSON object (a pydantic ``RootModel`` of a dict) checked against the server's
input schema with ``jsonschema`` (which the ``mcp`` SDK depends on): the model's call and a
reviewer's edit of it are refused here, with what is wrong, before they reach the server. A
schema ``jsonschema`` cannot read leaves the check to the server.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import RootModel, model_validator

from harness.kernel import ImageBlock, TextBlock, Tool, ToolSchema
from harness.mcp._connection import MCPConnection, MCPServerUnavailable, MCPToolError
from harness.mcp.config import MCPServerConfig

if TYPE_CHECKING:
    from mcp_types import CallToolResult
    from mcp_types import Tool as MCPTool

__all__ = ["MCPToolset", "mcp_tool", "render_result"]

logger = logging.getLogger(__name__)

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class _Arguments(RootModel[dict[str, Any]]):
    """Any JSON object: an MCP tool's arguments, checked by its server."""


def _arguments_for(schema: dict[str, Any]) -> type[_Arguments]:
    """The arguments of a tool with this input schema: a JSON object the schema accepts."""
    # Here, not at the top: it takes a moment to import, and only MCP tools need it.
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
    from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]
    from jsonschema.validators import validator_for  # type: ignore[import-untyped]

    checker = validator_for(schema, default=Draft202012Validator)
    try:
        checker.check_schema(schema)
    except SchemaError:
        return _Arguments  # a schema jsonschema cannot read: the server checks
    validator = checker(schema)

    class Arguments(_Arguments):
        @model_validator(mode="after")
        def _fits(self) -> Arguments:
            errors = sorted(validator.iter_errors(self.root), key=lambda e: list(e.path))[:3]
            if errors:
                said = "; ".join(
                    f"{'.'.join(str(p) for p in error.path) or 'arguments'}: {error.message}"
                    for error in errors
                )
                raise ValueError(said)
            return self

    return Arguments


class MCPToolset:
    """The tools of a set of MCP servers, from :meth:`start` until :meth:`aclose`.

    Args:
        servers: The servers; their names must differ.

    Use it as ``async with MCPToolset(servers) as toolset: toolset.tools`` or call
    :meth:`start` and :meth:`aclose` yourself. Both must run on the event loop the tools are
    called from.
    """

    def __init__(self, servers: Sequence[MCPServerConfig]) -> None:
        names = [server.name for server in servers]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            msg = f"MCP server names must differ; used more than once: {duplicates}"
            raise ValueError(msg)
        self.servers = tuple(servers)
        self.connections = [MCPConnection(server) for server in self.servers]
        self.tools: list[Tool] = []
        self.failures: dict[str, str] = {}
        """Servers that did not start, by name, with the reason."""
        self._started = False

    async def start(self) -> list[Tool]:
        """Start every server concurrently and return the tools of those that came up.

        A server that fails is logged once (a warning naming it and the reason) and left out.

        Raises:
            ConfigError: The ``mcp`` package is not installed.
        """
        if self._started:
            msg = "this MCPToolset was already started"
            raise RuntimeError(msg)
        self._started = True
        outcomes = await asyncio.gather(
            *(connection.start() for connection in self.connections), return_exceptions=True
        )
        for connection, outcome in zip(self.connections, outcomes, strict=True):
            if isinstance(outcome, MCPServerUnavailable):
                self.failures[connection.name] = str(outcome)
                logger.warning(
                    "MCP server %r is not available, the agent runs without its tools: %s",
                    connection.name,
                    outcome,
                )
            elif isinstance(outcome, BaseException):
                await self.aclose()
                raise outcome
            else:
                self.tools.extend(self._offered(connection, outcome))
        return list(self.tools)

    async def aclose(self) -> None:
        """Close every session and stop every server process; waits until they are gone."""
        await asyncio.gather(*(connection.aclose() for connection in self.connections))

    async def __aenter__(self) -> MCPToolset:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _offered(self, connection: MCPConnection, listed: Sequence[MCPTool]) -> list[Tool]:
        config = connection.config
        names = {tool.name for tool in listed}
        for kind, wanted in (("allow", config.allow or ()), ("deny", config.deny)):
            missing = sorted(set(wanted) - names)
            if missing:
                logger.warning(
                    "MCP server %r has no tools %s named in its %s list; it has %s",
                    config.name,
                    missing,
                    kind,
                    sorted(names),
                )
        tools: list[Tool] = []
        for listed_tool in listed:
            if not config.allows(listed_tool.name):
                continue
            try:
                tools.append(mcp_tool(connection, listed_tool))
            except ValueError as exc:
                logger.warning("MCP server %r: tool left out: %s", config.name, exc)
        return tools


def mcp_tool(connection: MCPConnection, listed: MCPTool) -> Tool:
    """A kernel tool that calls the tool ``listed`` of the server behind ``connection``.

    Raises:
        ValueError: The combined name is not a valid tool name (too long, odd characters).
    """
    name = connection.config.tool_name(listed.name)
    if not _TOOL_NAME.fullmatch(name):
        msg = f"{name!r} is not a valid tool name (1-64 letters, digits, '_' or '-')"
        raise ValueError(msg)
    remote = listed.name
    description = listed.description or listed.title or f"Tool {remote!r} of {connection.name}."

    async def call(root: dict[str, Any]) -> str | list[TextBlock | ImageBlock]:
        return render_result(await connection.call(remote, root), connection.name, remote)

    call.__name__ = call.__qualname__ = name
    parameters = _parameters(listed.input_schema)
    schema = ToolSchema(name=name, description=description, parameters=parameters)
    return Tool(name, description, call, _arguments_for(parameters), schema, None)


def render_result(
    result: CallToolResult, server: str, tool: str
) -> str | list[TextBlock | ImageBlock]:
    """What the model gets from a tool result: its text, with images kept as images.

    Raises:
        MCPToolError: The result is an error; the message carries the server's text.
    """
    blocks: list[TextBlock | ImageBlock] = []
    for item in result.content:
        if item.type == "text":
            blocks.append(TextBlock(text=item.text))
        elif item.type == "image":
            blocks.append(ImageBlock(data=item.data, media_type=item.mime_type))
        elif item.type == "audio":
            blocks.append(TextBlock(text=f"[audio ({item.mime_type}) not shown]"))
        elif item.type == "resource":
            contents = item.resource
            text = getattr(contents, "text", None)
            blocks.append(
                TextBlock(text=text if isinstance(text, str) else f"[resource {contents.uri}]")
            )
        else:  # resource_link
            label = f" ({item.description})" if item.description else ""
            blocks.append(TextBlock(text=f"[resource {item.uri}: {item.name}{label}]"))
    if not blocks and result.structured_content is not None:
        blocks.append(TextBlock(text=json.dumps(result.structured_content, ensure_ascii=False)))
    if result.is_error:
        text = "\n".join(b.text for b in blocks if isinstance(b, TextBlock)) or "no details"
        msg = f"MCP server {server!r} answered the call of {tool!r} with an error: {text}"
        raise MCPToolError(msg)
    if not blocks:
        return "(no output)"
    if all(isinstance(block, TextBlock) for block in blocks):
        return "\n".join(block.text for block in blocks if isinstance(block, TextBlock))
    return blocks


def _parameters(schema: dict[str, Any]) -> dict[str, Any]:
    """The server's input schema as the model is shown it: an object, without title noise."""
    parameters = _drop_titles(schema)
    if not isinstance(parameters, dict):
        parameters = {}
    parameters.setdefault("type", "object")
    parameters.setdefault("properties", {})
    parameters.pop("$schema", None)
    return parameters


def _drop_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            key: _drop_titles(value)
            for key, value in node.items()
            if not (key == "title" and isinstance(value, str))
        }
    if isinstance(node, list):
        return [_drop_titles(item) for item in node]
    return node

"""Tools of external Model Context Protocol servers, offered to the agent as its own.

Servers are configured in code (:class:`MCPServerConfig`) or in the operator's ``tools.json``
(:func:`parse_tools_json` documents the format), started by :class:`MCPToolset`, and wired into
an agent by :class:`MCPHook`. Importing this package does not import the optional ``mcp`` SDK;
starting a server does, and without it says how to install the ``mcp`` extra.
"""

from harness.errors import MCPServerUnavailable, MCPToolError
from harness.mcp.config import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_STARTUP_TIMEOUT,
    TOOLS_FILE,
    MCPServerConfig,
    load_mcp_config,
    merge_servers,
    parse_tools_json,
)
from harness.mcp.hook import MCPHook
from harness.mcp.toolset import MCPToolset, mcp_tool, render_result

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_STARTUP_TIMEOUT",
    "TOOLS_FILE",
    "MCPHook",
    "MCPServerConfig",
    "MCPServerUnavailable",
    "MCPToolError",
    "MCPToolset",
    "load_mcp_config",
    "mcp_tool",
    "merge_servers",
    "parse_tools_json",
    "render_result",
]

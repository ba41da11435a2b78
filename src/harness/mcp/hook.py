"""MCP hook: start the agent's MCP servers at its first call and put their tools in its toolkit.

An agent is built synchronously, but connecting to MCP servers is async, so the servers start
lazily: at the first :class:`~harness.kernel.PreCall` the hook reads the operator's
``tools.json`` (:mod:`harness.mcp.config`), adds the servers given in code, starts them all
concurrently (:class:`~harness.mcp.MCPToolset`) and registers their tools in the agent's
toolkit. The kernel computes a step's tool list after PreCall, so the tools are offered from the
first reasoning step on. Later calls find them registered; concurrent first calls start the
servers once. Servers are started once per agent and ``tools.json`` is read once: a change
takes effect with the next agent. :meth:`MCPHook.aclose` stops the servers and removes their
tools.

The file is the operator's, never the workspace's: a server is a program run on this machine,
and every file of the workspace (a user's ``users/<id>/tools.json`` too) is one the model can
write. A file given inside the workspace is refused; a ``tools.json`` found at the workspace
root, where earlier versions read it, is reported once and left unread.

A malformed ``tools.json`` raises :class:`~harness.errors.ConfigError` from the call (and again
from the next one until it is fixed); a server that fails to start is only a warning.

Priority 1: right after the trace (0), so every other hook, at every event of every call, sees
the agent with its complete toolkit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import ClassVar

from harness.errors import ConfigError
from harness.filesystem.base import FileTools
from harness.kernel import Event, Hook, HookHost, PreCall, Tool, Toolkit
from harness.mcp.config import TOOLS_FILE, MCPServerConfig, load_mcp_config, merge_servers
from harness.mcp.toolset import MCPToolset
from harness.workspace import WorkspaceManager

__all__ = ["MCPHook"]

logger = logging.getLogger(__name__)


class MCPHook(Hook):
    """Starts MCP servers at the agent's first call and registers their tools.

    Args:
        servers: Servers configured in code.
        config_file: The operator's ``tools.json``, listing more servers; None reads none.
        workspace: The agent's workspace: ``config_file`` must lie outside it, and a
            ``tools.json`` left at its root is reported as not read.
        toolkit: The toolkit to register the tools in; by default that of the agent the hook
            is registered with (see :meth:`attach`), which is built after its hooks.
        allowed: Register only the tools of these names (``<server>__<tool>``), as the
            agent's ``allowed_tools`` says; None registers every tool the servers offer.
    """

    priority = 1
    events: ClassVar[tuple[type[Event], ...]] = (PreCall,)

    def __init__(
        self,
        servers: Sequence[MCPServerConfig] = (),
        *,
        config_file: str | Path | None = None,
        workspace: WorkspaceManager | None = None,
        toolkit: Toolkit | None = None,
        allowed: Iterable[str] | None = None,
    ) -> None:
        self.servers = tuple(servers)
        self.allowed = frozenset(allowed) if allowed is not None else None
        MCPToolset(self.servers)  # duplicate names fail here, at construction
        self.config_file = _outside(Path(config_file), workspace) if config_file else None
        self.workspace = workspace
        self.toolkit = toolkit
        self.toolset: MCPToolset | None = None
        self.registered: list[Tool] = []
        self._lock = asyncio.Lock()
        self._closed = False

    def attach(self, agent: HookHost) -> None:
        """Register the tools in the agent's toolkit (the first agent's: see ``Hook.attach``)."""
        if self.toolkit is None:
            self.toolkit = agent.toolkit

    async def on_event(self, event: Event) -> None:
        if self.toolset is None and not self._closed:
            await self.start()

    async def start(self) -> list[Tool]:
        """Start the servers and register their tools, once; returns the registered tools.

        Raises:
            ConfigError: ``tools.json`` is malformed, or the ``mcp`` package is missing.
            RuntimeError: No toolkit was given and no agent attached it.
        """
        async with self._lock:
            if self.toolset is not None:
                return list(self.registered)
            if self._closed:
                msg = "MCPHook was closed; its servers are not started again"
                raise RuntimeError(msg)
            toolkit = self.toolkit
            if toolkit is None:
                msg = "MCPHook has no toolkit: register it with an agent, or give toolkit="
                raise RuntimeError(msg)
            servers = list(self.servers)
            if self.config_file is not None:
                from_file = await asyncio.to_thread(load_mcp_config, self.config_file)
                servers = merge_servers(self.servers, from_file, str(self.config_file))
            # Only the model's file tools can write it (a backend that only stores has none).
            backend = self.workspace.backend if self.workspace is not None else None
            if isinstance(backend, FileTools) and await backend.exists(TOOLS_FILE):
                logger.warning(
                    "%s in the workspace is not read: the agent can write it, and an MCP server "
                    "runs a program on this machine; move it out of the workspace and pass its "
                    "path as mcp_config= (harness --mcp-config FILE)",
                    TOOLS_FILE,
                )
            if self.allowed is not None:  # a server none of whose tools is allowed stays off
                servers = [s for s in servers if any(_served_by(s, n) for n in self.allowed)]
            toolset = MCPToolset(servers)
            tools = await toolset.start()
            for tool in tools:
                if self.allowed is not None and tool.name not in self.allowed:
                    continue
                if tool.name in toolkit:
                    logger.warning(
                        "MCP tool %r is left out: the agent already has a tool of that name",
                        tool.name,
                    )
                    continue
                toolkit.register(tool)
                self.registered.append(tool)
            self.toolset = toolset
            return list(self.registered)

    async def aclose(self) -> None:
        """Stop the servers and remove their tools from the toolkit."""
        async with self._lock:
            self._closed = True
            toolset, self.toolset = self.toolset, None
            if self.toolkit is not None:
                for tool in self.registered:
                    self.toolkit.remove(tool.name)
            self.registered = []
            if toolset is not None:
                await toolset.aclose()


def _served_by(server: MCPServerConfig, tool: str) -> bool:
    """Whether ``tool`` names a tool of ``server`` (``<server>__<tool>``)."""
    return tool.startswith(server.tool_name(""))


def _outside(path: Path, workspace: WorkspaceManager | None) -> Path:
    """``path`` made absolute; refused inside the workspace, whose files the agent writes."""
    resolved = path.expanduser().resolve()
    if workspace is not None and resolved.is_relative_to(workspace.root.resolve()):
        msg = (
            f"the MCP configuration {path} is inside the workspace {workspace.root}, where the "
            "agent can write it (and so choose the programs run on this machine): keep it "
            "outside the workspace"
        )
        raise ConfigError(msg)
    return resolved

"""MCP hook: start the agent's MCP servers at its first call and put their tools in its toolkit.

An agent is built synchronously, but connecting to MCP servers is async, so the servers start
lazily: at the first :class:`~harness.kernel.PreCall` the hook reads the workspace's shared
``tools.json`` (:mod:`harness.mcp.config`), adds the servers given in code, starts them all
concurrently (:class:`~harness.mcp.MCPToolset`) and registers their tools in the agent's
toolkit. The kernel computes a step's tool list after PreCall, so the tools are offered from the
first reasoning step on. Later calls find them registered; concurrent first calls start the
servers once. Servers are started once per agent and ``tools.json`` is read once: a change
takes effect with the next agent. :meth:`MCPHook.aclose` stops the servers and removes their
tools.

Only the shared ``tools.json`` at the workspace root is read, never a user's
``users/<id>/tools.json``: the toolkit belongs to the agent and serves every user's calls, so
servers one user configured would be offered to all of them.

A malformed ``tools.json`` raises :class:`~harness.errors.ConfigError` from the call (and again
from the next one until it is fixed); a server that fails to start is only a warning.

Priority 1: right after the trace (0), so every other hook, at every event of every call, sees
the agent with its complete toolkit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import ClassVar

from harness.kernel import Event, Hook, PreCall, Tool, Toolkit
from harness.mcp.config import TOOLS_FILE, MCPServerConfig, load_tools_json, merge_servers
from harness.mcp.toolset import MCPToolset
from harness.workspace import WorkspaceManager

__all__ = ["MCPHook"]

logger = logging.getLogger(__name__)


class MCPHook(Hook):
    """Starts MCP servers at the agent's first call and registers their tools.

    Args:
        servers: Servers configured in code.
        workspace: The workspace whose ``tools.json`` lists more servers; None reads none.
        toolkit: The agent's toolkit (``ReActAgent.toolkit``); may be given later through
            :meth:`attach`, since the agent that owns it is built after its hooks.
    """

    priority = 1
    events: ClassVar[tuple[type[Event], ...]] = (PreCall,)

    def __init__(
        self,
        servers: Sequence[MCPServerConfig] = (),
        *,
        workspace: WorkspaceManager | None = None,
        toolkit: Toolkit | None = None,
    ) -> None:
        self.servers = tuple(servers)
        MCPToolset(self.servers)  # duplicate names fail here, at construction
        self.workspace = workspace
        self.toolkit = toolkit
        self.toolset: MCPToolset | None = None
        self.registered: list[Tool] = []
        self._lock = asyncio.Lock()
        self._closed = False

    def attach(self, toolkit: Toolkit) -> None:
        """Register the tools in ``toolkit`` (the agent's own, e.g. ``agent.delegate.toolkit``)."""
        self.toolkit = toolkit

    async def on_event(self, event: Event) -> None:
        if self.toolset is None and not self._closed:
            await self.start()

    async def start(self) -> list[Tool]:
        """Start the servers and register their tools, once; returns the registered tools.

        Raises:
            ConfigError: ``tools.json`` is malformed, or the ``mcp`` package is missing.
            RuntimeError: No toolkit was given.
        """
        async with self._lock:
            if self.toolset is not None:
                return list(self.registered)
            if self._closed:
                msg = "MCPHook was closed; its servers are not started again"
                raise RuntimeError(msg)
            toolkit = self.toolkit
            if toolkit is None:
                msg = "MCPHook has no toolkit: call hook.attach(agent.toolkit) first"
                raise RuntimeError(msg)
            servers = list(self.servers)
            if self.workspace is not None:
                from_file = await load_tools_json(self.workspace)
                servers = merge_servers(self.servers, from_file, TOOLS_FILE)
            toolset = MCPToolset(servers)
            tools = await toolset.start()
            for tool in tools:
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

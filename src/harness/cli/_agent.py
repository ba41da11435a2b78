"""The agent a command runs: the options every such command takes, declared once, and the agent.

``run``, ``chat``, ``serve`` and the decisions of ``harness approvals`` build the same agent
from the same options (workspace, session, user, model, store, context window, model options,
MCP servers, approvals, engine, verbose). They are declared here once: :func:`agent_command`
puts them into a command's signature where its :class:`AgentArgs` parameter stands, so Typer
parses and shows them as if the command had written each one, and calls the command with one
:class:`AgentArgs` value in their place. :func:`opened_agent` builds the agent from that value.

This module sits below every command module: ``main`` registers the commands, and the commands
that build an agent import it from here, so no command module imports ``main`` back.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import inspect
import os
import typing
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeVar

from typer.models import OptionInfo

from harness.agent import HarnessAgent
from harness.cli._common import (
    MCP_CONFIG_ENV,
    ApprovalOpt,
    ContextWindowOpt,
    EngineOpt,
    MCPConfigOpt,
    ModelOpt,
    ModelOptionOpt,
    SessionOpt,
    StoreOpt,
    UserOpt,
    VerboseOpt,
    WorkspaceOpt,
    checked_workspace,
    model_options,
)
from harness.compaction import CompactionConfig
from harness.errors import ConfigError
from harness.models import context_window_from, resolve_model
from harness.stores import STORE_ENV, open_store

__all__ = ["AgentArgs", "agent_command", "cli_compaction", "connected_engine", "opened_agent"]

if TYPE_CHECKING:
    from harness.durable import TemporalEngine

R = TypeVar("R")


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentArgs:
    """The agent options of a command line, as given (the environment is read when it opens).

    ``session`` and ``user`` say whom a turn is for; ``serve`` takes them per request instead.
    """

    workspace: Path | None = None
    session: str = "default"
    user: str | None = None
    model: str | None = None
    store: str | None = None
    context_window: int | None = None
    options: tuple[str, ...] = ()
    mcp_config: Path | None = None
    approvals: tuple[str, ...] = ()
    engine: str | None = None
    verbose: bool = False


_OPTIONS: Final[tuple[tuple[str, Any, Any], ...]] = (
    ("workspace", WorkspaceOpt, None),
    ("session", SessionOpt, "default"),
    ("user", UserOpt, None),
    ("model", ModelOpt, None),
    ("store", StoreOpt, None),
    ("context_window", ContextWindowOpt, None),
    ("option", ModelOptionOpt, None),
    ("mcp_config", MCPConfigOpt, None),
    ("approval", ApprovalOpt, None),
    ("engine", EngineOpt, None),
    ("verbose", VerboseOpt, False),
)
"""The shared options in the order ``--help`` lists them: parameter name, declaration, default."""

_PER_TURN: Final = frozenset({"session", "user"})
"""The options of a command that runs turns for one session and user, which ``serve`` has not."""


def agent_command(*, per_turn: bool = True) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """Give a command the shared agent options in place of its one :class:`AgentArgs` parameter.

    The options take that parameter's place in the signature Typer reads (so in ``--help``),
    each with its own flag, help, default and check as :mod:`harness.cli._common` declares it;
    the command receives them as one :class:`AgentArgs`. ``per_turn=False`` leaves out
    ``--session`` and ``--user``. A flag the command's own options use is the command's: a
    shared option gives it up (``approvals reject -m`` is the reason, ``--model`` keeps its
    long flag), so no flag of a command ever means two things.
    """
    shared = [entry for entry in _OPTIONS if per_turn or entry[0] not in _PER_TURN]
    names = [name for name, _, _ in shared]

    def decorate(command: Callable[..., R]) -> Callable[..., R]:
        signature = inspect.signature(command, eval_str=True)
        [slot] = [p.name for p in signature.parameters.values() if p.annotation is AgentArgs]
        own = {flag for p in signature.parameters.values() for flag in _flags(p.annotation)}
        parameters: list[inspect.Parameter] = []
        for parameter in signature.parameters.values():
            if parameter.name == slot:
                parameters.extend(
                    inspect.Parameter(
                        name,
                        inspect.Parameter.KEYWORD_ONLY,
                        default=d,
                        annotation=_without_flags(a, own),
                    )
                    for name, a, d in shared
                )
            else:  # Typer passes every parameter by name
                parameters.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY))

        @functools.wraps(command)
        def with_agent_args(**given: Any) -> R:
            values = {name: given.pop(name) for name in names}
            args = AgentArgs(
                workspace=values["workspace"],
                session=values.get("session", "default"),
                user=values.get("user"),
                model=values["model"],
                store=values["store"],
                context_window=values["context_window"],
                options=tuple(values["option"] or ()),
                mcp_config=values["mcp_config"],
                approvals=tuple(values["approval"] or ()),
                engine=values["engine"],
                verbose=values["verbose"],
            )
            return command(**given, **{slot: args})

        with_agent_args.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        with_agent_args.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_agent_args

    return decorate


def _option_info(annotation: Any) -> OptionInfo | None:
    found = [m for m in getattr(annotation, "__metadata__", ()) if isinstance(m, OptionInfo)]
    return found[0] if found else None


def _flags(annotation: Any) -> set[str]:
    """The flags an ``Annotated[..., typer.Option(...)]`` declares (none for anything else)."""
    info = _option_info(annotation)
    return {d for d in info.param_decls or () if d.startswith("-")} if info is not None else set()


def _without_flags(annotation: Any, taken: set[str]) -> Any:
    """The option declared without the flags in ``taken``."""
    info = _option_info(annotation)
    if info is None or not _flags(annotation) & taken:
        return annotation
    kept = copy.copy(info)
    kept.param_decls = tuple(d for d in info.param_decls or () if d not in taken)
    return Annotated[(typing.get_args(annotation)[0], kept)]


def cli_compaction(context_window: int | None) -> CompactionConfig:
    """Compaction for the command line, which keeps sessions going across any number of turns.

    With a known window, compact at half of it and keep a fifth: the system prompt and the
    tools, which the trigger does not count, take much of a small model's window. The summary's
    input is held to half the window, so the summarizer's own request fits.
    """
    if context_window is None:
        return CompactionConfig()
    return CompactionConfig(
        trigger_fraction=0.5,
        keep_fraction=0.2,
        context_window=context_window,
        max_summary_input_tokens=max(1, context_window // 2),
    )


@contextlib.asynccontextmanager
async def opened_agent(given: AgentArgs) -> AsyncIterator[HarnessAgent]:
    """The agent of a command, with compaction sized to the model's window.

    The model is built here, not by the agent, to learn its window first; so it is closed here,
    and so is the store's connection (the agent closes neither).
    """
    url = given.store or os.environ.get(STORE_ENV) or None
    store = open_store(url) if url else None  # a bad URL is refused before anything is built
    async with contextlib.AsyncExitStack() as cleanup:
        if store is not None:
            cleanup.push_async_callback(store.aclose)
        window = given.context_window or context_window_from(os.environ)
        llm = await asyncio.to_thread(
            resolve_model,
            given.model,
            context_window=window,
            options=model_options(list(given.options)),
        )
        close = getattr(llm, "aclose", None)
        if close is not None:
            cleanup.push_async_callback(close)

        def build() -> HarnessAgent:  # blocking: it checks, and may create, the workspace
            return HarnessAgent(
                model=llm,
                workspace=checked_workspace(given.workspace).root,
                store=store,
                compaction=cli_compaction(window or getattr(llm, "context_window", None)),
                mcp_config=given.mcp_config or os.environ.get(MCP_CONFIG_ENV) or None,
                # Always a gate, if an empty one: a session's waiting calls stay waiting for
                # `harness approvals`, and a new turn is refused until they are decided.
                approvals=given.approvals,
                durable=given.engine is not None,  # a turn another worker may take over
            )

        async with await asyncio.to_thread(build) as agent:
            yield agent


async def connected_engine(url: str) -> TemporalEngine:
    """The durable engine ``--engine`` names, connected.

    A bad or unreachable one is a :class:`~harness.errors.ConfigError` or an
    :class:`~harness.errors.EngineUnavailable` that says what to do.
    """
    from harness.durable import TemporalEngine

    try:
        return await TemporalEngine.connect(url)
    except ValueError as exc:
        raise ConfigError(f"--engine: {exc}") from None

"""The agent options are declared once (``harness.cli._agent``) and every agent command has them.

The flags themselves, their help and their errors are pinned through the command line in
``tests/e2e``; this holds the declaration to what it promises: each command that builds an agent
takes the same options, where its ``AgentArgs`` parameter stands, and receives them as one value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from harness.cli._agent import AgentArgs, agent_command
from harness.cli.main import app

SHARED = [
    "workspace",
    "session",
    "user",
    "model",
    "store",
    "context_window",
    "option",
    "mcp_config",
    "approval",
    "engine",
    "verbose",
]
AGENT_COMMANDS = [
    ("run",),
    ("chat",),
    ("approvals", "approve"),
    ("approvals", "reject"),
    ("approvals", "edit"),
    ("approvals", "respond"),
]


def command(path: tuple[str, ...]) -> Any:
    """The command of ``harness PATH`` as Typer builds it (on the Click it ships)."""
    found: Any = typer.main.get_command(app)
    for name in path:
        found = found.commands[name]
    return found


def described(param: Any, without: frozenset[str] = frozenset()) -> tuple[object, ...]:
    opts = [opt for opt in param.opts if opt not in without]
    return (opts, param.secondary_opts, getattr(param, "help", None), param.default)


@pytest.mark.parametrize("path", AGENT_COMMANDS, ids=" ".join)
def test_every_agent_command_takes_the_same_options(path: tuple[str, ...]) -> None:
    run = {p.name: p for p in command(("run",)).params}
    params = {p.name: p for p in command(path).params}

    assert set(SHARED) <= set(params)
    own = frozenset(flag for p in params.values() if p.name not in SHARED for flag in p.opts)
    assert [described(params[name]) for name in SHARED] == [
        described(run[name], without=own) for name in SHARED
    ]


def walk(group: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every command under ``group`` with its path."""
    found: list[tuple[tuple[str, ...], Any]] = []
    for name, sub in getattr(group, "commands", {}).items():
        found += walk(sub, (*path, name)) if hasattr(sub, "commands") else [((*path, name), sub)]
    return found


def test_no_flag_of_any_command_means_two_things() -> None:
    """``approvals reject -m`` once meant both --message and --model: the documented
    ``reject ID -m "not on a Friday"`` exited 2, and with --model the reason was dropped."""
    for path, found in walk(typer.main.get_command(app)):
        flags = [flag for p in found.params for flag in (*p.opts, *p.secondary_opts)]
        assert len(flags) == len(set(flags)), (path, sorted(flags))
    reject = {p.name: p for p in command(("approvals", "reject")).params}
    assert reject["message"].opts == ["--message", "-m"]
    assert reject["model"].opts == ["--model"]


def test_serve_takes_them_but_session_and_user() -> None:
    params = {p.name: p for p in command(("serve",)).params}
    run = {p.name: p for p in command(("run",)).params}
    served = [name for name in SHARED if name not in ("session", "user")]

    assert "session" not in params
    assert "user" not in params
    assert [described(params[name]) for name in served] == [described(run[name]) for name in served]


def test_the_options_stand_where_the_parameter_does_and_arrive_as_one_value() -> None:
    received: list[tuple[str, AgentArgs, bool]] = []
    demo = typer.Typer(add_completion=False)

    @demo.command()
    @agent_command()
    def go(
        first: Annotated[str, typer.Argument()],
        given: AgentArgs,
        last: Annotated[bool, typer.Option("--last")] = False,
    ) -> None:
        """A command with the agent options between its own."""
        received.append((first, given, last))

    names = [p.name for p in typer.main.get_command(demo).params]
    argv = "x -w ws -s s1 -u u1 -m scripted:f --store redis://h --context-window 4096"
    argv += " -o a=1 -o b=2 --mcp-config t.json --approval deploy_* --engine temporal://h:1"
    argv += " -v --last"
    result = CliRunner().invoke(demo, argv.split())

    assert result.exit_code == 0, result.output
    assert names == ["first", *SHARED, "last"]
    assert received == [
        (
            "x",
            AgentArgs(
                workspace=Path("ws"),
                session="s1",
                user="u1",
                model="scripted:f",
                store="redis://h",
                context_window=4096,
                options=("a=1", "b=2"),
                mcp_config=Path("t.json"),
                approvals=("deploy_*",),
                engine="temporal://h:1",
                verbose=True,
            ),
            True,
        )
    ]


def test_without_any_option_the_value_is_the_defaults() -> None:
    received: list[AgentArgs] = []
    demo = typer.Typer(add_completion=False)

    @demo.command()
    @agent_command(per_turn=False)
    def go(given: AgentArgs) -> None:
        """A command of no session."""
        received.append(given)

    result = CliRunner().invoke(demo, [])

    assert result.exit_code == 0, result.output
    assert received == [AgentArgs()]
    assert "--session" not in [o for p in typer.main.get_command(demo).params for o in p.opts]
